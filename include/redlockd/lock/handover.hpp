// Hand-over: an UNLOCK whose resource has a waiter at the head of this daemon's queue gives the
// lock to that waiter in one round (the hand_over script), instead of a release round and then
// an acquisition round. The waiter's operation runs the round as an acquisition (quorum,
// validity from the start of the round, fencing as LOCK); the releaser's answer follows the
// release rule: OK when its key was found (and replaced) on a quorum. No I/O.
#pragma once

#include "redlockd/lock/decisions.hpp"
#include "redlockd/lock/owner.hpp"
#include "redlockd/lock/redlock.hpp"
#include "redlockd/resp/script_calls.hpp"

#include <cstdint>

namespace redlockd {

// What decides whether an UNLOCK hands over.
struct hand_over_facts {
  bool releaser_holds = false; // the UNLOCK's owner is the lease (or KEEP lock) granted here
  bool head_waiting = false;   // the resource's head waiter is between attempts
  bool delayed = false;        // the resource is lock-delayed
};
bool hand_over_applies(const hand_over_facts& facts);

// One master's answer to a hand-over.
struct hand_over_vote {
  acquire_vote waiter;   // the new owner's vote, as an acquire's
  bool answered = false; // the master answered the whole script
  bool found = false;    // the releasing owner's key was there, and is the new owner's now
};
// `validity_ms` is what the waiter's attempt has left now, as for count_acquire.
hand_over_vote count_hand_over(const hand_over_reply& reply, fence_register& fences,
                               fence_round& round, std::uint64_t& retry_ms,
                               std::int64_t validity_ms);

// The releaser's side of a hand-over round, kept in the waiter's operation while it runs.
struct hand_over_state {
  bool active = false;
  owner_id from{};               // the releasing owner
  std::uint32_t unlock_slot = 0; // the UNLOCK's operation, answered when the outcome is known
  std::uint64_t unlock_serial = 0;
  std::uint32_t found = 0;    // masters where the releasing owner's key was replaced
  std::uint32_t answered = 0; // masters that answered the script

  void record(std::size_t node, const hand_over_vote& v) {
    const std::uint32_t bit = std::uint32_t{1} << node;
    if (v.answered)
      answered |= bit;
    if (v.found)
      found |= bit;
  }
};

// The releaser's verdict, from the masters that found its key and the waiter's round (whose
// pending nodes may still find it): released (OK) once found on a quorum, notheld once that can
// no longer happen, pending until then.
enum class hand_over_release : std::uint8_t { pending, released, notheld };
hand_over_release judge_hand_over_release(std::uint32_t found, const vote_tally& waiter_round);

} // namespace redlockd
