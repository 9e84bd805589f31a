// The lock family as data: one row per kind (its scripts and how each call is written, how its
// votes decide, whether waiters may share, hand over and leave wait marks), and the owner tag
// that tells a hold's kind (and a permit's slot) from its owner alone, so that UNLOCK and EXTEND
// through any daemon need no lookup. The orchestrator (lock_engine) runs rounds for any kind from
// its row. No I/O.
//
// Owners stay 40 lowercase hex characters. An exclusive owner is 160 random bits that never
// start with "0000"; every other owner is "0000" + kind (1 hex digit) + slot (3 hex digits, a
// permit's slot, 000 otherwise) + 32 random hex digits (128 bits).
#pragma once

#include "redlockd/lock/owner.hpp"
#include "redlockd/resp/pipeline.hpp"
#include "redlockd/resp/script_calls.hpp"
#include "redlockd/resp/scripts.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redlockd {

enum class lock_kind : std::uint8_t { exclusive = 0, shared = 1, permit = 2, multi = 3 };
inline constexpr std::size_t lock_kind_count = 4;

// How one round's grants decide: a quorum of grants (exclusive, shared, multi), or a quorum of
// masters that granted the same slot (permits: each slot is a mutex).
enum class vote_rule : std::uint8_t { any_grant, same_slot };

// A hold as the daemon names it: its queue, its leases and KEEP locks, its lock-delay and the
// wake channel's message all use `name`. For an exclusive or shared hold it is the lock key;
// for a semaphore S the key that holds its n, 'S permits' (its slots are 'S permit:<i>'); for a
// set the member lock keys, sorted, joined by '\n' (a byte no resource has).
struct hold_target {
  lock_kind kind = lock_kind::exclusive;
  std::string_view name;
  std::uint32_t permits = 0; // a semaphore's n
};

inline constexpr std::string_view permits_suffix = " permits";
inline constexpr char member_separator = '\n';

// A set's member keys, in its name's order.
std::vector<std::string_view> members_of(std::string_view set_name);
// Whether set `set_name` has every one of `members` (named in any order).
bool holds_members(std::string_view set_name, const std::vector<std::string_view>& members);
// The name of set `set_name` without `members` ("" when none is left), in its order.
std::string set_without(std::string_view set_name, const std::vector<std::string_view>& members);

// An acquire's arguments. `mark`: a WAIT's attempt (the kinds that leave marks), null otherwise.
struct acquire_call {
  std::string_view owner;
  std::string_view label; // "" without one
  std::uint64_t ttl_ms = 0;
  std::uint64_t proposal = 0;
  std::uint32_t first_slot = 0; // a permit's first slot to try
  const wait_mark* mark = nullptr;
  // A permit's check only (a try-lock behind waiters that name another n): the masters say
  // whether another n is in force and take nothing.
  bool check_only = false;
};

// A release's arguments: `wake`, the daemon's release_wake for a hold that was granted, '' for
// an attempt that never was (see release.lua); `attempt` for a failed attempt whose permit slot
// on a master is unknown (any slot of that attempt goes).
struct release_call {
  std::string_view owner;
  std::string_view wake;
  bool attempt = false;
};

// Each appends one command to `out`; `scratch` is the caller's buffer, reused from call to call.
using format_acquire = void (*)(std::string& out, script_by by, const hold_target& hold,
                                const register_keys& keys, const acquire_call& call,
                                std::string& scratch);
using format_release = void (*)(std::string& out, script_by by, const hold_target& hold,
                                const register_keys& keys, const release_call& call,
                                std::string& scratch);
using format_extend = void (*)(std::string& out, script_by by, const hold_target& hold,
                               const register_keys& keys, std::string_view owner,
                               std::uint64_t ttl_ms);

struct lock_kind_traits {
  lock_kind kind;
  std::string_view name; // "exclusive", "shared", "permit", "multi": INFO and the metrics' kind
  script acquire;        // (exclusive: acquire_wait for a WAIT's attempt)
  script release;
  script extend;
  vote_rule votes;
  // After a grant, the next waiter of the same queue may be granted too (readers, permits).
  bool waiters_may_share;
  // An UNLOCK hands the lock to a waiter of the same kind in one round (hand_over.lua).
  bool hands_over;
  // A WAIT's refused attempt marks the masters, so that other daemons' releases wake it.
  bool leaves_marks;
  // The request kind of its acquire (its reply's shape: a permit's carries the slot).
  request_kind acquire_request;
  format_acquire write_acquire;
  format_release write_release;
  format_extend write_extend;
};

const lock_kind_traits& traits_of(lock_kind kind);
// Whether `request` is the acquire request of some kind (its row's acquire_request).
bool is_acquire_request(request_kind request);

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
