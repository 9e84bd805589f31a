#include "history.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace redlockd::chaos {
namespace {

constexpr std::size_t max_examples = 5;

std::string ms_text(std::int64_t ns) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(3);
  out << static_cast<double>(ns) / 1e9 << "s";
  return out.str();
}

// A successful LOCK and the part of its lease the client could be sure of.
struct grant {
  const operation* lock = nullptr;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

using lock_key = std::pair<std::string, std::string>; // (process, owner)

// What a holder learnt about its lock after the grant.
struct lock_facts {
  std::int64_t unlock_invoke = INT64_MAX;
  std::int64_t lost_ns = INT64_MAX; // KEEP: LOST push or broken connection
  std::int64_t sure_until = 0;      // EXTEND ok, PONG: the lock lasts at least until then
};

std::map<lock_key, lock_facts> facts_of(const std::vector<operation>& history) {
  std::map<lock_key, std::int64_t> keep_ttl;
  for (const auto& op : history)
    if (op.kind == "lock" && op.outcome == "ok" && op.keep)
      keep_ttl[{op.process, op.owner}] = op.ttl_ms;
  std::map<lock_key, lock_facts> out;
  for (const auto& op : history) {
    if (op.owner.empty())
      continue;
    const lock_key key{op.process, op.owner};
    if (op.kind == "unlock") {
      auto& f = out[key];
      f.unlock_invoke = std::min(f.unlock_invoke, op.invoke_ns);
    } else if (op.kind == "lost") {
      auto& f = out[key];
      f.lost_ns = std::min(f.lost_ns, op.complete_ns);
    } else if (op.kind == "extend" && op.outcome == "ok") {
      auto& f = out[key];
      f.sure_until = std::max(f.sure_until, op.invoke_ns + op.validity_ms * 1'000'000);
    } else if (op.kind == "ping" && op.outcome == "ok") {
      if (const auto it = keep_ttl.find(key); it != keep_ttl.end()) {
        auto& f = out[key];
        f.sure_until = std::max(f.sure_until, op.invoke_ns + it->second / 4 * 1'000'000);
      }
    }
  }
  return out;
}

// Grants with their windows (see check_validity_overlap).
std::vector<grant> grants_of(const std::vector<operation>& history) {
  const auto facts = facts_of(history);
  std::vector<grant> out;
  for (const auto& op : history) {
    if (op.kind != "lock" || op.outcome != "ok")
      continue;
    grant g{&op, op.complete_ns, op.invoke_ns + op.validity_ms * 1'000'000};
    if (auto it = facts.find({op.process, op.owner}); it != facts.end()) {
      g.end_ns = std::max(g.end_ns, it->second.sure_until);
      g.end_ns = std::min({g.end_ns, it->second.unlock_invoke, it->second.lost_ns});
    }
    out.push_back(g);
  }
  return out;
}

std::string describe(const operation& lock) {
  std::string kind = lock.keep ? "KEEP " : "";
  if (lock.mode == "shared")
    kind += "shared ";
  else if (lock.mode == "permit")
    kind +=
        "permit slot " + std::to_string(lock.slot) + " of " + std::to_string(lock.permits) + " ";
  else if (lock.mode == "set")
    kind += "set " + lock.resource + " ";
  return kind + lock.process + "@daemon" + std::to_string(lock.daemon) + " fence " +
         std::to_string(lock.fence) + " ok " + ms_text(lock.complete_ns) + " validity " +
         std::to_string(lock.validity_ms) + "ms";
}

// The names a grant holds: a lock's or a shared hold's resource, every member of a set, or for a
// permit its slot, "<semaphore> permit:<slot>" (a namespace apart: resources have no space).
std::vector<std::string> held_names(const operation& lock) {
  if (lock.mode == "set")
    return lock.members;
  if (lock.mode == "permit")
    return {lock.resource + " permit:" + std::to_string(lock.slot)};
  return {lock.resource};
}

// Two holds of one name conflict unless both are shared.
bool conflicting(const operation& a, const operation& b) {
  return a.mode != "shared" || b.mode != "shared";
}

enum class hold_class : std::uint8_t { exclusive, shared, set, permit };
constexpr std::size_t hold_classes = 4;

hold_class class_of(const operation& lock) {
  if (lock.mode == "shared")
    return hold_class::shared;
  if (lock.mode == "set")
    return hold_class::set;
  if (lock.mode == "permit")
    return hold_class::permit;
  return hold_class::exclusive;
}

// The windows of the grants whose class `wanted` admits, by the names they hold.
template <class Wanted>
std::map<std::string, std::vector<grant>> windows_by_name(const std::vector<grant>& grants,
                                                          Wanted wanted) {
  std::map<std::string, std::vector<grant>> out;
  for (const auto& g : grants)
    if (wanted(class_of(*g.lock)))
      for (const auto& name : held_names(*g.lock))
        out[name].push_back(g);
  return out;
}

// One name's windows in start order: a window that starts inside an earlier one of a class
// `conflicts(its class, that class)` names is a violation (one per window, against the earlier
// one of those classes reaching furthest). Windows with nothing certain (the reply came after
// the lease could have ended) take no part.
template <class Conflicts>
void sweep(const std::string& name, std::vector<grant>& windows, checker_result& result,
           Conflicts conflicts) {
  std::sort(windows.begin(), windows.end(),
            [](const grant& a, const grant& b) { return a.start_ns < b.start_ns; });
  std::array<const grant*, hold_classes>
      longest{}; // per class, the earlier window reaching furthest
  for (const auto& g : windows) {
    ++result.checked;
    if (g.end_ns <= g.start_ns)
      continue;
    const auto mine = class_of(*g.lock);
    const grant* against = nullptr;
    for (std::size_t c = 0; c < hold_classes; ++c)
      if (longest[c] != nullptr && conflicts(mine, static_cast<hold_class>(c)) &&
          (against == nullptr || longest[c]->end_ns > against->end_ns))
        against = longest[c];
    if (against != nullptr && g.start_ns < against->end_ns)
      result.add(name + ": " + describe(*g.lock) + " while " + describe(*against->lock) +
                 " was valid until " + ms_text(against->end_ns));
    auto& slot = longest[static_cast<std::size_t>(mine)];
    if (slot == nullptr || g.end_ns > slot->end_ns)
      slot = &g;
  }
}

} // namespace

