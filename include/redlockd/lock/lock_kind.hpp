// The lock family as data: one row per kind (its scripts, how its votes decide, whether waiters
// may share), and the owner tag that tells a hold's kind (and a permit's slot) from its owner
// alone, so that UNLOCK and EXTEND through any daemon need no lookup. No I/O.
//
// Owners stay 40 lowercase hex characters. An exclusive owner is 160 random bits that never
// start with "0000"; every other owner is "0000" + kind (1 hex digit) + slot (3 hex digits, a
// permit's slot, 000 otherwise) + 32 random hex digits (128 bits).
#pragma once

#include "redlockd/lock/owner.hpp"
#include "redlockd/resp/scripts.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace redlockd {

enum class lock_kind : std::uint8_t { exclusive = 0, shared = 1, permit = 2, multi = 3 };
inline constexpr std::size_t lock_kind_count = 4;

// How one round's grants decide: a quorum of grants (exclusive, shared, multi), or a quorum of
// masters that granted the same slot (permits: each slot is a mutex).
enum class vote_rule : std::uint8_t { any_grant, same_slot };

struct lock_kind_traits {
  lock_kind kind;
  std::string_view name; // "exclusive", "shared", "permit", "multi": INFO and the metrics' kind
  script acquire;
  script release;
  script extend;
  vote_rule votes;
  // After a grant, the next waiter of the same queue may be granted too (readers, permits).
  bool waiters_may_share;
};

const lock_kind_traits& traits_of(lock_kind kind);

// A permit's slot fits the tag's three hex digits; max_permits never exceeds it.
inline constexpr std::uint32_t max_slots = 0x1000;

// Marks `random` (fresh owner bits) as a hold of `kind` (and slot). Exclusive owners are
// returned as they are: the caller draws again while is_tagged() says so.
owner_id tag_owner(owner_id random, lock_kind kind, std::uint32_t slot = 0);
bool is_tagged(std::string_view owner);
// The kind and slot an owner says it has (exclusive, 0 for an untagged or unknown tag).
lock_kind kind_of_owner(std::string_view owner);
std::uint32_t slot_of_owner(std::string_view owner);

} // namespace redlockd
