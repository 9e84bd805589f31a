#include "redlockd/lock/handover.hpp"

namespace redlockd {

bool hand_over_applies(const hand_over_facts& facts) {
  // A lock-delayed resource is not handed over: its head tries when the delay ends. A head whose
  // WAIT ran out gets no new round: its expiry answers it.
  return facts.releaser_holds && facts.head_waiting && facts.head_in_time && !facts.delayed;
}

} // namespace redlockd
