// LOCK's own path in the engine: attempts and their fencing rounds, WAIT (one FIFO queue per
// resource; only its head tries), and KEEP (renewed about every TTL/3 while the connection
// lives). Part of lock_engine (the orchestrator is lock_engine.cpp).
#include "redlockd/lock/decisions.hpp"
#include "redlockd/lock/lock_engine.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>

namespace redlockd {
namespace {

// Rounds of fencing proposals before an acquisition gives up. Each round proposes a value above
// everything seen; only daemons racing on the same fleet make a round fail.
constexpr unsigned max_fence_rounds = 4;

// A waiter refused without a hint (or because nodes are down) tries again after this long.
constexpr std::uint64_t default_retry_ms = 20;

// Whether queue `key` is a set holding one of the lock keys `members`.
bool shares_member(const std::string& key, const std::vector<std::string_view>& members) {
  if (key.find(member_separator) == std::string::npos)
    return false;
  for (const std::string_view member : members_of(key))
    if (std::find(members.begin(), members.end(), member) != members.end())
      return true;
  return false;
}

} // namespace

void lock_engine::try_acquire(std::uint32_t slot) {
  operation& op = slots_[slot];
  if (op.lock.queued && (op.lock.ticket != 0 || op.lock.deferred) && now_() >= op.lock.wait_until) {
    // Its wait ran out, but a socket handler (a wake-up) ran before the expiry timer in this
    // loop turn: no attempt starts after the wait (a first one held back had its chance).
    wait_ran_out(slot);
    return;
  }
  if (const auto until = leases_.delayed_until(op.key)) {
    ++counters_.delayed;
    const std::uint64_t remaining = ms_until(now_(), *until);
    if (!op.lock.queued) {
      ++counters_.busy;
      finish(slot, format_busy(remaining));
      return;
    }
    op.enter(op_phase::waiting);
    op.lock.last_failure = format_busy(remaining);
    op.lock.retry_stamp = 0;
    schedule_retry(slot, *until);
    return;
  }
  if (op.lock.queued && op.hold_kind == lock_kind::multi && held_back(slot))
    return;
  new_attempt(op);
  begin_round(slot, op_phase::voting, traits_of(op.hold_kind).acquire_request);
}

bool lock_engine::held_back(std::uint32_t slot) {
  // Waiting sets that share a member are queues of their own: their heads raced each other at
  // every release, split the masters and retried (the hot MLOCK row of scripts/bench). A set
  // goes when the other's attempt is decided (retry_deferred), or in 20 ms at the latest; a
  // wait that would run out before then tries now (WAIT 0 tries once).
  operation& op = slots_[slot];
  const clock_type::time_point backstop = now_() + std::chrono::milliseconds(default_retry_ms);
  if (backstop >= op.lock.wait_until || !set_attempt_out(op))
    return false;
  op.enter(op_phase::waiting);
  op.lock.deferred = true;
  op.lock.retry_stamp = 0;
  schedule_retry(slot, backstop);
  return true;
}

bool lock_engine::set_attempt_out(const operation& op) const {
  const std::vector<std::string_view> members = members_of(op.key);
  bool out = false;
  queues_.for_each_head([&](const std::string& key, const wait_queues::waiter& head) {
    const op_phase phase = slots_[head.slot].phase;
    if (!out && key != op.key && (phase == op_phase::voting || phase == op_phase::fencing))
      out = shares_member(key, members);
  });
  return out;
}

void lock_engine::retry_deferred(const std::string& key) {
  // Oldest request first (sets_sharing's order), a microsecond apart: deadlines due at the same
  // time fire in no set order, and the first to go holds back those it overlaps.
  std::size_t i = 0;
  for (const std::string& set : sets_sharing(key)) {
    const std::uint32_t slot = queues_.head(set)->slot;
    if (slots_[slot].lock.deferred && slots_[slot].phase == op_phase::waiting)
      schedule_retry(slot, now_() + std::chrono::microseconds(i++));
  }
}

void lock_engine::new_attempt(operation& op) {
  // Every attempt is a new acquisition: a fresh owner, a fresh start time, a fresh proposal.
  // The owner says the hold's kind (lock_kind.hpp); an exclusive one never looks tagged.
  do
    op.owner = tag_owner(owners_.next(), op.hold_kind);
  while (op.hold_kind == lock_kind::exclusive && is_tagged(view(op.owner)));
  op.lock.slots.fill(-1);
  op.lock.permits_in_force = 0;
  op.lock.refused_for_n = 0;
  op.t0 = now_();
  op.lock.fence = fence_round(propose_fence(op.lock.fence_floored));
  op.lock.fence_rounds = 0;
  op.lock.retry_ms = 0;
  op.lock.took = 0;
  op.lock.grant_generation = 0;
  op.lock.grant_pending = 0;
  op.lock.kept_ticket = 0;
  op.lock.rivals_marked = false;
  if (op.lock.queued && op.lock.ticket == 0)
    op.lock.ticket = op.lock.fence.proposed();
  op.lock.retry_stamp = 0; // a retry still pending would be one attempt too many
  op.lock.woken = false;
  op.lock.deferred = false;
}

void lock_engine::decide_lock(std::uint32_t slot, const verdict& v) {
  operation& op = slots_[slot];
  if (op.phase == op_phase::voting && votes_of(slot).state() == vote_tally::outcome::reached) {
    op.watch.granted = votes_of(slot).yes_mask(); // a fencing round resets the tally
    op.lock.grant_generation = op.generation;
    op.lock.grant_pending = votes_of(slot).mask_of(vote::pending);
  }
  switch (v.what) {
  case verdict::kind::granted:
    if (below_clock_at_start(op)) {
      // Proposed before this daemon knew the masters' clock (its first grants), and the votes
      // brought it: the token goes above it first. Tokens then go on from the clock even where
      // this daemon took a fleet whose registers a majority lost for a new one (simulator seed
      // 241625: one master never seeded, another restarted empty, the third down; tokens went
      // back to 1). INFO counts it with the other second rounds (fence_conflicts).
      if (op.phase == op_phase::voting)
        ++counters_.fence_conflicts;
      start_fencing_round(slot);
      return;
    }
    lock_acquired(slot, v.validity_ms);
    return;
  case verdict::kind::fence_again:
    if (op.phase == op_phase::voting)
      ++counters_.fence_conflicts;
    start_fencing_round(slot);
    return;
  case verdict::kind::busy:
    lock_failed(slot, format_busy(op.lock.retry_ms));
    return;
  default:
    lock_failed(slot, format_noquorum(op.tally.yes(), op.tally.needed()));
    return;
  }
}

void lock_engine::start_fencing_round(std::uint32_t slot) {
  operation& op = slots_[slot];
  if (++op.lock.fence_rounds > max_fence_rounds) {
    log_->warn("giving up on a fencing token for '{}' after {} rounds", op.key, max_fence_rounds);
    lock_failed(slot, format_noquorum(0, op.tally.needed()));
    return;
  }
  fences_.observe(op.lock.fence.max_previous());
  op.lock.fence = fence_round(propose_fence(op.lock.fence_floored));
  begin_round(slot, op_phase::fencing, request_kind::fence_bump);
}

bool lock_engine::below_clock_at_start(const operation& op) const {
  if (op.lock.fence_floored)
    return false;
  const auto time = health_.fleet_time_us();
  if (!time)
    return false;
  // The clock when the attempt started: a proposal at or above it (a register that already
  // follows the clock) needs no second round.
  const auto since = std::chrono::duration_cast<std::chrono::microseconds>(now_() - op.t0).count();
  const std::uint64_t elapsed = since > 0 ? static_cast<std::uint64_t>(since) : 0;
  return op.lock.fence.proposed() + elapsed < *time;
}

std::uint64_t lock_engine::propose_fence(bool& floored) {
  const auto time = health_.fleet_time_us();
  floored = time.has_value();
  return fences_.propose(time.value_or(0));
}

void lock_engine::lock_acquired(std::uint32_t slot, std::int64_t validity) {
  operation& op = slots_[slot];
  if (op.hold_kind == lock_kind::multi)
    retry_deferred(op.key);    // refused, they are marked and sleep until its release wakes them
  health_.granting(op.ttl_ms); // a refused TTL never counts: only what a quorum granted
  const auto expires = op.t0 + std::chrono::milliseconds(op.ttl_ms);
  acquire_round_latency_.record(now_() - op.t0);
  if (op.hold_kind == lock_kind::permit)
    take_slot(slot);
  if (op.lock.queued && op.lock.rivals_marked && traits_of(op.hold_kind).waiters_may_share)
    wake_yielded(op);
  if (op.lock.queued) {
    dequeue(slot, std::nullopt, true);
    // The grant kept this daemon's entry on the masters for its next waiter, after every head
    // marked there. That waiter takes the latest of those places: with its own first proposal
    // it could come after heads of other daemons that yielded to the kept entry, yield to them
    // in turn, and all sleep on a free lock (simulator seeds 70595, 130212).
    if (const auto next = queues_.head(op.key)) {
      operation& following = slots_[next->slot];
      if (following.lock.ticket == 0 && traits_of(following.hold_kind).leaves_marks)
        following.lock.ticket = op.lock.kept_ticket;
    }
    // The next waiter is woken by an UNLOCK through this daemon, or tries when this lease ends;
    // behind a shared hold or a permit it tries now (it may be granted beside it).
    wake_head(op.key, traits_of(op.hold_kind).waiters_may_share
                          ? now_()
                          : expires + jitter(default_retry_ms));
  }
  if (!op.sink) {
    // The client left while its acquisition was in flight: nobody will use or release it.
    const std::string key = op.key;
    cleanups_.everywhere(op.hold(), op.owner, expires, released::lock,
                         expecting(op.watch.granted, now_() + std::chrono::milliseconds(validity)));
    // A permit's master that has not answered the winning round may give it another slot,
    // which the lock's release (of the majority's slot) leaves: the attempt's goes there too.
    if (op.hold_kind == lock_kind::permit)
      for (std::size_t node = 0; node < node_count_; ++node)
        if ((op.lock.grant_pending & (std::uint32_t{1} << node)) != 0)
          cleanups_.on(node, op.hold(), op.owner, expires, released::attempt);
    finish(slot, {});
    lock_released(key, now_());
    return;
  }
  ++counters_.acquired;
  ++counters_.granted_by_kind[static_cast<std::size_t>(op.hold_kind)];
  acquire_wait_latency_.record(op.t0 - op.lock.requested_at); // queued before the winning round
  const clock_type::time_point now = now_();
  grant_reply grant;
  grant.line = format_lock_ok(view(op.owner), op.lock.fence.proposed(), validity);
  grant.validity_at = grant.line.rfind(' ') + 1;
  grant.valid_until = now + std::chrono::milliseconds(validity);
  grant.needed = quorum(node_count_);
  if (op.lock.keep) {
    grant.keep_index = start_keep(slot, validity);
    grant.keep_generation = keeps_.at(grant.keep_index).generation;
  } else {
    leases_.grant(op.key,
                  {op.owner, expires, now_() + std::chrono::milliseconds(validity),
                   op.watch.granted, op.lock.fence.proposed(), op.lock.label, op.hold_kind});
  }
  watch_late_grants(slot);
  op.watch.drain = true; // grants that come after the reply belong to the lock too
  finish_grant(slot, std::move(grant));
}

bool lock_engine::grants_for(const script_reply& reply, std::size_t node, std::int64_t slot) const {
  // A complete grant of a trusted master (of the permit's own slot).
  const auto* acquire = std::get_if<acquire_reply>(&reply);
  return acquire != nullptr && acquire->complete && acquire->status == 1 &&
         (!acquire->slot || *acquire->slot == slot) && health_.trusted(node);
}

bool lock_engine::grants_other_slot(const script_reply& reply, std::int64_t slot) {
  // A permit's grant of another slot than `slot` (it holds that one there).
  const auto* acquire = std::get_if<acquire_reply>(&reply);
  return acquire != nullptr && acquire->complete && acquire->status == 1 && acquire->slot &&
         *acquire->slot != slot;
}

void lock_engine::late_winning_grant(const request_tag& tag, std::size_t node,
                                     const script_reply& reply) {
  // A grant of the round that won the quorum, come after it (its tag is that round's): the lock
  // is held there too, and its key lost there must be judged as anywhere it was granted
  // (simulator seed 23001971 --faults key-loss: a hand-over met a larger fence, the grants that
  // came during the fencing round were dropped, the lease named three masters of five, and a
  // master that lost its key voted for a second holder). A plain drain collects them when no
  // fencing round follows; here, while the fencing round is out, the operation keeps them, and
  // once it granted, the lease or KEEP lock does (late_grants_).
  // A permit's grant of another slot than the majority's is a minority hold of it, released
  // there: by take_slot when it comes during the fencing round, at once when it comes later.
  operation& op = slots_[tag.op];
  if (op.kind == op_kind::lock && op.phase == op_phase::fencing &&
      tag.generation == op.lock.grant_generation &&
      (op.lock.grant_pending & (std::uint32_t{1} << node)) != 0) {
    op.lock.grant_pending &= ~(std::uint32_t{1} << node);
    if (grants_other_slot(reply, op.lock.slot))
      op.lock.took |= std::uint32_t{1} << node;
    if (grants_for(reply, node, op.lock.slot))
      op.watch.granted |= std::uint32_t{1} << node;
    return;
  }
  const clock_type::time_point now = now_();
  std::erase_if(late_grants_, [&](const late_grant_watch& w) { return w.until <= now; });
  for (auto it = late_grants_.begin(); it != late_grants_.end(); ++it) {
    if (it->slot != tag.op || it->generation != tag.generation ||
        (it->pending & (std::uint32_t{1} << node)) == 0)
      continue;
    it->pending &= ~(std::uint32_t{1} << node);
    if (grants_for(reply, node, it->permit_slot)) {
      if (lease* held = leases_.find(it->key, it->owner))
        held->granted |= std::uint32_t{1} << node;
      if (keep_lock* k = keeps_.find(it->key, it->owner))
        k->granted |= std::uint32_t{1} << node;
    } else if (grants_other_slot(reply, it->permit_slot)) {
      cleanups_.on(node, {it->kind, it->key, it->permits}, it->owner, it->expires,
                   released::attempt);
    }
    if (it->pending == 0)
      late_grants_.erase(it);
    return;
  }
}

void lock_engine::watch_late_grants(std::uint32_t slot) {
  // Granted after a fencing round: the winning round's masters that had not answered may still
  // grant, until that round's deadline.
  const operation& op = slots_[slot];
  if (op.phase != op_phase::fencing || op.lock.grant_pending == 0)
    return;
  // Bounded by the grants of one node timeout: a master that never answers leaves no entry.
  const clock_type::time_point now = now_();
  std::erase_if(late_grants_, [&](const late_grant_watch& w) { return w.until <= now; });
  late_grants_.push_back({slot, op.lock.grant_generation, op.key, op.owner, op.lock.grant_pending,
                          op.lock.slot, op.t0 + node_timeout_for(op.ttl_ms, cfg_.node_timeout_ms),
                          op.hold_kind, op.permits, op.t0 + std::chrono::milliseconds(op.ttl_ms)});
}

void lock_engine::late_grant(const request_tag& tag, const script_reply& reply) {
  // A waiter's failed attempt was decided when a majority refused it; a grant that comes after
  // shows a split as one counted in time does (retry_after_split), once per attempt.
  operation& op = slots_[tag.op];
  const auto* acquire = std::get_if<acquire_reply>(&reply);
  if (op.phase != op_phase::waiting || !op.lock.queued || op.lock.failed_generation == 0 ||
      tag.generation != op.lock.failed_generation || acquire == nullptr || !acquire->complete ||
      acquire->status != 1)
    return;
  op.lock.failed_generation = 0;
  if (!retry_after_split(1, node_count_, op.lock.split_retries))
    return;
  const auto when = now_() + jitter(default_retry_ms);
  if (when >= op.lock.wait_until)
    return;
  ++op.lock.split_retries;
  schedule_retry(tag.op, when);
}

void lock_engine::take_slot(std::uint32_t slot) {
  // A majority gave the same slot (votes_of): the permit is that slot, and the owner says so.
  // Masters that gave this attempt another slot release it there (by the attempt's owner, on
  // whatever slot: a minority hold), so that the slot is free for others.
  operation& op = slots_[slot];
  const std::uint32_t others = op.lock.took & ~op.watch.granted;
  op.owner = tag_owner(op.owner, lock_kind::permit, op.lock.slot);
  for (std::size_t node = 0; node < node_count_; ++node)
    if ((others & (std::uint32_t{1} << node)) != 0)
      cleanups_.on(node, op.hold(), op.owner, op.t0 + std::chrono::milliseconds(op.ttl_ms),
                   released::attempt);
}

void lock_engine::lock_failed(std::uint32_t slot, std::string line) {
  operation& op = slots_[slot];
  acquire_round_latency_.record(now_() - op.t0);
  // A master that refused this attempt's acquire did not set its key: nothing to release there.
  // The others may hold it (a grant, or an answer that never came). After a fencing round the
  // tally is that round's: everywhere.
  const std::uint32_t refused = op.phase == op_phase::voting ? op.tally.mask_of(vote::no) : 0;
  // An attempt that set its key on a majority (too late, or beaten by a fence) refused others
  // as a holder does: its release wakes them as a holder's would (found by the simulator: a
  // waiter slept that key's whole TTL). One on a minority never does: waking waiters for it is
  // the busy loop of issue 21. publish-on-cleanup (the simulator's weakened variant only,
  // config::weakened) releases every attempt as a lock.
  // A permit attempt counts by slot: one spread over slots held none on a majority (seed 108:
  // each such release woke every daemon's head, whose attempts spread again).
  const std::size_t held =
      traits_of(op.hold_kind).votes == vote_rule::same_slot
          ? most_on_one_slot(op.lock.took, std::span(op.lock.slots).first(node_count_))
          : static_cast<std::size_t>(std::popcount(op.lock.took));
  const bool held_majority = held >= quorum(node_count_);
  if (op.lock.check_only)
    // A permit's check round took nothing on any master: nothing to release. It asked for no
    // grant, so it is never NOQUORUM: another n in force (below), else BUSY as behind the queue.
    line = format_busy(0);
  else
    cleanups_.everywhere(op.hold(), op.owner, op.t0 + std::chrono::milliseconds(op.ttl_ms),
                         cfg_.weakened.publish_on_cleanup || held_majority ? released::attempt_held
                                                                           : released::attempt,
                         {}, refused);
  if (!op.lock.check_only && !held_majority && op.lock.took != 0)
    // Its keys refused this daemon's waiters of other queues (a set's attempt, those waiting
    // for its members; the simulator's seed 30119: they slept the key's TTL on free locks).
    // The cleanup wakes nobody through the masters (issue 21's loop); here, a few times.
    attempt_released(op.key, now_());
  if (op.hold_kind == lock_kind::multi)
    retry_deferred(op.key);
  if (another_n_in_force(static_cast<std::size_t>(std::popcount(op.lock.refused_for_n)),
                         node_count_))
    // Another n is in force for this semaphore: no wait makes the request right.
    line = format_error(err_code::permits_mismatch, std::to_string(op.lock.permits_in_force) +
                                                        " permits are in force for this semaphore");
  const bool busy = line.starts_with("BUSY");
  const bool error = line.starts_with("ERR");
  const clock_type::time_point now = now_();
  if (op.lock.queued && op.sink && now < op.lock.wait_until && !error) {
    // Wait for the holder: at the time its remaining TTL suggests, plus jitter so that daemons
    // sharing the fleet do not collide again; never in a busy loop.
    // A release seen while this attempt was out: the lock may be free now, try again at once.
    // After a split vote, the hint may be another head's attempt, gone in a moment: soon, at a
    // random time within the default retry, a few times per release (retry_after_split).
    const bool split = busy && retry_after_split(held, node_count_, op.lock.split_retries);
    if (split)
      ++op.lock.split_retries;
    const std::uint64_t hint =
        split ? 0 : (busy && op.lock.retry_ms > 0 ? op.lock.retry_ms : default_retry_ms);
    const auto when =
        op.lock.woken ? now
                      : std::min(now + std::chrono::milliseconds(hint) + jitter(default_retry_ms),
                                 op.lock.wait_until);
    op.lock.last_failure = std::move(line);
    op.enter(op_phase::waiting);
    op.lock.failed_generation = busy && !split ? op.generation : 0; // late_grant
    op.generation = next_generation(op.generation);
    if (when < op.lock.wait_until)
      schedule_retry(slot, when);
    return;
  }
  if (op.lock.queued)
    // The next waiter tries at once, as after a wait that ran out between attempts: until it
    // has tried, no entry of its own marks it on the masters (this head's ended with its wait),
    // so a release through another daemon would not wake it, and it slept the holder's whole
    // TTL past that release (simulator seed 70131).
    dequeue(slot, now);
  if (busy)
    ++counters_.busy;
  else if (!error)
    ++counters_.noquorum;
  if (held_majority && !op.lock.queued) {
    // Its key refused this daemon's waiters as a holder's does, and it is released now: they
    // try again at once rather than after the TTL they were told (a review: a try-lock whose
    // fencing round failed after a majority granted it).
    const std::string key = op.key;
    finish(slot, std::move(line));
    lock_released(key, now);
    return;
  }
  finish(slot, std::move(line));
}

// ---------------------------------------------------------------------------------------------
// WAIT

void lock_engine::dequeue(std::uint32_t slot, std::optional<clock_type::time_point> wake_next,
                          bool served) {
  operation& op = slots_[slot];
  if (!op.lock.queued)
    return;
  op.lock.queued = false;
  if (op.hold_kind == lock_kind::multi) {
    --set_waiters_;
    // A set's attempts wrote this daemon's entry on each member's mark, which the heads of its
    // queues on those members share, lasting as the set needed it: they try now and mark it
    // as they need it (simulator seed 9505971: a set's wait ran out, the entry ended with it,
    // and another daemon's release of a member woke nobody; its head slept 940 ms).
    for (const std::string_view member : members_of(op.key))
      wake_head(std::string(member), now_());
  }
  // Only the head tries: a new head gets its turn, or it would sleep until its own deadline.
  if (queues_.leave(op.key, {slot, op.serial}) && wake_next)
    wake_head(op.key, *wake_next);
  // The last waiter here left without the lock: this daemon's entry must not hold other
  // daemons' waiters back (best effort; otherwise it ends with its short life). A grant took it
  // out on the masters that granted.
  if (!served && op.lock.ticket != 0 && queues_.waiting_on(op.key) == 0 &&
      traits_of(op.hold_kind).leaves_marks)
    unmark(op.key);
}

void lock_engine::unmark(const std::string& key) {
  // A set's waiter is marked on each member's wait mark: one call per mark. The daemon has one
  // entry per mark, which its other waiters on a member (the member's own queue, or another
  // set's) share: while one of them waits, the entry stays, or another daemon's release would
  // not wake it and it would sleep on a free lock (simulator seed 232718: a set's waiter whose
  // wait ran out took the entry of a waiter on one member, which then slept 500 ms).
  std::string command;
  for (const std::string_view member : members_of(key)) {
    const std::string name(member);
    if (queues_.waiting_on(name) > 0 || !sets_sharing(name).empty())
      continue;
    command.clear();
    append_unmark(command, script_by::sha, wait_marker(marker_, keys_, member), member, daemon_id_,
                  keys_.wake);
    for (std::size_t node = 0; node < node_count_; ++node)
      if (io_.usable(node))
        io_.send(node, request_tag{request_kind::unmark, 0, 0}, command);
  }
}

void lock_engine::wake_yielded(const operation& op) {
  // Other daemons' heads that yielded their turn to this one sleep until about its entry's
  // end, and the grant's scripts wake nobody (a grant on some masters only would wake heads
  // whose attempts then fail). Decided, it wakes them: they may be granted beside it
  // (simulator seeds 300018 and 300091 --mix shared: readers of three daemons went in one after
  // another, each asleep on a free lock until the one before it was granted).
  std::string command;
  append_wake_yielded(command, script_by::sha, wait_marker(marker_, keys_, op.key), op.key,
                      daemon_id_, op.lock.ticket, keys_.wake);
  for (std::size_t node = 0; node < node_count_; ++node)
    if (io_.usable(node))
      io_.send(node, request_tag{request_kind::wake_yielded, 0, 0}, command);
}

void lock_engine::wait_ran_out(std::uint32_t slot) {
  operation& op = slots_[slot];
  dequeue(slot, now_());
  if (op.lock.last_failure.starts_with("BUSY"))
    ++counters_.busy;
  else
    ++counters_.noquorum;
  finish(slot, std::move(op.lock.last_failure));
}

void lock_engine::wake_head(const std::string& key, clock_type::time_point when) {
  const auto head = queues_.head(key);
  if (head && slots_[head->slot].phase == op_phase::waiting)
    schedule_retry(head->slot, when);
}

void lock_engine::schedule_retry(std::uint32_t slot, clock_type::time_point when) {
  operation& op = slots_[slot];
  // One retry pending at a time, the earliest: a later one adds nothing.
  if (op.lock.retry_stamp != 0 && op.lock.retry_at <= when)
    return;
  op.lock.retry_stamp = next_serial_++;
  op.lock.retry_at = when;
  add_deadline(when, slot, op.lock.retry_stamp, timer_kind::wait_retry);
}

void lock_engine::lock_released(const std::string& key, clock_type::time_point when) {
  retry_head(key, when);
  if (key.find(member_separator) != std::string::npos)
    // A set: each member is free now, for its own waiters and for other sets that wait for it.
    for (const std::string_view member : members_of(key))
      retry_head(std::string(member), when);
  // The sets that wait for it, oldest request first, a microsecond apart (as retry_deferred).
  std::size_t i = 0;
  for (const std::string& set : sets_sharing(key))
    retry_head(set, when + std::chrono::microseconds(i++));
}

void lock_engine::attempt_released(const std::string& key, clock_type::time_point now) {
  const clock_type::time_point when = now + jitter(default_retry_ms);
  if (key.find(member_separator) != std::string::npos)
    for (const std::string_view member : members_of(key))
      retry_head_counted(std::string(member), when);
  for (const std::string& set : sets_sharing(key))
    retry_head_counted(set, when);
}

void lock_engine::retry_head_counted(const std::string& key, clock_type::time_point when) {
  const auto head = queues_.head(key);
  if (!head)
    return;
  operation& op = slots_[head->slot];
  if (op.lock.split_retries >= max_split_retries)
    return; // it sleeps its hint: no chain of failed attempts waking each other goes on
  ++op.lock.split_retries;
  if (op.phase == op_phase::waiting)
    schedule_retry(head->slot, when);
  else
    op.lock.woken = true;
}

void lock_engine::retry_head(const std::string& key, clock_type::time_point when) {
  const auto head = queues_.head(key);
  if (!head)
    return;
  operation& op = slots_[head->slot];
  op.lock.split_retries = 0;
  if (op.phase == op_phase::waiting)
    schedule_retry(head->slot, when);
  else
    op.lock.woken = true; // its attempt may have been refused by the holder that just left
}

std::vector<std::string> lock_engine::sets_sharing(const std::string& key) const {
  // Sets have no index by member: their queues are looked through, and only while some set
  // waits at all. The oldest head first: the queues' own order would favour the same sets at
  // every release.
  if (set_waiters_ == 0)
    return {};
  const std::vector<std::string_view> members = members_of(key);
  std::vector<std::pair<std::uint64_t, std::string>> found;
  queues_.for_each_head([&](const std::string& set, const wait_queues::waiter& head) {
    if (set != key && shares_member(set, members))
      found.emplace_back(head.serial, set);
  });
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  out.reserve(found.size());
  for (auto& [serial, set] : found)
    out.push_back(std::move(set));
  return out;
}

void lock_engine::on_released(std::string_view key) {
  wake_key_.assign(key);
  wake_released(wake_key_);
  for (const std::string& set : sets_sharing(wake_key_))
    wake_released(set);
}

void lock_engine::wake_released(const std::string& key) {
  const auto head = queues_.head(key);
  if (!head)
    return; // nobody waits here
  operation& op = slots_[head->slot];
  op.lock.split_retries = 0;
  if (op.phase != op_phase::waiting) {
    op.lock.woken = true; // trying already: again if this attempt fails
    return;
  }
  ++counters_.wakeups;
  try_acquire(head->slot);
}

void lock_engine::on_wake_channel_resumed() {
  // A release may have been published while the channel was down.
  queues_.for_each_head([this](const std::string& key, const wait_queues::waiter&) {
    retry_head(key, now_() + jitter(default_retry_ms));
  });
}

std::chrono::milliseconds lock_engine::jitter(std::uint64_t up_to_ms) {
  std::uniform_int_distribution<std::uint64_t> pick(0, up_to_ms);
  return std::chrono::milliseconds(pick(random_));
}

// ---------------------------------------------------------------------------------------------
// KEEP

std::uint32_t lock_engine::start_keep(std::uint32_t slot, std::int64_t validity) {
  operation& op = slots_[slot];
  const clock_type::time_point now = now_();
  const clock_type::time_point hold_until =
      op.lock.max_hold_ms == 0 ? clock_type::time_point::max()
                               : now + std::chrono::milliseconds(op.lock.max_hold_ms);
  const std::uint32_t index =
      keeps_.add(op.key, op.owner, op.ttl_ms, now + std::chrono::milliseconds(validity),
                 op.watch.granted, op.lock.fence.proposed(), op.sink, op.seq, hold_until);
  keep_lock& k = keeps_.at(index);
  k.label = op.lock.label;
  k.kind = op.hold_kind;
  k.permits = op.permits;
  k.shown = op.lock.shown;
  op.lock.keep_started = true; // the count now belongs to the KEEP lock
  add_deadline(std::min(op.t0 + std::chrono::milliseconds(op.ttl_ms / 3), hold_until), index,
               keeps_.at(index).generation, timer_kind::renew);
  return index;
}

void lock_engine::renew(std::uint32_t index) {
  keep_lock& k = keeps_.at(index);
  if (!k.active || k.renewing)
    return;
  if (now_() >= k.hold_until) {
    lose(index, "held for its MAXHOLD (or max_hold_ms), not renewed");
    return;
  }
  k.renewing = true;
  const std::uint32_t slot = allocate(op_kind::renew, nullptr, 0);
  operation& op = slots_[slot];
  op.key = k.key;
  op.hold_kind = k.kind;
  op.permits = k.permits;
  op.owner = k.owner;
  op.ttl_ms = k.ttl_ms;
  op.keep_index = index;
  op.keep_generation = k.generation;
  expect_lease(op);
  begin_round(slot, op_phase::voting, request_kind::extend);
}

void lock_engine::decide_renewal(std::uint32_t slot) {
  operation& op = slots_[slot];
  keep_lock* k = keeps_.live(op.keep_index, op.keep_generation);
  if (k == nullptr) {
    finish(slot, {}); // unlocked or dropped meanwhile
    return;
  }
  k->renewing = false;
  const clock_type::time_point now = now_();
  const bool reached = op.tally.state() == vote_tally::outcome::reached;
  const std::int64_t validity = reached ? validity_now(op) : 0;
  const renewal_step step =
      judge_renewal(*k, validity, op.tally.refused_by_majority(), op.t0, now, cfg_.node_timeout_ms);
  switch (step.what) {
  case renewal_step::kind::renewed:
    ++counters_.renewed;
    k->valid_until = now + std::chrono::milliseconds(validity);
    k->granted = op.tally.yes_mask(); // where the key now lives to the new TTL
    add_deadline(std::min(step.next, k->hold_until), op.keep_index, k->generation,
                 timer_kind::renew);
    break;
  case renewal_step::kind::retry:
    add_deadline(std::min(step.next, k->hold_until), op.keep_index, k->generation,
                 timer_kind::renew);
    break;
  case renewal_step::kind::lost:
    lose(op.keep_index, "no quorum renewed it in time");
    break;
  }
  finish(slot, {});
}

void lock_engine::lose(std::uint32_t index, std::string_view why) {
  keep_lock& k = keeps_.at(index);
  ++counters_.lost;
  log_->warn("KEEP lock on '{}' lost: {}", k.key, why);
  if (k.sink)
    k.sink->push(format_lost(k.shown, view(k.owner)), k.seq);
  end_keep(index);
}

void lock_engine::end_keep(std::uint32_t index) {
  keep_lock& k = keeps_.at(index);
  const std::string key = k.key;
  cleanups_.everywhere(k.hold(), k.owner, now_() + std::chrono::milliseconds(k.ttl_ms),
                       released::lock, expecting(k.granted, k.valid_until));
  keeps_.drop(index);
  leases_.delay(key);
  lock_released(key, leases_.delayed_until(key).value_or(now_()));
}

void lock_engine::on_broken(const std::string& key) {
  // BREAK ended the lock key, its shared holders and the semaphore of the same name, and so
  // every set that held the key.
  std::vector<std::string> names{key, key + std::string(permits_suffix)};
  keeps_.for_each([&](const keep_lock& k) {
    if (k.kind == lock_kind::multi && std::ranges::count(members_of(k.key), key) > 0 &&
        std::ranges::count(names, k.key) == 0)
      names.push_back(k.key);
  });
  for (const std::string& name : names) {
    for (const std::uint32_t index : keeps_.all_of(name))
      lose(index, "ended by BREAK"); // lock-delayed and its head waiter woken by end_keep
    leases_.forget(name);
    leases_.delay(name);
    lock_released(name, leases_.delayed_until(name).value_or(now_()));
  }
}

// ---------------------------------------------------------------------------------------------
// Grants written later than decided, and the end of the daemon

std::optional<clock_type::time_point> lock_engine::valid_until(const grant_reply& grant) const {
  if (grant.keep_generation == 0)
    return grant.valid_until;
  const keep_lock* k = keeps_.live(grant.keep_index, grant.keep_generation);
  return k ? std::optional(k->valid_until) : std::nullopt;
}

void lock_engine::grant_expired(const grant_reply& grant) {
  // The client never saw this KEEP lock: release it without a LOST.
  if (grant.keep_generation == 0)
    return;
  keep_lock* k = keeps_.live(grant.keep_index, grant.keep_generation);
  if (k == nullptr)
    return;
  cleanups_.everywhere(k->hold(), k->owner, now_() + std::chrono::milliseconds(k->ttl_ms),
                       released::lock, expecting(k->granted, k->valid_until));
  const std::string key = k->key;
  keeps_.drop(grant.keep_index);
  lock_released(key, now_());
}

void lock_engine::shutdown() {
  for (std::uint32_t index = 0; index < keeps_.slots(); ++index) {
    keep_lock& k = keeps_.at(index);
    if (!k.active)
      continue;
    if (k.sink)
      k.sink->push(format_lost(k.shown, view(k.owner)), k.seq);
    ++counters_.lost;
    cleanups_.everywhere(k.hold(), k.owner, now_() + std::chrono::milliseconds(k.ttl_ms),
                         released::lock, expecting(k.granted, k.valid_until));
    keeps_.drop(index);
  }
  for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
    operation& op = slots_[slot];
    if (op.kind != op_kind::lock || !op.lock.queued)
      continue;
    dequeue(slot);
    if (op.phase == op_phase::waiting)
      finish(slot, format_error(err_code::shutting_down, "the daemon is stopping"));
    // An attempt in flight is answered when it completes; it no longer waits after that.
  }
}

} // namespace redlockd
