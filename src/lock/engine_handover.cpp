// An UNLOCK handed over to the head waiter of this daemon's queue in one round (handover.hpp).
// Part of lock_engine (the orchestrator is lock_engine.cpp): the waiter's operation runs the
// round and is then judged as any acquisition (engine_acquire.cpp); the UNLOCK waits for it.
#include "redlockd/lock/handover.hpp"
#include "redlockd/lock/lock_engine.hpp"

namespace redlockd {

bool lock_engine::start_hand_over(std::uint32_t unlock_slot, bool releaser_holds) {
  const operation& releaser = slots_[unlock_slot];
  const auto head = queues_.head(releaser.key);
  hand_over_facts facts;
  facts.releaser_holds = releaser_holds;
  facts.head_waiting = head && slots_[head->slot].phase == op_phase::waiting;
  if (facts.releaser_holds && facts.head_waiting)
    facts.delayed = leases_.delayed_until(releaser.key).has_value();
  if (!hand_over_applies(facts))
    return false;
  ++counters_.handovers;
  operation& waiter = slots_[head->slot];
  new_attempt(waiter);
  hand_over_state& h = waiter.lock.hand_over;
  h = {};
  h.active = true;
  h.from = releaser.owner;
  h.unlock_slot = unlock_slot;
  h.unlock_serial = releaser.serial;
  begin_round(head->slot, op_phase::voting, request_kind::hand_over);
  return true;
}

bool lock_engine::settle_hand_over(std::uint32_t slot) {
  operation& op = slots_[slot];
  hand_over_state& h = op.lock.hand_over;
  const hand_over_release outcome = judge_hand_over_release(h.found, op.tally);
  if (outcome == hand_over_release::pending)
    return false; // the waiter's verdict waits for the releaser's: the keys must be known
  h.active = false;
  // A master that failed to answer (down, quarantined, timed out) may still hold the releaser's
  // key; one still to answer runs the script first.
  const auto expires = now_() + std::chrono::milliseconds(health_.max_ttl());
  for (std::size_t node = 0; node < node_count_; ++node)
    if (op.tally.of(node) == vote::failed && (h.answered & (std::uint32_t{1} << node)) == 0)
      cleanups_.on(node, op.key, h.from, expires, released::lock);
  operation& releaser = slots_[h.unlock_slot];
  if (releaser.serial != h.unlock_serial || releaser.kind != op_kind::unlock ||
      releaser.phase != op_phase::waiting)
    return true;
  if (outcome == hand_over_release::released) {
    ++counters_.released;
    leases_.release(releaser.key, releaser.owner);
    finish(h.unlock_slot, format_ok());
  } else {
    ++counters_.notheld;
    finish(h.unlock_slot, format_notheld());
  }
  return true;
}

} // namespace redlockd
