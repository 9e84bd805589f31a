// The Redlock decisions of each operation kind, as pure functions: a master's typed reply to one
// vote, and a finished round's votes to a verdict. The engine carries the verdict out. No I/O.
#pragma once

#include "redlockd/lock/fencing.hpp"
#include "redlockd/lock/redlock.hpp"
#include "redlockd/resp/script_calls.hpp"

#include <cstdint>
#include <span>

namespace redlockd {

// One master's answer to an acquire: its vote, and what it says about the fence and the holder.
struct acquire_vote {
  vote cast = vote::failed;
  bool bad_fence = false; // granted, but the fence key holds something that is not a counter
};
// `validity_ms` is what the attempt has left now: a grant that leaves none is no grant. A rival
// ticket (another daemon's waiter) is observed into `fences`.
acquire_vote count_acquire(const acquire_reply& reply, fence_register& fences, fence_round& round,
                           std::uint64_t& retry_ms, std::int64_t validity_ms);
// The ticket of the entry a grant keeps on a master for its daemon's next waiter, as the
// script computes it (kept_ticket in lua/lib/marks.lua): the grant's proposal, or one after the
// largest ticket of another daemon's head marked there (`rival`), whichever is later.
std::uint64_t kept_entry_ticket(std::uint64_t proposal, std::uint64_t rival);
vote count_fence_bump(const fence_bump_reply& reply, fence_register& fences, fence_round& round);
// release and extend: -1 (the key is gone) also sets `gone`.
vote count_release(const release_reply& reply, bool& gone);
vote count_extend(const extend_reply& reply, std::int64_t validity_ms, bool& gone);
// A reply that comes after the operation was answered: only granted / refused / gone matter.
std::optional<std::int64_t> late_result(const script_reply& reply);

struct verdict {
  enum class kind : std::uint8_t { granted, fence_again, busy, notheld, noquorum };
  kind what;
  std::int64_t validity_ms = 0; // granted
};

// A permit's acquire round as a tally over one slot (each slot is a mutex): the slot most
// masters granted (the smallest on a tie) is `winner`, its masters vote yes, a master that
// granted another slot votes no (this hold is not there), the rest as they voted. `slots[i]` is
// the slot master i granted (-1: none).
vote_tally same_slot_view(const vote_tally& raw, std::span<const std::int16_t> slots,
                          std::uint32_t& winner);

// How many of the masters in `took` granted one and the same slot, the most of any slot: a permit
// attempt spread over slots holds no slot on a majority, whatever `took` counts.
std::size_t most_on_one_slot(std::uint32_t took, std::span<const std::int16_t> slots);

// Whether a failed permit attempt is refused ERR PERMITS_MISMATCH: `refused` of `nodes` masters
// hold another n, so many that no majority can grant without one of them. Fewer are a minority
// that a late attempt of another n left there for its TTL (simulator seed 101914): the
// request's own n is in force, and it is BUSY (or waits) as any other attempt that failed.
bool another_n_in_force(std::size_t refused, std::size_t nodes);

// Whether a waiter's failed attempt tries again soon instead of after its refusal's hint. An
// attempt that set its key on some masters (`held` of `nodes`; a round is decided as soon as a
// majority refused, and a grant that comes after counts too) but not on a majority may have
// split the masters with another daemon's head: each was refused by the other's attempt key,
// whose TTL is the hint, and whose cleanup wakes nobody (a minority release wakes nobody, or
// waiters loop: issue 21). Both slept the whole TTL on a free lock (10 s in scripts/bench's hot
// row on two daemons). Soon means a few times per release seen (`retried` since the last one;
// each master's wake-up message counts as one), so a waiter that a holder on a majority refuses
// still makes a bounded number of attempts.
inline constexpr unsigned max_split_retries = 3;
bool retry_after_split(std::size_t held, std::size_t nodes, unsigned retried);

// LOCK after its acquire round (fencing: after a fence round).
verdict judge_acquire(const vote_tally& tally, bool fence_conflict, std::int64_t validity_ms);
verdict judge_fencing(const vote_tally& tally, bool fence_conflict, std::int64_t validity_ms);
// UNLOCK: granted means released on a quorum.
verdict judge_release(const vote_tally& tally);
// EXTEND (and a KEEP renewal).
verdict judge_extend(const vote_tally& tally, std::int64_t validity_ms);

} // namespace redlockd
