// The lock engine's ports: what it needs from the I/O layer (node_io), where its answers go
// (reply_sink), and the counters it keeps. No I/O here: the app layer implements these.
#pragma once

#include "redlockd/resp/pipeline.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace redlockd {

using clock_type = std::chrono::steady_clock;

// What the engine needs from the I/O layer.
class node_io {
 public:
  virtual ~node_io() = default;
  // Whether a node takes requests now (connected, scripts loaded).
  virtual bool usable(std::size_t node) const = 0;
  // Queues one RESP command for a node. Commands queued in one loop turn go out in one write.
  virtual void send(std::size_t node, const request_tag& tag, std::string_view command) = 0;
  // The node answered NOSCRIPT: load the scripts again on that connection.
  virtual void reload_scripts(std::size_t node) = 0;
  // The engine's earliest deadline moved earlier: call on_timer() at `when`.
  virtual void arm_timer(clock_type::time_point when) = 0;
};

// An OK of LOCK or EXTEND. Its last field is the validity left when the line is written, which
// can be later than the decision when earlier replies on the connection are still pending (a
// WAIT ahead of it).
struct grant_reply {
  std::string line;            // formatted with the validity at the decision
  std::size_t validity_at = 0; // offset of the validity field in `line`
  clock_type::time_point valid_until{};
  // With no validity left: LOCK writes NOQUORUM 0 <needed>, EXTEND (needed 0) NOTHELD.
  std::size_t needed = 0;
  // A KEEP lock (generation != 0): its validity follows its renewals.
  std::uint32_t keep_index = 0;
  std::uint32_t keep_generation = 0;

  // Rewrites the validity in `line` to what is left at `now` of `until` (valid_until, or the
  // KEEP lock's). False, with `line` unchanged, when less than 1 ms is left.
  bool refresh(clock_type::time_point now, clock_type::time_point until);
  std::string expired_line() const;
};

// Where a client's replies go (a session). `seq` orders replies per client.
class reply_sink {
 public:
  virtual ~reply_sink() = default;
  virtual void deliver(std::uint64_t seq, std::string line) = 0;
  // An OK with a validity: rendered when it is written (by default at once).
  virtual void deliver_grant(std::uint64_t seq, grant_reply grant, clock_type::time_point now) {
    deliver(seq,
            grant.refresh(now, grant.valid_until) ? std::move(grant.line) : grant.expired_line());
  }
  // A line outside the reply order (LOST) about the lock that reply `after_seq` granted:
  // written as soon as possible, but never before that reply.
  virtual void push(std::string line, std::uint64_t after_seq) = 0;
};

struct engine_counters {
  std::uint64_t acquired = 0;
  std::uint64_t busy = 0;
  std::uint64_t noquorum = 0;
  std::uint64_t released = 0;
  std::uint64_t extended = 0;
  std::uint64_t notheld = 0;
  std::uint64_t lost = 0;
  std::uint64_t renewed = 0;              // KEEP renewals that reached a quorum
  std::uint64_t fence_conflicts = 0;      // acquisitions that needed a second fencing round
  std::uint64_t restarts = 0;             // master restarts detected (each quarantined)
  std::uint64_t clock_jumps = 0;          // forward clock jumps of masters detected
  std::uint64_t clock_jumps_backward = 0; // backward ones: logged, not quarantined
  std::uint64_t key_losses = 0;           // live lock keys a master lost without restarting
  std::uint64_t delayed = 0;              // LOCKs refused by lock-delay
  std::uint64_t handovers = 0;            // UNLOCKs that handed the lock to a waiter's round
  std::uint64_t wakeups = 0;              // waiters woken by a release published by a master
  // Grants by lock kind (lock_kind order: exclusive, shared, permit, multi); they add up to
  // `acquired`. Not a counter of INFO's `counters`: INFO's `grants` and /metrics'
  // redlockd_grants_total{kind} show them.
  std::array<std::uint64_t, 4> granted_by_kind{};
};

// A generation counter for stale-reply and stale-timer checks: never 0, which marks requests
// nobody waits for.
inline std::uint32_t next_generation(std::uint32_t generation) {
  ++generation;
  return generation == 0 ? 1 : generation;
}

// Whole milliseconds from `from` to `to`, rounded up; 0 if `to` is not later.
inline std::uint64_t ms_until(clock_type::time_point from, clock_type::time_point to) {
  if (to <= from)
    return 0;
  return static_cast<std::uint64_t>(
      std::chrono::ceil<std::chrono::milliseconds>(to - from).count());
}

} // namespace redlockd
