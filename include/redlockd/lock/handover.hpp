// Hand-over: an UNLOCK whose resource has a waiter at the head of this daemon's queue gives the
// lock to that waiter in one round (the hand_over script), instead of a release round and then
// an acquisition round. The UNLOCK runs the round as its own release: each master's answer
// carries release's answer for the releasing owner, so the UNLOCK's tally, node timeout, answer,
// draining and key-loss detection are those of a plain UNLOCK. The same answer carries the
// waiter's vote, which goes to the waiter's operation: its round is an acquisition with its own
// node timeout (validity from the start of the round, fencing as LOCK). No I/O.
#pragma once

#include <cstdint>

namespace redlockd {

// What decides whether an UNLOCK hands over.
struct hand_over_facts {
  bool releaser_holds = false; // the UNLOCK's owner is the lease (or KEEP lock) granted here
  bool head_waiting = false;   // the resource's head waiter is between attempts
  bool head_in_time = false;   // and its WAIT has not run out (its expiry may not have fired yet)
  bool delayed = false;        // the resource is lock-delayed
};
bool hand_over_applies(const hand_over_facts& facts);

// An UNLOCK's link to the waiter whose round its hand_over commands carry: their waiter votes go
// to that round as long as it is the waiter's current one.
struct hand_over_link {
  bool active = false;
  std::uint32_t waiter_slot = 0;
  std::uint64_t waiter_serial = 0;
  std::uint32_t waiter_generation = 0;
};

} // namespace redlockd
