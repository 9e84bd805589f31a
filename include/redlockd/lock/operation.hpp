// One client request (or one KEEP renewal) in flight in the engine, and the legal moves of its
// phase, in one place. Slots are reused, so that a busy daemon stops allocating. No I/O.
#pragma once

#include "redlockd/lock/engine_io.hpp"
#include "redlockd/lock/fencing.hpp"
#include "redlockd/lock/handover.hpp"
#include "redlockd/lock/key_loss.hpp"
#include "redlockd/lock/lock_kind.hpp"
#include "redlockd/lock/owner.hpp"
#include "redlockd/lock/redlock.hpp"

#include <array>
#include <cassert>
#include <cstdint>
#include <memory>
#include <string>

namespace redlockd {

enum class op_kind : std::uint8_t { lock, unlock, extend, renew };

// idle      the slot is free
// waiting   a LOCK between attempts: queued behind a WAIT, retrying, or lock-delayed
// voting    a round is out on the masters: acquire, release or extend
// fencing   a LOCK's extra round that raises the fence above a conflicting one
// draining  answered; still collecting the other masters' replies for key-loss detection
enum class op_phase : std::uint8_t { idle, waiting, voting, fencing, draining };

// The only moves an operation makes (operation::enter asserts them):
//   idle -> waiting                    a request arrives (allocate)
//   waiting -> voting                  an attempt or round starts (a hand-over: the UNLOCK's
//                                      and the waiter's)
//   waiting -> waiting                 a lock-delayed WAIT waits on; a set held back while
//                                      another set's attempt of this daemon is out
//   waiting -> idle                    answered without a round (TOO_MANY, BUSY, timed out, gone)
//   voting -> fencing                  granted, but the fence conflicts: another round
//   fencing -> fencing                 that round conflicted again
//   voting | fencing -> waiting        a WAIT's attempt failed: retry later
//   voting -> draining                 answered at quorum while masters are still to answer
//   voting | fencing | draining -> idle
constexpr bool legal_move(op_phase from, op_phase to) {
  switch (from) {
  case op_phase::idle:
    return to == op_phase::waiting;
  case op_phase::waiting:
    return to == op_phase::waiting || to == op_phase::voting || to == op_phase::idle;
  case op_phase::voting:
    return to != op_phase::voting;
  case op_phase::fencing:
    return to == op_phase::fencing || to == op_phase::waiting || to == op_phase::idle;
  case op_phase::draining:
    return to == op_phase::idle;
  }
  return false;
}

// A LOCK's own state.
struct acquisition {
  clock_type::time_point requested_at{}; // when the client's request arrived
  fence_round fence;
  unsigned fence_rounds = 0;
  bool fence_floored = false; // proposed with the masters' clock known (propose_fence)
  std::uint64_t retry_ms = 0; // smallest remaining TTL among refusals, 0 = unknown
  // Masters whose acquire set this attempt's key (granted, in time or not): when they are a
  // majority and the attempt still fails, it held the lock for a moment as a holder does.
  std::uint32_t took = 0;
  // The round whose grants won the quorum: its grants that come after it, while a fencing round
  // is out or once the lock is granted, are the lock's too (lock_engine::late_winning_grant).
  std::uint32_t grant_generation = 0;
  std::uint32_t grant_pending = 0; // the masters that had not answered that round at its quorum
  bool queued = false;             // LOCK ... WAIT: in the resource's queue, gives up at wait_until
  bool keep = false;               // KEEP: counts against its connection's limit
  bool keep_started = false;       // the KEEP lock exists; it owns that count now
  clock_type::time_point wait_until{};
  // A queued LOCK's next attempt: the stamp of its wait_retry deadline (0: none pending) and
  // when it is due. A new attempt, or an earlier retry, makes the pending one stale.
  std::uint64_t retry_stamp = 0;
  clock_type::time_point retry_at{};
  // A release of the lock was seen while an attempt was in flight: if that attempt fails, the
  // next one goes at once instead of after the holder's remaining TTL.
  bool woken = false;
  // Attempts retried soon after a split vote since the last release seen (retry_after_split).
  unsigned split_retries = 0;
  // A set's attempt held back while another of this daemon's set attempts sharing a member was
  // out (lock_engine::set_attempt_out): it goes when that one is decided.
  bool deferred = false;
  // The generation of its last failed attempt, while a late grant of it may still show a split
  // (lock_engine::late_grant; 0: none).
  std::uint32_t failed_generation = 0;
  // The proposal of a queued LOCK's first attempt (0: it has not tried yet), or the place in
  // line its daemon's entry kept for it (lock_acquired).
  std::uint64_t ticket = 0;
  // The latest ticket the entry kept for the daemon's next waiter has on a master that granted
  // this attempt (kept_entry_ticket; 0: no master granted yet).
  std::uint64_t kept_ticket = 0;
  // A master that granted this attempt reported another daemon's head waiting there.
  bool rivals_marked = false;
  std::string last_failure; // the reply to give if the wait runs out
  // LABEL: stored after the owner in the hold's value (empty: none).
  std::string label;
  // KEEP: how long it is renewed in all (MAXHOLD and max_hold_ms; 0: no limit).
  std::uint64_t max_hold_ms = 0;
  // What LOST names: the resource (a set: the first one the MLOCK named).
  std::string shown;
  // A permit's acquire: the slot each master granted (-1: none), the slot a majority gave (the
  // grant's), the n another request put in force on some master (0: none seen) and the masters
  // that refused for it.
  std::array<std::int16_t, max_nodes> slots{};
  std::uint32_t slot = 0;
  std::uint64_t permits_in_force = 0;
  std::uint32_t refused_for_n = 0;
  // A permit try-lock behind this daemon's waiters of another n: its round only asks the
  // masters which n is in force (acquire_call::check_only).
  bool check_only = false;
};

struct operation {
  std::uint32_t generation = 1; // changes with every round, so stale replies do not match
  std::uint64_t serial = 0;     // unique per request, for timers that span rounds
  op_kind kind = op_kind::lock;
  op_phase phase = op_phase::idle;
  // The hold it is about: its kind, its name (hold_target::name; `key` for short) and a
  // semaphore's n.
  lock_kind hold_kind = lock_kind::exclusive;
  std::uint32_t permits = 0;
  std::string key;
  owner_id owner{};
  std::uint64_t ttl_ms = 0;
  clock_type::time_point t0{}; // start of the current round's attempt
  vote_tally tally;
  std::shared_ptr<reply_sink> sink; // null: nobody waits for the answer (a renewal, a gone client)
  std::uint64_t seq = 0;
  acquisition lock;       // kind lock
  hand_over_link handing; // kind unlock: the waiter its round hands the lock to
  lease_watch watch;      // every kind
  // kind renew: which KEEP lock, and its generation when the renewal began.
  std::uint32_t keep_index = 0;
  std::uint32_t keep_generation = 0;

  void enter(op_phase to) {
    assert(legal_move(phase, to));
    phase = to;
  }
  hold_target hold() const { return {hold_kind, key, permits}; }
  // Replies to the current round count in these phases.
  bool collecting() const {
    return phase == op_phase::voting || phase == op_phase::fencing || phase == op_phase::draining;
  }
};

} // namespace redlockd
