#include "redlockd/lock/handover.hpp"

#include <bit>

namespace redlockd {

bool hand_over_applies(const hand_over_facts& facts) {
  // A lock-delayed resource is not handed over: its head tries when the delay ends.
  return facts.releaser_holds && facts.head_waiting && !facts.delayed;
}

hand_over_vote count_hand_over(const hand_over_reply& reply, fence_register& fences,
                               fence_round& round, std::uint64_t& retry_ms,
                               std::int64_t validity_ms) {
  hand_over_vote out;
  if (!reply.grant.complete || !reply.released)
    return out;
  out.waiter = count_acquire(reply.grant, fences, round, retry_ms, validity_ms);
  out.answered = true;
  // The script only replaces the releasing owner's key with the new owner's, so both go together.
  out.found = *reply.released == 1 && reply.grant.status == 1;
  return out;
}

hand_over_release judge_hand_over_release(std::uint32_t found, const vote_tally& waiter_round) {
  const auto found_on = static_cast<std::size_t>(std::popcount(found));
  if (found_on >= waiter_round.needed())
    return hand_over_release::released;
  if (found_on + waiter_round.pending() < waiter_round.needed())
    return hand_over_release::notheld;
  return hand_over_release::pending;
}

} // namespace redlockd