std::int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

nlohmann::json to_json(const operation& op) {
  return {{"p", op.process},   {"f", op.kind},        {"r", op.resource},
          {"d", op.daemon},    {"inv", op.invoke_ns}, {"end", op.complete_ns},
          {"out", op.outcome}, {"reply", op.reply},   {"owner", op.owner},
          {"fence", op.fence}, {"v", op.validity_ms}, {"e", op.element},
          {"k", op.keep},      {"ttl", op.ttl_ms},    {"m", op.mode},
          {"n", op.permits},   {"slot", op.slot},     {"ms", op.members}};
}

operation operation_from_json(const nlohmann::json& doc) {
  operation op;
  op.process = doc.at("p").get<std::string>();
  op.kind = doc.at("f").get<std::string>();
  op.resource = doc.at("r").get<std::string>();
  op.daemon = doc.at("d").get<int>();
  op.invoke_ns = doc.at("inv").get<std::int64_t>();
  op.complete_ns = doc.at("end").get<std::int64_t>();
  op.outcome = doc.at("out").get<std::string>();
  op.reply = doc.at("reply").get<std::string>();
  op.owner = doc.at("owner").get<std::string>();
  op.fence = doc.at("fence").get<std::uint64_t>();
  op.validity_ms = doc.at("v").get<std::int64_t>();
  op.element = doc.at("e").get<std::string>();
  op.keep = doc.at("k").get<bool>();
  op.ttl_ms = doc.at("ttl").get<std::int64_t>();
  op.mode = doc.at("m").get<std::string>();
  op.permits = doc.at("n").get<int>();
  op.slot = doc.at("slot").get<int>();
  op.members = doc.at("ms").get<std::vector<std::string>>();
  return op;
}

std::vector<operation> read_history(const std::filesystem::path& file) {
  std::vector<operation> out;
  std::ifstream in(file);
  if (!in)
    throw std::runtime_error("history " + file.string() + " cannot be read");
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    try {
      out.push_back(operation_from_json(nlohmann::json::parse(line)));
    } catch (const std::exception& e) {
      throw std::runtime_error("history " + file.string() + " line " + std::to_string(number) +
                               " does not parse (" + e.what() + "): " + line.substr(0, 200));
    }
  }
  return out;
}

void checker_result::add(std::string example) {
  ++violations;
  if (examples.size() < max_examples)
    examples.push_back(std::move(example));
}

checker_result check_validity_overlap(const std::vector<operation>& history) {
  checker_result result{"C1 validity windows never overlap"};
  auto by_name =
      windows_by_name(grants_of(history), [](hold_class c) { return c == hold_class::exclusive; });
  for (auto& [name, windows] : by_name)
    sweep(name, windows, result, [](hold_class, hold_class) { return true; });
  return result;
}

