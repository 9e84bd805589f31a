// An UNLOCK handed over to the head waiter of this daemon's queue in one round (handover.hpp).
// Part of lock_engine (the orchestrator is lock_engine.cpp): the UNLOCK's operation runs the
// round as its release and is judged as any UNLOCK; the waiter's votes, read from the same
// answers, go to the waiter's operation, judged as any acquisition (engine_acquire.cpp).
#include "redlockd/lock/handover.hpp"
#include "redlockd/lock/lock_engine.hpp"

namespace redlockd {

bool lock_engine::start_hand_over(std::uint32_t unlock_slot, bool releaser_holds) {
  const std::string& key = slots_[unlock_slot].key;
  const auto head = queues_.head(key);
  hand_over_facts facts;
  facts.releaser_holds = releaser_holds;
  // One script hands a lock to a waiter of the same kind; between kinds (a shared holder and a
  // writer) the release and the waiter's attempt are two rounds.
  const auto hands_over = [&](lock_kind kind) {
    return kind == slots_[unlock_slot].hold_kind && traits_of(kind).hands_over;
  };
  if (head && hands_over(slots_[head->slot].hold_kind)) {
    const operation& waiter = slots_[head->slot];
    facts.head_waiting = waiter.phase == op_phase::waiting;
    facts.head_in_time = now_() < waiter.lock.wait_until;
  }
  if (facts.releaser_holds && facts.head_waiting)
    facts.delayed = leases_.delayed_until(key).has_value();
  if (!hand_over_applies(facts))
    return false;
  ++counters_.handovers;
  const std::uint32_t waiter_slot = head->slot;
  operation& waiter = slots_[waiter_slot];
  new_attempt(waiter);
  // The waiter's round sends nothing itself: the UNLOCK's commands carry its votes.
  open_round(waiter_slot, op_phase::voting);
  for (std::size_t node = 0; node < node_count_; ++node)
    if (!eligible(node))
      waiter.tally.record(node, vote::failed);
  slots_[unlock_slot].handing = {true, waiter_slot, waiter.serial, waiter.generation};
  begin_round(unlock_slot, op_phase::voting, request_kind::hand_over);
  decide(waiter_slot); // no master to ask: over at once
  return true;
}

bool lock_engine::handing_to_waiter(const operation& unlock_op) const {
  const hand_over_link& link = unlock_op.handing;
  if (!link.active)
    return false;
  const operation& waiter = slots_[link.waiter_slot];
  return waiter.serial == link.waiter_serial && waiter.generation == link.waiter_generation &&
         waiter.collecting();
}

void lock_engine::pass_to_waiter(std::uint32_t unlock_slot, std::size_t node,
                                 const script_reply* reply) {
  const operation& op = slots_[unlock_slot];
  const hand_over_link link = op.handing;
  const request_tag waiter_tag{request_kind::acquire, link.waiter_slot, link.waiter_generation};
  if (!handing_to_waiter(op)) {
    // The waiter's round is over: it left, failed or was answered; or its fencing round is out,
    // and a grant of this round is its lock's too (found by the round's tag: the waiter's place
    // may serve another request by now).
    const auto* hand = reply ? std::get_if<hand_over_reply>(reply) : nullptr;
    if (link.active && hand != nullptr)
      late_winning_grant(waiter_tag, node, hand->grant);
    return;
  }
  if (reply == nullptr) {
    if (slots_[link.waiter_slot].tally.record(node, vote::failed))
      after_vote(link.waiter_slot);
    return;
  }
  if (const auto* hand = std::get_if<hand_over_reply>(reply)) {
    take_reply(node, waiter_tag, hand->grant);
    return;
  }
  const auto* error = std::get_if<error_reply>(reply);
  if (error != nullptr && error->noscript())
    return;                             // sent again by source (take_reply): its answer comes then
  take_reply(node, waiter_tag, *reply); // an error: the waiter's vote fails too
}

} // namespace redlockd
