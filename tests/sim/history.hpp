// What a run records, and all the checkers see: every client request with its reply and the true
// time of both, the faults, the keys faults destroyed, when a daemon was told of such a loss,
// when the whole system was healthy, and what the scripts cost per resource. The checkers
// (checkers.hpp) are pure functions of this.
#pragma once

#include "redlockd/lock/owner.hpp"

#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "scheduler.hpp"

namespace redlockd::sim {

inline constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();

enum class client_op : std::uint8_t { lock, unlock, extend };
enum class outcome : std::uint8_t {
  pending, // no reply (yet): the connection ended first, or the run did
  ok,
  busy,
  noquorum,
  notheld,
  error,            // ERR ...
  permits_mismatch, // ERR PERMITS_MISMATCH: another n is in force for the semaphore
};

// What a LOCK asks for, and with whom it may hold (conflicts() in checkers.cpp): an exclusive
// lock (LOCK r), a shared hold (LOCK r ttl SHARED), a permit of a semaphore (LOCK s ttl PERMITS n:
// a semaphore is a resource of its own, never a lock's), a set (MLOCK: an exclusive hold of
// each member).
enum class hold_kind : std::uint8_t { exclusive, shared, permit, multi };

inline constexpr std::size_t max_members = 4; // the largest set the clients take

struct request_record {
  std::uint32_t client = 0;
  std::uint32_t connection = 0;      // the client's connection (unique in the run)
  std::uint32_t daemon = 0;          // which daemon
  std::uint32_t daemon_instance = 0; // which run of it (unique in the run)
  client_op kind = client_op::lock;
  hold_kind hold = hold_kind::exclusive;
  std::uint32_t resource = 0; // a set's (MLOCK, MUNLOCK, MEXTEND): the first it names
  // MLOCK, MUNLOCK, MEXTEND: the resources as named (member_count of them); 0 for the others.
  std::array<std::uint32_t, max_members> members{};
  std::uint8_t member_count = 0;
  std::uint32_t permits = 0; // PERMITS n
  std::uint64_t ttl_ms = 0;
  std::int64_t wait_ms = -1; // LOCK ... WAIT; -1 without
  bool keep = false;
  owner_id owner{}; // LOCK: the owner granted; UNLOCK, EXTEND: the owner named
  sim_time invoke = 0;
  sim_time decided = -1; // when the engine answered (the reply may be written later, in order)
  sim_time reply = -1;   // when the client read it
  outcome result = outcome::pending;
  std::uint64_t fence = 0;
  std::int64_t validity_ms = 0;
  std::uint32_t lock = none; // UNLOCK, EXTEND: the LOCK request whose grant it names
  // A granted KEEP lock: when its client learnt it is gone (a LOST line, or the connection
  // ended: closed by the client, or its daemon crashed).
  sim_time lost = -1;
  sim_time connection_ended = -1;
  // A LOST line that came for this lock before its OK had (a contract violation).
  bool lost_before_ok = false;
  std::uint32_t extra_replies = 0; // replies beyond the first (a contract violation)
  // A granted LOCK (also one whose OK was written too late and read as NOQUORUM): when its
  // daemon sent the round that won (validity counts from there).
  sim_time attempt_start = -1;
};

// The resources a request names: a set's members, or its one resource.
inline std::span<const std::uint32_t> resources_of(const request_record& r) {
  if (r.member_count > 0)
    return {r.members.data(), r.member_count};
  return {&r.resource, 1};
}

// What a daemon queues a waiter under (and keeps its leases by): the lock r for the exclusive
// and shared requests on r (one queue), the semaphore, or the set as the set (its members,
// sorted); unused places are `none`.
using queue_key = std::array<std::uint32_t, max_members>;
inline queue_key queue_of(const request_record& r) {
  queue_key key;
  key.fill(none);
  const auto named = resources_of(r);
  for (std::size_t i = 0; i < named.size() && i < key.size(); ++i) { // sorted as it goes in
    std::size_t at = i;
    for (; at > 0 && key[at - 1] > named[i]; --at)
      key[at] = key[at - 1];
    key[at] = named[i];
  }
  return key;
}

// A client connection: when it ended (closed by the client, or its daemon crashed); -1 if it
// was open at the end of the run.
struct connection_record {
  std::uint32_t client = 0;
  std::uint32_t daemon = 0;
  sim_time opened = 0;
  sim_time ended = -1;
};

enum class fault_kind : std::uint8_t {
  master_crash, // down; `flag`: restarted with its data (else empty)
  master_flushall,
  master_key_loss, // keys deleted, the fence counter kept
  master_pause,
  master_slow,
  master_clock_jump, // `amount_us`: signed
  master_drift,      // `amount_us`: the new drift, ppm
  daemon_crash,
  partition,  // `target`: daemon; `masters`: bit set
  link_reset, // `target`: daemon, `masters`: the one master
  wake_loss,  // the same, for the subscriber connection
};
const char* to_string(fault_kind kind);

struct fault_record {
  fault_kind kind;
  std::uint32_t target = 0;  // a master or a daemon, by kind
  std::uint32_t masters = 0; // partition, link_reset, wake_loss
  sim_time start = 0;
  sim_time end = 0; // healed (== start for instant faults)
  std::int64_t amount = 0;
  bool flag = false;
};

// A fault that destroyed data on a master (FLUSHALL, a forward clock jump expiring keys, a
// scenario's lost key; an empty restart is announced by a new run_id and needs no excuse).
// Until a daemon learns of a lost key, that daemon may count the master's vote although the key
// is gone: what redlockd documents as key-loss detection after the fact. A loss that took the
// fence register (FLUSHALL) excuses nothing: no grant counts where the register is missing.
struct data_loss {
  std::uint32_t master = 0;
  sim_time at = 0;
  bool clock_jump = false;
  bool register_lost = false; // the fence register went too
  // (resource, owner) of every hold it lost: a lock's key, a set member's key, a reader's member
  // of 'K readers', a permit's slot key (its resource is the semaphore).
  std::vector<std::pair<std::uint32_t, owner_id>> locks;
  std::uint64_t fence_before = 0; // the fence counter it lost (0: none)
  sim_time fence_recovered = -1;  // when the master's counter was back at fence_before
};

// A daemon (one run of it) was given what tells it a master lost data: the holder's UNLOCK,
// EXTEND or hand-over found a lease's key gone there while another master still held it; a
// clock sample showed a forward jump; or the master came back without a fence counter. From
// then on that daemon must not count the master's votes until it is re-seeded.
struct loss_evidence {
  std::uint32_t daemon_instance = 0;
  std::uint32_t master = 0;
  sim_time at = 0;
};

// Script calls on one resource's keys in one second of the run.
struct work_sample {
  std::uint32_t resource = 0;
  std::uint32_t second = 0;
  std::uint32_t calls = 0;
};

struct history {
  std::uint32_t masters = 0;
  std::uint32_t daemons = 0;
  std::uint64_t lock_delay_ms = 0;
  std::uint32_t node_timeout_ms = 50;
  double clock_drift_factor = 0.01;
  std::vector<std::string> resources;
  // Per resource: a semaphore's n (the one every request of the run names but the deliberately
  // wrong ones), 0 for a lock. May be shorter than `resources` (no semaphore past its end).
  std::vector<std::uint32_t> permits;
  std::vector<request_record> requests;
  std::vector<connection_record> connections;
  std::vector<fault_record> faults;
  std::vector<data_loss> losses;
  std::vector<loss_evidence> evidence;
  // Intervals when nothing was faulty: every master up and answering, every daemon up with every
  // master voting and every wake channel subscribed; [first, second).
  std::vector<std::pair<sim_time, sim_time>> healthy;
  std::vector<work_sample> work;
  std::uint64_t longest_ttl_ms = 0; // of any request: how long a fault's effects may last
  sim_time end = 0;
};

} // namespace redlockd::sim