checker_result check_shared_overlap(const std::vector<operation>& history) {
  checker_result result{"C1-RW no exclusive window overlaps a shared one"};
  auto by_name =
      windows_by_name(grants_of(history), [](hold_class c) { return c != hold_class::permit; });
  for (auto& [name, windows] : by_name)
    sweep(name, windows, result, [](hold_class a, hold_class b) {
      return (a == hold_class::shared) != (b == hold_class::shared);
    });
  return result;
}

checker_result check_set_overlap(const std::vector<operation>& history) {
  checker_result result{"C1-multi a set excludes on every member"};
  auto by_name = windows_by_name(grants_of(history), [](hold_class c) {
    return c == hold_class::exclusive || c == hold_class::set;
  });
  for (auto& [name, windows] : by_name)
    sweep(name, windows, result,
          [](hold_class a, hold_class b) { return a == hold_class::set || b == hold_class::set; });
  return result;
}

checker_result check_permit_bound(const std::vector<operation>& history) {
  checker_result result{"C1-k at most n permits, one holder per slot"};
  const auto grants = grants_of(history);
  // No two windows of one slot overlap: each slot is a mutex.
  auto by_slot = windows_by_name(grants, [](hold_class c) { return c == hold_class::permit; });
  for (auto& [name, windows] : by_slot)
    sweep(name, windows, result, [](hold_class, hold_class) { return true; });
  // At no instant more than n windows of the semaphore.
  std::map<std::string, std::vector<grant>> by_semaphore;
  for (const auto& g : grants)
    if (class_of(*g.lock) == hold_class::permit)
      by_semaphore[g.lock->resource].push_back(g);
  for (auto& [semaphore, windows] : by_semaphore) {
    std::sort(windows.begin(), windows.end(),
              [](const grant& a, const grant& b) { return a.start_ns < b.start_ns; });
    std::vector<const grant*> live;
    for (const auto& g : windows) {
      if (g.lock->slot < 0 || g.lock->slot >= g.lock->permits)
        result.add(semaphore + ": " + describe(*g.lock) + " carries a slot outside 0.." +
                   std::to_string(g.lock->permits - 1));
      if (g.end_ns <= g.start_ns)
        continue;
      std::erase_if(live, [&](const grant* other) { return other->end_ns <= g.start_ns; });
      live.push_back(&g);
      if (static_cast<int>(live.size()) > g.lock->permits) {
        std::string holders;
        for (const auto* other : live)
          holders += "; " + describe(*other->lock) + " until " + ms_text(other->end_ns);
        result.add(semaphore + ": " + std::to_string(live.size()) + " permits of " +
                   std::to_string(g.lock->permits) + " valid at " + ms_text(g.start_ns) + holders);
      }
    }
  }
  return result;
}

checker_result check_writer_waits(const std::vector<operation>& history, std::int64_t bound_ms) {
  checker_result result{"C4-RW a waiting writer gets in past readers"};
  const std::int64_t bound_ns = bound_ms * 1'000'000;
  for (const auto& wait : history) {
    if (wait.kind != "lock" || wait.mode != "exclusive")
      continue;
    const bool busy = wait.outcome == "fail" && wait.reply.rfind("BUSY", 0) == 0;
    if (wait.outcome != "ok" && !busy)
      continue;
    ++result.checked;
    if (!busy || wait.complete_ns - wait.invoke_ns < bound_ns)
      continue;
    // Another exclusive hold or a set may have held the resource (up to its TTL): no verdict.
    const bool excused = std::any_of(history.begin(), history.end(), [&](const operation& other) {
      if (&other == &wait || other.kind != "lock" || other.outcome != "ok" ||
          other.mode == "shared" || other.mode == "permit")
        return false;
      const auto names = held_names(other);
      return std::find(names.begin(), names.end(), wait.resource) != names.end() &&
             other.invoke_ns < wait.complete_ns &&
             other.invoke_ns + std::max(other.ttl_ms, other.validity_ms) * 1'000'000 >
                 wait.invoke_ns;
    });
    if (!excused)
      result.add(wait.resource + ": " + wait.process + "@daemon" + std::to_string(wait.daemon) +
                 " waited " + std::to_string((wait.complete_ns - wait.invoke_ns) / 1'000'000) +
                 " ms from " + ms_text(wait.invoke_ns) + " and got " + wait.reply +
                 " with no other writer: starved by readers");
  }
  return result;
}

