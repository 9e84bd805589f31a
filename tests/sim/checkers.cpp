#include "checkers.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>

namespace redlockd::sim {
namespace {

std::string format(const char* pattern, auto... values) {
  char text[512];
  std::snprintf(text, sizeof text, pattern, values...);
  return text;
}

double ms(sim_time t) {
  return static_cast<double>(t) / 1000.0;
}

bool granted(const request_record& r) {
  return r.kind == client_op::lock && r.result == outcome::ok;
}

sim_time attempt_start(const request_record& r) {
  return r.attempt_start >= 0 ? r.attempt_start : r.invoke;
}

// When the request stopped mattering to its client: its reply, or the end of its connection or
// of the run.
sim_time completion(const history& h, const request_record& r) {
  if (r.reply >= 0)
    return r.reply;
  const sim_time ended = h.connections[r.connection].ended;
  return ended >= 0 ? ended : h.end;
}

// The UNLOCKs and EXTENDs naming each granted LOCK, in the order they were invoked.
struct lock_followers {
  std::vector<std::vector<std::uint32_t>> unlocks;
  std::vector<std::vector<std::uint32_t>> extends;
  explicit lock_followers(const history& h)
      : unlocks(h.requests.size()), extends(h.requests.size()) {
    for (std::uint32_t i = 0; i < h.requests.size(); ++i) {
      const request_record& r = h.requests[i];
      if (r.lock == none)
        continue;
      (r.kind == client_op::unlock ? unlocks : extends)[r.lock].push_back(i);
    }
  }
};

// The hold's end without the holder's UNLOCK: what the grant (and its EXTENDs, for a lease)
// promised, or for a KEEP lock until its client learnt it was gone.
sim_time promised_end(const history& h, const lock_followers& f, std::uint32_t lock) {
  const request_record& g = h.requests[lock];
  if (g.keep) {
    sim_time end = h.end;
    if (g.lost >= 0)
      end = std::min(end, g.lost);
    if (g.connection_ended >= 0)
      end = std::min(end, g.connection_ended);
    return end;
  }
  sim_time end = g.reply + g.validity_ms * 1000;
  for (const std::uint32_t e : f.extends[lock]) {
    const request_record& x = h.requests[e];
    if (x.result == outcome::ok)
      end = std::max(end, x.reply + x.validity_ms * 1000);
  }
  return end;
}

// Whether `second` (a grant) may have been made over `first`'s hold because a master lost
// `first`'s key (FLUSHALL, a forward clock jump) and the daemon that granted `second` had not
// been told yet: what key-loss detection, per daemon and after the fact, allows. (`first` may
// also be the later of the two to be answered: its quorum was won before the loss.)
bool excused_by_key_loss(const history& h, const request_record& first,
                         const request_record& second) {
  const sim_time t0 = attempt_start(second);
  for (const data_loss& loss : h.losses) {
    if (loss.at >= second.reply || loss.register_lost)
      continue;
    const bool lost_it = std::any_of(loss.locks.begin(), loss.locks.end(), [&](const auto& entry) {
      return entry.first == first.resource && entry.second == first.owner;
    });
    if (!lost_it)
      continue;
    const bool told = std::any_of(h.evidence.begin(), h.evidence.end(), [&](const auto& e) {
      return e.daemon_instance == second.daemon_instance && e.master == loss.master &&
             e.at > loss.at && e.at < t0;
    });
    if (!told)
      return true;
  }
  return false;
}

// The same for fences: a master that lost its fence counter (FLUSHALL) and had not got back to
// it may hand `later` a token below `earlier`'s, until the granting daemon is told.
bool excused_by_fence_loss(const history& h, const request_record& earlier,
                           const request_record& later) {
  const sim_time t0 = attempt_start(later);
  for (const data_loss& loss : h.losses) {
    if (loss.clock_jump || loss.register_lost || loss.at >= later.reply ||
        earlier.fence > loss.fence_before)
      continue;
    if (loss.fence_recovered >= 0 && loss.fence_recovered <= t0)
      continue;
    const bool told = std::any_of(h.evidence.begin(), h.evidence.end(), [&](const auto& e) {
      return e.daemon_instance == later.daemon_instance && e.master == loss.master &&
             e.at > loss.at && e.at < t0;
    });
    if (!told)
      return true;
  }
  return false;
}

std::string owner_text(const owner_id& owner) {
  return std::string(view(owner).substr(0, 8));
}

// Intervals [a, b) during which everything has been healthy for at least `settle`.
// Intervals [a, b) during which everything has been healthy, and free of faults' effects, for at
// least `settle`. A fault disturbs from its start to its end, and a clock that jumped back keeps
// the keys it had that much longer (jumps add up: a key can outlive every jump since it was set).
std::vector<std::pair<sim_time, sim_time>> settled(const history& h, sim_time settle) {
  std::vector<std::pair<sim_time, sim_time>> disturbed;
  sim_time cursor = 0;
  for (const auto& [a, b] : h.healthy) {
    if (a > cursor)
      disturbed.emplace_back(cursor, a);
    cursor = std::max(cursor, b);
  }
  disturbed.emplace_back(cursor, h.end);
  std::map<std::uint32_t, sim_time> jumped_back; // per master, all its backward jumps so far
  for (const fault_record& f : h.faults) {
    sim_time longer = 0;
    if (f.kind == fault_kind::master_clock_jump && f.amount < 0)
      longer = jumped_back[f.target] += -f.amount;
    disturbed.emplace_back(f.start, f.end + longer);
  }
  std::sort(disturbed.begin(), disturbed.end());
  std::vector<std::pair<sim_time, sim_time>> out;
  cursor = 0;
  for (const auto& [a, b] : disturbed) {
    if (a > cursor + settle)
      out.emplace_back(cursor + settle, a);
    cursor = std::max(cursor, b);
  }
  return out;
}

bool inside(const std::vector<std::pair<sim_time, sim_time>>& intervals, sim_time from,
            sim_time to) {
  return std::any_of(intervals.begin(), intervals.end(),
                     [&](const auto& i) { return i.first <= from && to <= i.second; });
}

bool fault_between(const history& h, sim_time from, sim_time to) {
  return std::any_of(h.faults.begin(), h.faults.end(),
                     [&](const fault_record& f) { return f.start <= to && f.end >= from; });
}

} // namespace

const char* to_string(fault_kind kind) {
  switch (kind) {
  case fault_kind::master_crash:
    return "master-crash";
  case fault_kind::master_flushall:
    return "flushall";
  case fault_kind::master_key_loss:
    return "key-loss";
  case fault_kind::master_pause:
    return "master-pause";
  case fault_kind::master_slow:
    return "master-slow";
  case fault_kind::master_clock_jump:
    return "clock-jump";
  case fault_kind::master_drift:
    return "clock-drift";
  case fault_kind::daemon_crash:
    return "daemon-crash";
  case fault_kind::partition:
    return "partition";
  case fault_kind::link_reset:
    return "link-reset";
  case fault_kind::wake_loss:
    return "wake-channel-loss";
  }
  return "?";
}

sim_time drift_allowance(const history& h, std::uint64_t ttl_ms) {
  return static_cast<sim_time>(static_cast<double>(ttl_ms) * 1000.0 * h.clock_drift_factor * 1.5) +
         3000;
}

std::vector<hold> holds_of(const history& h) {
  const lock_followers f(h);
  std::vector<hold> out;
  for (std::uint32_t i = 0; i < h.requests.size(); ++i) {
    const request_record& g = h.requests[i];
    if (!granted(g))
      continue;
    sim_time end = promised_end(h, f, i);
    for (const std::uint32_t u : f.unlocks[i])
      if (h.requests[u].invoke >= g.reply) { // the holder's UNLOCK (one sent earlier is not)
        end = std::min(end, h.requests[u].invoke);
        break;
      }
    if (end > g.reply)
      out.push_back({i, g.resource, g.hold, g.reply, end});
  }
  return out;
}

bool admitted(std::span<const hold* const> active, const hold& next) {
  switch (next.kind) {
  case hold_kind::exclusive:
    return active.empty(); // nobody beside an exclusive hold, and it beside nobody
  }
  return false;
}

std::vector<violation> check_mutual_exclusion(const history& h) {
  std::vector<violation> out;
  std::vector<hold> holds = holds_of(h);
  std::sort(holds.begin(), holds.end(), [](const hold& a, const hold& b) {
    return a.resource != b.resource ? a.resource < b.resource : a.begin < b.begin;
  });
  std::vector<const hold*> active;
  for (std::size_t i = 0; i < holds.size(); ++i) {
    const hold& next = holds[i];
    if (i == 0 || holds[i - 1].resource != next.resource)
      active.clear();
    std::erase_if(active, [&](const hold* a) { return a->end <= next.begin; });
    if (!admitted(active, next)) {
      const request_record& second = h.requests[next.request];
      for (const hold* a : active) {
        const request_record& first = h.requests[a->request];
        // Either holder's key may be the one lost: the other grant then counted that master.
        if (excused_by_key_loss(h, first, second) || excused_by_key_loss(h, second, first))
          continue;
        out.push_back({"mutual-exclusion", next.resource, next.begin,
                       format("request %u (owner %s, daemon %u) was granted at %.3f ms while "
                              "request %u (owner %s, daemon %u) held it from %.3f until %.3f ms",
                              next.request, owner_text(second.owner).c_str(), second.daemon,
                              ms(next.begin), a->request, owner_text(first.owner).c_str(),
                              first.daemon, ms(a->begin), ms(a->end))});
      }
    }
    active.push_back(&next);
  }
  return out;
}

std::vector<violation> check_fences(const history& h) {
  std::vector<violation> out;
  std::vector<std::uint32_t> by_reply;
  for (std::uint32_t i = 0; i < h.requests.size(); ++i)
    if (granted(h.requests[i]))
      by_reply.push_back(i);
  std::vector<std::uint32_t> by_invoke = by_reply;
  std::sort(by_reply.begin(), by_reply.end(),
            [&](auto a, auto b) { return h.requests[a].reply < h.requests[b].reply; });
  std::sort(by_invoke.begin(), by_invoke.end(),
            [&](auto a, auto b) { return h.requests[a].invoke < h.requests[b].invoke; });
  // Unique tokens.
  std::unordered_map<std::uint64_t, std::uint32_t> first_with;
  for (const std::uint32_t i : by_reply) {
    const request_record& g = h.requests[i];
    const auto [it, fresh] = first_with.emplace(g.fence, i);
    if (!fresh && !excused_by_fence_loss(h, h.requests[it->second], g))
      out.push_back({"fences", g.resource, g.reply,
                     format("requests %u and %u were both granted token %llu", it->second, i,
                            static_cast<unsigned long long>(g.fence))});
  }
  // Tokens follow real time: after a grant's OK, every later request gets more.
  std::size_t next = 0;
  std::uint64_t highest = 0;
  std::uint32_t highest_at = none;
  for (const std::uint32_t i : by_invoke) {
    const request_record& b = h.requests[i];
    for (; next < by_reply.size() && h.requests[by_reply[next]].reply < b.invoke; ++next) {
      const request_record& a = h.requests[by_reply[next]];
      if (highest_at == none || a.fence > highest) {
        highest = a.fence;
        highest_at = by_reply[next];
      }
    }
    if (highest_at != none && b.fence <= highest &&
        !excused_by_fence_loss(h, h.requests[highest_at], b))
      out.push_back({"fences", b.resource, b.reply,
                     format("request %u (invoked at %.3f ms) got token %llu, not above token "
                            "%llu of request %u (on resource %s, OK at %.3f ms)",
                            i, ms(b.invoke), static_cast<unsigned long long>(b.fence),
                            static_cast<unsigned long long>(highest), highest_at,
                            h.resources[h.requests[highest_at].resource].c_str(),
                            ms(h.requests[highest_at].reply))});
  }
  return out;
}

std::vector<violation> check_no_resurrection(const history& h) {
  std::vector<violation> out;
  const lock_followers f(h);
  // Grants per resource by reply time, to find one in a gap.
  std::vector<std::vector<sim_time>> grants(h.resources.size());
  for (const request_record& r : h.requests)
    if (granted(r))
      grants[r.resource].push_back(r.reply);
  for (auto& list : grants)
    std::sort(list.begin(), list.end());
  for (std::uint32_t i = 0; i < h.requests.size(); ++i) {
    const request_record& g = h.requests[i];
    if (!granted(g) || g.keep)
      continue;
    sim_time end = g.reply + g.validity_ms * 1000;
    for (const std::uint32_t e : f.extends[i]) {
      const request_record& x = h.requests[e];
      if (x.result != outcome::ok)
        continue;
      if (x.invoke > end) {
        const auto& list = grants[g.resource];
        const auto in_gap = std::upper_bound(list.begin(), list.end(), end);
        if (in_gap != list.end() && *in_gap < x.reply)
          out.push_back({"resurrection", g.resource, x.reply,
                         format("EXTEND %u of request %u answered OK at %.3f ms, though its "
                                "lock had ended at %.3f ms and another client got it at %.3f ms",
                                e, i, ms(x.reply), ms(end), ms(*in_gap))});
      }
      end = std::max(end, x.reply + x.validity_ms * 1000);
    }
  }
  return out;
}

std::vector<violation> check_contract(const history& h) {
  std::vector<violation> out;
  const lock_followers f(h);
  for (std::uint32_t i = 0; i < h.requests.size(); ++i) {
    const request_record& r = h.requests[i];
    if (r.extra_replies > 0)
      out.push_back({"contract", r.resource, r.reply,
                     format("request %u got %u replies", i, r.extra_replies + 1)});
    if (r.lost_before_ok)
      out.push_back(
          {"contract", r.resource, r.lost, format("request %u: LOST came before its OK", i)});
    if (r.result == outcome::pending && h.connections[r.connection].ended < 0)
      out.push_back({"contract", r.resource, r.invoke,
                     format("request %u (invoked at %.3f ms) never got a reply on a connection "
                            "that stayed open",
                            i, ms(r.invoke))});
    // Answered within its rounds: a LOCK's acquisition and up to four fencing rounds, each
    // bounded by the node timeout; a WAIT's last attempt may start as the wait runs out.
    if (r.decided >= 0) {
      const sim_time wait = r.wait_ms > 0 ? r.wait_ms * 1000 : 0;
      const sim_time bound = wait + wait / 200 + 6 * sim_time{h.node_timeout_ms} * 1000 + 5'000;
      if (r.decided - r.invoke > bound)
        out.push_back(
            {"contract", r.resource, r.decided,
             format("request %u (invoked at %.3f ms%s) was answered at %.3f ms, later "
                    "than its rounds allow",
                    i, ms(r.invoke), r.wait_ms >= 0 ? ", with WAIT" : "", ms(r.decided))});
    }
    // An UNLOCK of a lock its holder still held, with nothing faulty from the lock's round to
    // the UNLOCK's answer, answers OK.
    if (r.kind == client_op::unlock && r.lock != none && r.result != outcome::pending &&
        r.result != outcome::ok && f.unlocks[r.lock].front() == i && granted(h.requests[r.lock]) &&
        r.invoke >= h.requests[r.lock].reply) {
      const request_record& g = h.requests[r.lock];
      const sim_time from = attempt_start(g);
      if (r.invoke + 20'000 < promised_end(h, f, r.lock) && !fault_between(h, from, r.reply) &&
          inside(h.healthy, from, r.reply))
        out.push_back({"contract", r.resource, r.reply,
                       format("UNLOCK %u of request %u (held until %.3f ms) was answered "
                              "%s at %.3f ms with nothing faulty",
                              i, r.lock, ms(promised_end(h, f, r.lock)),
                              r.result == outcome::notheld ? "NOTHELD" : "not OK", ms(r.reply))});
    }
  }
  // First come, first served among one daemon's waiters on a resource: no waiter is granted
  // while an earlier one there still waits.
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::uint32_t>> queues;
  for (std::uint32_t i = 0; i < h.requests.size(); ++i) {
    const request_record& r = h.requests[i];
    if (r.kind == client_op::lock && r.wait_ms >= 0)
      queues[{r.daemon_instance, r.resource}].push_back(i);
  }
  for (const auto& [where, waiting] : queues) {
    for (std::size_t later = 1; later < waiting.size(); ++later) {
      const request_record& b = h.requests[waiting[later]];
      if (!granted(b) || b.decided < 0)
        continue;
      for (std::size_t earlier = 0; earlier < later; ++earlier) {
        const request_record& a = h.requests[waiting[earlier]];
        const sim_time a_left =
            std::min(a.decided >= 0 ? a.decided : completion(h, a), a.invoke + a.wait_ms * 1000);
        if (a.invoke < b.invoke && a_left > b.decided) {
          out.push_back({"contract", b.resource, b.decided,
                         format("request %u (LOCK ... WAIT, invoked at %.3f ms) was granted at "
                                "%.3f ms while request %u, queued before it on the same daemon, "
                                "still waited",
                                waiting[later], ms(b.invoke), ms(b.decided), waiting[earlier])});
          break;
        }
      }
    }
  }
  return out;
}

std::vector<violation> check_liveness(const history& h, const liveness_bounds& bounds) {
  std::vector<violation> out;
  const lock_followers f(h);
  const sim_time settle =
      static_cast<sim_time>(h.longest_ttl_ms + h.lock_delay_ms) * 1000 + 200'000;
  const auto calm = settled(h, settle);
  if (calm.empty())
    return out;

  // When each grant's key can be gone from the masters: at a successful UNLOCK (or hand-over),
  // else when its TTL (from its last renewal) ran out, and lock-delay after that.
  const sim_time delay = static_cast<sim_time>(h.lock_delay_ms) * 1000;
  std::vector<std::vector<std::pair<sim_time, sim_time>>> busy(h.resources.size());
  for (std::uint32_t i = 0; i < h.requests.size(); ++i) {
    const request_record& g = h.requests[i];
    if (g.kind != client_op::lock)
      continue;
    const sim_time ttl = static_cast<sim_time>(g.ttl_ms) * 1000;
    if (g.result != outcome::ok) {
      // A grant its client never saw (written too late) still holds the masters.
      if (g.attempt_start >= 0)
        busy[g.resource].emplace_back(g.attempt_start,
                                      g.attempt_start + ttl + drift_allowance(h, g.ttl_ms) + delay);
      continue;
    }
    sim_time gone = -1;
    for (const std::uint32_t u : f.unlocks[i])
      if (h.requests[u].result == outcome::ok) {
        gone = h.requests[u].reply;
        break;
      }
    if (gone < 0) {
      const sim_time end = promised_end(h, f, i);
      gone = g.keep ? end + ttl + delay : end + drift_allowance(h, g.ttl_ms) + delay;
    }
    busy[g.resource].emplace_back(attempt_start(g), gone);
  }

  // Waiters per resource. A LOCK ... WAIT answered ERR (too many waiters, or KEEP locks on its
  // connection) was refused at once and never waited: its ERR may still sit behind earlier
  // replies on its connection.
  std::vector<std::vector<std::uint32_t>> waiters(h.resources.size());
  for (std::uint32_t i = 0; i < h.requests.size(); ++i)
    if (h.requests[i].kind == client_op::lock && h.requests[i].wait_ms >= 0 &&
        h.requests[i].result != outcome::error)
      waiters[h.requests[i].resource].push_back(i);

  for (std::uint32_t resource = 0; resource < h.resources.size(); ++resource) {
    if (waiters[resource].empty())
      continue;
    // Free periods: the complement of the busy intervals.
    auto& spans = busy[resource];
    std::sort(spans.begin(), spans.end());
    std::vector<std::pair<sim_time, sim_time>> free;
    sim_time cursor = 0;
    for (const auto& [a, b] : spans) {
      if (a > cursor)
        free.emplace_back(cursor, a);
      cursor = std::max(cursor, b);
    }
    free.emplace_back(cursor, h.end);

    bool reported = false;
    for (const std::uint32_t w : waiters[resource]) {
      const request_record& r = h.requests[w];
      // It waits until its answer, or until the round that won it the lock started (its OK
      // may then sit behind an earlier reply on its connection, and even expire there).
      sim_time wait_end =
          std::min(completion(h, r), r.invoke + static_cast<sim_time>(r.wait_ms) * 1000);
      if (r.attempt_start >= 0)
        wait_end = std::min(wait_end, r.attempt_start);
      for (const auto& [fa, fb] : free) {
        for (const auto& [ca, cb] : calm) {
          const sim_time a = std::max({fa, ca, r.invoke});
          const sim_time b = std::min({fb, cb, wait_end});
          if (b - a > bounds.free_with_waiter && !reported) {
            reported = true; // one report per resource is enough to act on
            out.push_back({"liveness", resource, a + bounds.free_with_waiter,
                           format("request %u (LOCK ... WAIT, daemon %u) waited from %.3f ms on a "
                                  "free resource, all healthy, for more than %.0f ms",
                                  w, r.daemon, ms(a), ms(bounds.free_with_waiter))});
          }
        }
      }
    }

    // Passing over: while a waiter heads its daemon's queue, grants to newer waiters.
    std::vector<std::uint32_t> waiting_grants;
    for (const std::uint32_t w : waiters[resource])
      if (h.requests[w].result == outcome::ok)
        waiting_grants.push_back(w);
    std::sort(waiting_grants.begin(), waiting_grants.end(),
              [&](auto a, auto b) { return h.requests[a].reply < h.requests[b].reply; });
    for (std::size_t k = 0; k < waiters[resource].size() && !reported; ++k) {
      const std::uint32_t w = waiters[resource][k];
      const request_record& r = h.requests[w];
      sim_time head_from = r.invoke;
      for (std::size_t j = 0; j < k; ++j) {
        const request_record& v = h.requests[waiters[resource][j]];
        if (v.daemon_instance == r.daemon_instance && v.invoke < r.invoke)
          head_from = std::max(head_from, completion(h, v));
      }
      sim_time head_to = std::min(completion(h, r), r.invoke + r.wait_ms * 1000);
      if (r.attempt_start >= 0)
        head_to = std::min(head_to, r.attempt_start);
      std::uint32_t passes = 0;
      for (const std::uint32_t gi : waiting_grants) {
        const request_record& g = h.requests[gi];
        if (g.reply < head_from)
          continue;
        if (g.reply >= head_to)
          break;
        if (g.invoke > r.invoke && inside(calm, g.reply, g.reply))
          ++passes;
      }
      if (passes > bounds.passed_over) {
        reported = true;
        out.push_back({"liveness", resource, head_to,
                       format("request %u (LOCK ... WAIT, head of daemon %u's queue from %.3f ms) "
                              "was passed over by %u grants to newer waiters, all healthy",
                              w, r.daemon, ms(head_from), passes)});
      }
    }
  }
  return out;
}

std::vector<violation> check_bounded_work(const history& h) {
  std::vector<violation> out;
  const double m = h.masters;
  // What one second of a resource may cost in script calls (each call runs on one master):
  // a round and its cleanup per request; a waiter retrying every 20 ms at the most (each try a
  // round and a cleanup); a KEEP lock renewed every TTL/3, retried every TTL/10 when failing.
  const double base = 20 * m;
  const double per_request = 6 * m;
  const double per_waiting_second = 2 * m * 60;
  std::map<std::pair<std::uint32_t, std::uint32_t>, double> budget;
  const auto spread = [&](std::uint32_t resource, sim_time from, sim_time to, double per_second) {
    for (sim_time s = from / 1'000'000; s <= to / 1'000'000; ++s) {
      const sim_time a = std::max(from, s * 1'000'000);
      const sim_time b = std::min(to, (s + 1) * 1'000'000);
      if (b > a)
        budget[{resource, static_cast<std::uint32_t>(s)}] +=
            per_second * static_cast<double>(b - a) / 1e6;
    }
  };
  const lock_followers f(h);
  for (std::uint32_t i = 0; i < h.requests.size(); ++i) {
    const request_record& r = h.requests[i];
    budget[{r.resource, static_cast<std::uint32_t>(r.invoke / 1'000'000)}] += per_request;
    if (r.kind == client_op::lock && r.wait_ms >= 0)
      spread(r.resource, r.invoke, completion(h, r), per_waiting_second);
    if (granted(r) && r.keep) {
      const double per_keep_second =
          m * (13000.0 / static_cast<double>(std::max<std::uint64_t>(r.ttl_ms, 1)) + 5);
      spread(r.resource, r.reply, promised_end(h, f, i) + static_cast<sim_time>(r.ttl_ms) * 1000,
             per_keep_second);
    }
  }
  // Calls over any ten seconds against what those ten seconds account for: a release owed to a
  // master while it was down goes out when it is back, later than the attempt that owed it.
  constexpr std::uint32_t window = 10;
  std::map<std::uint32_t, std::map<std::uint32_t, std::uint32_t>> calls; // resource, second
  for (const work_sample& w : h.work)
    calls[w.resource][w.second] += w.calls;
  for (const auto& [resource, by_second] : calls) {
    for (const auto& [second, count] : by_second) {
      double used = 0;
      double allowed = 0;
      const std::uint32_t from = second >= window - 1 ? second - (window - 1) : 0;
      for (std::uint32_t t = from; t <= second; ++t) {
        const auto c = by_second.find(t);
        used += c == by_second.end() ? 0 : c->second;
        const auto b = budget.find({resource, t});
        allowed += base + (b == budget.end() ? 0.0 : b->second);
      }
      if (used > allowed) {
        out.push_back({"work", resource, static_cast<sim_time>(second) * 1'000'000,
                       format("%.0f script calls on its keys in seconds %u to %u, where the "
                              "requests on it account for at most %.0f",
                              used, from, second, allowed)});
        break; // one report per resource
      }
    }
  }
  return out;
}

std::vector<violation> check_all(const history& h) {
  std::vector<violation> out;
  for (auto&& found : {check_mutual_exclusion(h), check_fences(h), check_no_resurrection(h),
                       check_contract(h), check_liveness(h), check_bounded_work(h)})
    out.insert(out.end(), found.begin(), found.end());
  return out;
}

} // namespace redlockd::sim
