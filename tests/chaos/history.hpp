// The history of a chaos run: every client operation and every fault, timed on one clock.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace redlockd::chaos {

// CLOCK_MONOTONIC in nanoseconds: the same clock in every process of the machine, so the
// harness and the clients can order their events against each other.
std::int64_t monotonic_ns();

// One completed (or abandoned) client operation, Jepsen style: invoked at `invoke_ns`, completed
// at `complete_ns` with outcome ok (it happened), fail (it certainly did not) or info (unknown:
// the connection broke or timed out).
//
// Kinds: lock (with `keep` for a KEEP lock), unlock, read, write, extend (EXTEND OK carries the
// new validity), ping (a KEEP holder's PING on its lock's connection: a PONG with no LOST before
// it proves the daemon still renewed the lock then) and lost (a KEEP holder learnt at
// `complete_ns` that its lock is gone: a LOST push or its connection broke).
//
// Modes, the lock family of protocol v1.1: exclusive (LOCK), shared (LOCK ... SHARED), permit
// (LOCK ... PERMITS n: `resource` is the semaphore, a namespace apart from locks) and set (MLOCK:
// `members` in the order the request named them, `resource` those joined by '+'). A set's or a
// permit's register accesses name the member, or the permit's lane "<semaphore>#<slot>".
struct operation {
  std::string process;  // "c3"
  std::string kind;     // lock, unlock, read, write, extend, ping, lost
  std::string resource; // the lock's resource, also the register's name
  int daemon = 0;       // which daemon the client talked to
  std::int64_t invoke_ns = 0;
  std::int64_t complete_ns = 0;
  std::string outcome; // ok, fail, info
  std::string reply;   // the raw reply line (or the error)
  std::string owner;   // lock ok, unlock
  std::uint64_t fence = 0;
  std::int64_t validity_ms = 0;     // lock ok, extend ok
  std::string element;              // write: the element this write adds to the register's set
  bool keep = false;                // lock: a KEEP lock
  std::int64_t ttl_ms = 0;          // lock, extend: the TTL asked for
  std::string mode = "exclusive";   // lock, unlock, read, write: exclusive, shared, permit, set
  int permits = 0;                  // permit lock: the semaphore's n
  int slot = -1;                    // permit lock ok: the slot its owner carries
  std::vector<std::string> members; // set lock: the resources the MLOCK named
};

nlohmann::json to_json(const operation& op);
operation operation_from_json(const nlohmann::json& doc);
// Reads a JSON-lines history file. Throws std::runtime_error on a line that does not parse: the
// clients exit cleanly, so a torn or malformed line means the history cannot be trusted.
std::vector<operation> read_history(const std::filesystem::path& file);

// A fault the nemesis applied, from `start_ns` to `end_ns` (healed).
struct fault {
  std::string kind;   // e.g. "kill-1-master", "clock-jump"
  std::string target; // e.g. "node2", "c3", "daemon0"
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

// What the fenced register ended with, per resource.
struct register_state {
  std::map<std::string, std::set<std::string>> sets;
  std::uint64_t writes_accepted = 0;
  std::uint64_t writes_rejected = 0;       // stale fence: the register protected itself
  std::uint64_t reads_rejected = 0;        // exclusive holders' READs
  std::uint64_t shared_reads_rejected = 0; // shared holders' SREADs
};

// The outcome of one checker: how many violations and a few of them, readable.
struct checker_result {
  explicit checker_result(std::string checker_name) : name(std::move(checker_name)) {}
  std::string name;
  std::size_t checked = 0; // how many items it looked at
  std::size_t violations = 0;
  std::vector<std::string> examples; // at most a few
  void add(std::string example);
};

// C1: per resource, the windows of successful exclusive LOCKs never overlap. A window is the
// part of the lock its holder can be sure of, from its LOCK's ok to the earliest of its UNLOCK's
// invoke and:
// - a lease: invoke + validity (the daemon counts validity from when it wrote the reply, which
//   lies between invoke and ok), pushed to EXTEND invoke + validity by each EXTEND ok;
// - a KEEP lock: the same, pushed to ping invoke + ttl/4 by each PONG on its connection (while
//   the daemon runs and has not pushed LOST, at least a third of the TTL is left), and cut when
//   the holder learnt the lock was lost (LOST push, broken connection).
// Every kind's window is measured so. An overlap is reported once, by the checker of the kinds
// involved: C1 two exclusive LOCKs, C1-multi a set and an exclusive hold, C1-RW a shared one.
checker_result check_validity_overlap(const std::vector<operation>& history);
// C1-RW: per resource, no exclusive window (a LOCK, or a set holding the resource) overlaps a
// shared one; shared windows overlap each other freely.
checker_result check_shared_overlap(const std::vector<operation>& history);
// C1-k: per semaphore, at no instant more than n permit windows, and no two windows of one slot
// overlap (a slot outside 0..n-1 is a violation as well).
checker_result check_permit_bound(const std::vector<operation>& history);
// C1-multi: C1 per member, where a set's window counts for each of its members: no set overlaps
// an exclusive LOCK or another set on a resource both hold.
checker_result check_set_overlap(const std::vector<operation>& history);
// C4-RW (liveness; a schedule of readers and one writer): a writer's intent stops new readers,
// so an exclusive LOCK ... WAIT refused BUSY after waiting at least `bound_ms` (longer than any
// reader holds), while no other exclusive hold or set could have held its resource, is a writer
// starved by a stream of readers. Checked: the exclusive LOCKs answered OK or BUSY.
checker_result check_writer_waits(const std::vector<operation>& history, std::int64_t bound_ms);
// The window end the C1 checkers use for each successful LOCK, by (process, owner).
std::map<std::pair<std::string, std::string>, std::int64_t>
window_ends(const std::vector<operation>& history);
// C5: a KEEP lock survives its daemon's kill -9: its key stays on the masters for at least
// two thirds of its TTL after the last renewal, so no conflicting grant (of any kind, on a name
// it held) may complete within ttl/2 of the kill. `kills` are (daemon index, kill time).
checker_result check_keep_survives_kill(const std::vector<operation>& history,
                                        const std::vector<std::pair<int, std::int64_t>>& kills);
// C2: fences are unique, and when grant A completed before grant B was invoked (any kind, any
// resource, any daemon), fence(A) < fence(B).
checker_result check_fence_order(const std::vector<operation>& history);
// C3: every acknowledged write's element is still in the register's final set.
checker_result check_lost_writes(const std::vector<operation>& history,
                                 const register_state& final_state);
// Informational: writes invoked after their lock's window ended (a paused holder) and what the
// fenced register did with them. Never a violation by itself: lost writes are C3's job.
struct stale_write_counts {
  std::size_t stale = 0;
  std::size_t rejected = 0;
  std::size_t accepted = 0;
};
stale_write_counts count_stale_writes(const std::vector<operation>& history);

} // namespace redlockd::chaos
