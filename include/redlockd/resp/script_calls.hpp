// The calls the lock engine makes on a master, each encoded in one place and each reply decoded
// once, here, into a struct: the engine sees typed results, never hiredis' redisReply. No I/O.
#pragma once

#include "redlockd/resp/pipeline.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

struct redisReply;

namespace redlockd {

// The keys every master keeps besides the locks: the fencing counter and the record of the
// longest TTL granted on the fleet; and the names of the cross-daemon wake-ups: a short-lived
// marker per lock that some daemon waits for, and the channel a release publishes on when it
// finds one.
struct register_keys {
  std::string fence;   // fence_key
  std::string max_ttl; // fence_key + ":max_ttl"
  std::string wake;    // fence_key + ":wake": the channel (the message is the lock key)
  std::string waiting; // fence_key + ":waiting:", followed by the lock key: its wait marker
  explicit register_keys(std::string fence_key)
      : fence(std::move(fence_key)), max_ttl(fence + ":max_ttl"), wake(fence + ":wake"),
        waiting(fence + ":waiting:") {}
};

// The wait marker of lock `key`, built in `buffer` (the caller's, reused from call to call).
inline std::string_view wait_marker(std::string& buffer, const register_keys& keys,
                                    std::string_view key) {
  buffer.assign(keys.waiting).append(key);
  return buffer;
}

// What a waiter's attempt (acquire_wait, hand_over) tells the master about the wait: the lock's
// wait marker, the ms the waiter still waits, this daemon's id, the waiter's ticket (its first
// attempt's proposal: the daemons' heads go in ticket order), the slack its entry gets past
// its next try, and the ms the next waiter of this daemon's queue still waits (0: none; a grant
// then keeps this daemon's entry, so that a release through another daemon wakes that waiter).
struct wait_mark {
  std::string_view marker;
  std::uint64_t wait_ms = 0;
  std::string_view daemon_id;
  std::uint64_t ticket = 0;
  std::uint64_t slack_ms = 0;
  std::uint64_t next_wait_ms = 0;
};

// EVALSHA normally; EVAL with the source after a master answered NOSCRIPT (or where a request
// must not be lost to NOSCRIPT).
enum class script_by : std::uint8_t { sha, source };

// Each appends one command to `out`.
void append_acquire(std::string& out, script_by by, std::string_view key, const register_keys& keys,
                    std::string_view owner, std::uint64_t ttl_ms, std::uint64_t proposal);
// A LOCK ... WAIT's attempt: acquire's arguments and its wait mark.
void append_acquire_wait(std::string& out, script_by by, std::string_view key,
                         const register_keys& keys, std::string_view owner, std::uint64_t ttl_ms,
                         std::uint64_t proposal, const wait_mark& mark);
// What a release passes the scripts so that it may wake other daemons' waiters: the releasing
// daemon's id, the slack their entries get to try, and the wake channel, as one argument
// '<daemon id> <slack ms> <wake channel>' (every argument costs a master about 1.5k
// instructions per call, and the releases need these only where they find a wait mark); ''
// where `wakes` is false: a failed attempt's release wakes nobody. A daemon makes it once.
std::string release_wake(const register_keys& keys, std::string_view daemon_id, bool wakes,
                         std::uint64_t slack_ms);
// `marker`: wait_marker() of `key`; `wake`: release_wake's text.
void append_release(std::string& out, script_by by, std::string_view key, std::string_view owner,
                    std::string_view marker, std::string_view wake);
// A daemon's entry out of a wait marker, and its writers' intent off lock `key` (waking, on
// `wake_channel`, the other daemons' heads it held back): all its waiters for that lock left
// without it.
void append_unmark(std::string& out, script_by by, std::string_view marker, std::string_view key,
                   std::string_view daemon_id, std::string_view wake_channel);
// Wakes, on `wake_channel`, the other daemons' heads that yielded their turn to this daemon's
// head with `ticket`, granted lock `key` (a reader, a permit: they may go in beside it).
void append_wake_yielded(std::string& out, script_by by, std::string_view marker,
                         std::string_view key, std::string_view daemon_id, std::uint64_t ticket,
                         std::string_view wake_channel);
void append_extend(std::string& out, script_by by, std::string_view key, const register_keys& keys,
                   std::string_view owner, std::uint64_t ttl_ms);
void append_fence_bump(std::string& out, script_by by, const register_keys& keys,
                       std::uint64_t proposal);
// An UNLOCK's lock handed to a waiter: acquire_wait's arguments and the releasing owner.
void append_hand_over(std::string& out, script_by by, std::string_view key,
                      const register_keys& keys, std::string_view owner, std::uint64_t ttl_ms,
                      std::uint64_t proposal, const wait_mark& mark,
                      std::string_view releasing_owner);
// A quarantined master's steps (seed.lua, always by source): `mark` is this daemon's quarantine
// mark key; the mark lives `mark_ms`. `again`: the mark was set (answered) in this quarantine,
// so a mark gone since stays a loss ('remark').
void append_quarantine_mark(std::string& out, const register_keys& keys, std::string_view mark,
                            std::uint64_t mark_ms, bool again);
void append_seed(std::string& out, const register_keys& keys, std::string_view mark,
                 std::uint64_t fence, std::uint64_t max_ttl_ms);
void append_register_read(std::string& out, const register_keys& keys); // MGET of both
// STATUS: the PTTL and label of lock `key`.
void append_status_read(std::string& out, script_by by, std::string_view key);
// BREAK: every hold of lock `key` ended on the master (`marker`: wait_marker() of `key`).
void append_break(std::string& out, script_by by, std::string_view key, const register_keys& keys,
                  std::string_view marker);
// LIST: one SCAN step from `cursor` over the keys matching the glob `pattern`, `count` per call.
void append_list_step(std::string& out, script_by by, std::string_view cursor,
                      std::string_view pattern, std::uint32_t count, const register_keys& keys);

// A master's TIME, as the acquire and extend scripts return it beside their result.
struct node_time {
  std::uint64_t seconds = 0;
  std::uint64_t micros = 0;
};

// An error reply to any call. `text` points into the reply: valid while it is handled.
struct error_reply {
  std::string_view text;
  bool noscript() const { return text.starts_with("NOSCRIPT"); }
};

// acquire: {1, previous fence counter, TIME} or {0, the holder's remaining TTL, TIME}, or
// {-2, 0, TIME} where the master has no fence register: it lost its data (a FLUSHALL while
// connected), nothing was granted; acquire_wait adds a fifth field, the largest ticket of
// another daemon waiting there.
struct acquire_reply {
  bool complete = false;              // the four fields the script returns
  std::optional<std::int64_t> status; // 1 granted, 0 refused, -2 lost data; the first field
  std::optional<std::uint64_t> fence; // granted: the counter before this grant, if numeric
  std::int64_t holder_pttl = 0;       // refused: the holder's remaining TTL, 0 if unknown
  std::optional<node_time> time;      // when complete and parsable
  // acquire_wait and hand_over: the largest ticket of another daemon's head waiting on this
  // master (0: none, or a plain acquire).
  std::uint64_t rival_ticket = 0;
  // A permit's acquire (acquire_slot): the slot it took; status 2 means another n is in force
  // on that master, given in `permits_in_force`.
  std::optional<std::uint32_t> slot{};
  std::uint64_t permits_in_force = 0;
  bool lost_data() const { return complete && status == -2; }
};

// release (also the releases nobody waits for): 1 deleted, 0 another owner, -1 gone.
struct release_reply {
  std::optional<std::int64_t> result;
};

// hand_over: acquire_wait's fields for the new owner (a first field of -1: the master lost its
// data, nothing granted), and release's answer for the releasing one.
struct hand_over_reply {
  acquire_reply grant;   // complete when all six fields came
  release_reply release; // set when all six fields came
};

// extend: {1 set, 0 another owner, -1 gone; TIME}.
struct extend_reply {
  bool complete = false;
  std::optional<std::int64_t> result; // the first field, if an integer
  std::optional<node_time> time;
};

// fence_bump: the counter before the bump; -2 where the register is gone (lost data).
struct fence_bump_reply {
  std::optional<std::uint64_t> previous;
  bool lost_data = false;
};

// The register read (MGET): both registers, if both were parsable counters.
struct register_reply {
  bool ok = false;
  std::uint64_t fence = 0; // a missing key reads as 0
  bool has_fence = false;  // the register is there (a new fleet's, or a lost one's, is not)
  std::uint64_t max_ttl_ms = 0;
};

// seed.lua: 'mark': 1 the mark was there, 0 it was not; 'seed': 1 seeded, 0 the mark was gone.
struct seed_reply {
  std::optional<std::int64_t> result;
};

// STATUS's read (outside the engine): ms left, -1 no TTL, -2 no key (of the key, or of its live
// shared holders); the hold's label ("" if none); live shared holders; the permits in use of
// the semaphore of that name and its n (0: none). A plain PTTL's integer reply decodes too.
struct pttl_reply {
  std::optional<std::int64_t> ms;
  std::string label;
  std::uint64_t readers = 0;
  std::uint64_t permits_used = 0;
  std::uint64_t permits = 0;
};

// One hold a LIST step found: its key (a lock key, 'K readers' for shared holders, 'S permits'
// for a semaphore), PTTL, label ('' if none) and holders; never an owner.
struct listed_hold {
  std::string key;
  std::int64_t pttl_ms = 0;
  std::string label;
  std::uint64_t holders = 1;
};

// list_step: the cursor to go on from ("0": the scan is complete) and the holds found.
// `cursor` is empty when the reply was not understood.
struct list_step_reply {
  std::string cursor;
  std::vector<listed_hold> holds;
};

using script_reply =
    std::variant<error_reply, acquire_reply, release_reply, extend_reply, fence_bump_reply,
                 register_reply, seed_reply, pttl_reply, hand_over_reply, list_step_reply>;

// Decodes the reply to a request of `kind` (one the engine or the status reader sends).
script_reply decode_script_reply(request_kind kind, const redisReply& reply);

} // namespace redlockd