checker_result check_fence_order(const std::vector<operation>& history) {
  checker_result result{"C2 fences increase in real-time order"};
  std::vector<const operation*> by_ok;
  for (const auto& op : history)
    if (op.kind == "lock" && op.outcome == "ok")
      by_ok.push_back(&op);
  std::map<std::uint64_t, const operation*> seen;
  for (const auto* op : by_ok)
    if (auto [it, fresh] = seen.emplace(op->fence, op); !fresh)
      result.add("fence " + std::to_string(op->fence) + " granted twice: " + describe(*op) +
                 " and " + describe(*it->second));
  std::vector<const operation*> by_invoke = by_ok;
  std::sort(by_ok.begin(), by_ok.end(),
            [](const operation* a, const operation* b) { return a->complete_ns < b->complete_ns; });
  std::sort(by_invoke.begin(), by_invoke.end(),
            [](const operation* a, const operation* b) { return a->invoke_ns < b->invoke_ns; });
  // Sweep: for each grant B in invoke order, the grants completed before B was invoked are a
  // prefix of by_ok; B's fence must exceed the largest fence in that prefix.
  std::size_t done = 0;
  const operation* highest = nullptr;
  for (const auto* b : by_invoke) {
    while (done < by_ok.size() && by_ok[done]->complete_ns < b->invoke_ns) {
      if (highest == nullptr || by_ok[done]->fence > highest->fence)
        highest = by_ok[done];
      ++done;
    }
    ++result.checked;
    if (highest != nullptr && b->fence <= highest->fence)
      result.add(describe(*b) + " invoked " + ms_text(b->invoke_ns) + " after " +
                 describe(*highest) + " completed");
  }
  return result;
}

checker_result check_lost_writes(const std::vector<operation>& history,
                                 const register_state& final_state) {
  checker_result result{"C3 no acknowledged write lost"};
  for (const auto& op : history) {
    if (op.kind != "write" || op.outcome != "ok")
      continue;
    ++result.checked;
    const auto it = final_state.sets.find(op.resource);
    if (it == final_state.sets.end() || !it->second.contains(op.element))
      result.add(op.resource + ": element " + op.element + " written by " + op.process +
                 " with fence " + std::to_string(op.fence) + " at " + ms_text(op.complete_ns) +
                 " is missing");
  }
  return result;
}

std::map<std::pair<std::string, std::string>, std::int64_t>
window_ends(const std::vector<operation>& history) {
  std::map<std::pair<std::string, std::string>, std::int64_t> out;
  for (const auto& g : grants_of(history))
    out[{g.lock->process, g.lock->owner}] = g.end_ns;
  return out;
}

checker_result check_keep_survives_kill(const std::vector<operation>& history,
                                        const std::vector<std::pair<int, std::int64_t>>& kills) {
  checker_result result{"C5 KEEP locks outlive their daemon's kill"};
  const auto facts = facts_of(history);
  std::map<std::string, std::vector<const operation*>> grants_by_name;
  for (const auto& op : history)
    if (op.kind == "lock" && op.outcome == "ok")
      for (const auto& name : held_names(op))
        grants_by_name[name].push_back(&op);
  for (const auto& [daemon, kill_ns] : kills) {
    for (const auto& held : history) {
      if (held.kind != "lock" || held.outcome != "ok" || !held.keep || held.daemon != daemon ||
          held.complete_ns >= kill_ns)
        continue;
      if (const auto it = facts.find({held.process, held.owner});
          it != facts.end() && std::min(it->second.unlock_invoke, it->second.lost_ns) < kill_ns)
        continue; // released or lost before the kill
      ++result.checked;
      const std::int64_t until = kill_ns + held.ttl_ms / 2 * 1'000'000;
      for (const auto& name : held_names(held))
        for (const auto* other : grants_by_name[name])
          if (other != &held && conflicting(held, *other) && other->complete_ns >= kill_ns &&
              other->complete_ns < until)
            result.add(name + ": " + describe(*other) + " within ttl/2 of the kill of daemon" +
                       std::to_string(daemon) + " at " + ms_text(kill_ns) + ", which held " +
                       describe(held));
    }
  }
  return result;
}

stale_write_counts count_stale_writes(const std::vector<operation>& history) {
  std::map<std::pair<std::string, std::uint64_t>, std::int64_t> window_end; // (process, fence)
  for (const auto& g : grants_of(history))
    window_end[{g.lock->process, g.lock->fence}] = g.end_ns;
  stale_write_counts counts;
  for (const auto& op : history) {
    if (op.kind != "write")
      continue;
    const auto it = window_end.find({op.process, op.fence});
    if (it == window_end.end() || op.invoke_ns <= it->second)
      continue;
    ++counts.stale;
    if (op.outcome == "ok")
      ++counts.accepted;
    else if (op.outcome == "fail")
      ++counts.rejected;
  }
  return counts;
}

} // namespace redlockd::chaos
