// The Redlock engine: runs LOCK / UNLOCK / EXTEND over N masters, queues waiters per resource,
// renews KEEP locks and applies lock-delay. It owns no socket and no timer: the I/O layer hands
// it typed node replies and timer expiries, and it answers through node_io and reply_sink. One
// thread.
//
// This class is the orchestrator: request -> rounds -> decide -> reply. The parts live beside it:
// operation.hpp (an operation and its phases), decisions.hpp (votes and verdicts),
// node_health.hpp (which masters vote: quarantine and re-seed), wait_queues.hpp, keep_locks.hpp,
// leases.hpp (leases and lock-delay), release_cleanups.hpp, deadline_queue.hpp, handover.hpp (an
// UNLOCK handing its lock to the head waiter in one round), key_loss.hpp (a master that lost a
// live key).
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/lock/deadline_queue.hpp"
#include "redlockd/lock/decisions.hpp"
#include "redlockd/lock/engine_io.hpp"
#include "redlockd/lock/fencing.hpp"
#include "redlockd/lock/keep_locks.hpp"
#include "redlockd/lock/leases.hpp"
#include "redlockd/lock/lock_kind.hpp"
#include "redlockd/lock/lock_views.hpp"
#include "redlockd/lock/node_health.hpp"
#include "redlockd/lock/operation.hpp"
#include "redlockd/lock/owner.hpp"
#include "redlockd/lock/release_cleanups.hpp"
#include "redlockd/lock/wait_queues.hpp"
#include "redlockd/metrics/metrics.hpp"
#include "redlockd/protocol/protocol.hpp"
#include "redlockd/resp/script_calls.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace spdlog {
class logger;
}

namespace redlockd {

class lock_engine {
 public:
  using now_function = std::function<clock_type::time_point()>;
  using node_facts = redlockd::node_facts;
  using quarantine_reason = redlockd::quarantine_reason;
  using node_status = redlockd::node_status;

  // `random`: where owners, the daemon's id and retry jitter come from; empty (the daemon): the
  // OS CSPRNG and std::random_device. The simulator (tests/sim) injects a seeded source.
  lock_engine(const config& cfg, node_io& io, std::shared_ptr<spdlog::logger> log,
              now_function now = &clock_type::now, random_bytes random = {});

  // Client requests. The reply is delivered to `sink` with `seq`, possibly before returning.
  // LOCK ... WAIT beyond max_waiters(_per_resource) and KEEP beyond
  // max_keep_locks_per_connection answer ERR TOO_MANY.
  // Every kind of the lock family (lock_kind.hpp): LOCK's mode picks exclusive, shared or a
  // permit; MLOCK takes a set; UNLOCK and EXTEND read the kind from the owner.
  void lock(const lock_request& req, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  void unlock(const unlock_request& req, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  void extend(const extend_request& req, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  void mlock(const mlock_request& req, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  void munlock(const munlock_request& req, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  void mextend(const mextend_request& req, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  // The client's connection closed: its waiters leave their queues and its KEEP locks are
  // released on every node.
  void client_gone(const reply_sink* client);
  // The daemon is stopping: waiters are answered ERR SHUTTING_DOWN, KEEP locks are pushed LOST
  // and released on every node. Acquisitions already in flight complete normally.
  void shutdown();

  // A node answered a request the engine sent (decoded by decode_script_reply).
  void on_reply(std::size_t node, const request_tag& tag, const script_reply& reply);
  // A request the engine sent will never be answered (its connection was lost).
  void on_failure(std::size_t node, const request_tag& tag);
  // A master connected. A new run_id, an uptime shorter than the fleet's longest TTL, or a
  // missing fence counter (while the fleet has one) means it may have lost locks: it is
  // quarantined for the longest TTL a majority of the other masters recorded, then re-seeded
  // with their largest fence before it votes again. No master votes until a majority of
  // masters that did not lose data has been read.
  void on_node_connected(std::size_t node, const node_facts& facts);
  // The link finished its handshake: releases it missed while it was down are sent now.
  void on_node_ready(std::size_t node);

  // A TIME sample from a node (from a script or the health probe), whose request was sent at
  // `sent_at` (default: now) and is handled now. A forward jump beyond clock_jump_ms against the
  // daemon's monotonic clock quarantines the node and returns false: a vote that came with it
  // must not count. A backward jump is logged. The node's time is only known to lie between the
  // send and the handling of each sample, so a busy event loop that handles replies late does
  // not look like a jump.
  bool on_node_time(std::size_t node, std::uint64_t seconds, std::uint64_t micros,
                    std::optional<clock_type::time_point> sent_at = std::nullopt);

  node_status status_of(std::size_t node) const { return health_.status_of(node); }
  // The longest TTL known on the fleet: granted here or read from the masters.
  std::uint64_t max_ttl_granted() const { return health_.max_ttl(); }
  // Whether a node's answer counts now (connected, not quarantined): for STATUS, which reads
  // the masters outside the engine (status_query.hpp).
  bool votes(std::size_t node) const { return eligible(node); }
  // Cross-daemon wake-ups. A release (through any daemon) found lock `key` free on a master
  // where a daemon had marked that it waits for it, and published it on the master's wake
  // channel: this daemon's head waiter for `key`, if it is waiting, tries now. The first of the
  // masters' messages does it; the others find it trying.
  void on_released(std::string_view key);
  // A master's wake channel was subscribed again after a break: a wake-up published meanwhile
  // may be lost, so every head waiter tries again soon (each after a little jitter).
  void on_wake_channel_resumed();
  // BREAK ended the holds of lock `key` on the masters: a KEEP lock on it here is pushed LOST
  // and ended, a lease granted here is forgotten, and the resource is lock-delayed as after a
  // lost lock (its head waiter tries when the delay ends).
  void on_broken(const std::string& key);

  // The timer armed through node_io::arm_timer expired.
  void on_timer();
  std::optional<clock_type::time_point> next_deadline();

  const engine_counters& counters() const { return counters_; }
  std::uint64_t fence_high_water() const { return fences_.high_water(); }
  std::size_t nodes() const { return node_count_; }
  std::size_t operations_in_flight() const { return slots_.size() - free_slots_.size(); }
  std::size_t waiters() const { return queues_.total(); }
  std::size_t keep_locks() const { return keeps_.size(); }
  // LOCK from its request to its reply (WAIT included); each attempt's round, from its start to
  // its decision (the masters' work); and each granted LOCK's wait, from its request to the start
  // of the attempt that won (the queue).
  const latency_histogram& acquire_latency() const { return acquire_latency_; }
  const latency_histogram& acquire_round_latency() const { return acquire_round_latency_; }
  const latency_histogram& acquire_wait_latency() const { return acquire_wait_latency_; }

  // Read-only views for the status page (engine_views.cpp), sorted by resource: the leases and
  // KEEP locks granted here that are still valid, and the WAIT queues. No owner in them.
  std::vector<held_lock> held_locks() const;
  std::vector<resource_waiters> waiting() const;
  // A hold's name (hold_target::name) as people read it: the resource(s), no key prefix.
  std::string shown_name(std::string_view name) const;

  // For a session writing a grant later than it was decided: the KEEP lock's validity now, or
  // nullopt if it is gone; grant_expired() drops a KEEP lock whose OK could not be written.
  std::optional<clock_type::time_point> valid_until(const grant_reply& grant) const;
  void grant_expired(const grant_reply& grant);

 private:
  // Operations (lock_engine.cpp)
  std::uint32_t allocate(op_kind kind, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  // Names the hold an operation is about (hold_target): its kind, its name, a semaphore's n.
  void name_hold(operation& op, lock_kind kind, std::span<const std::string_view> resources,
                 std::uint32_t permits);
  // LOCK and MLOCK once the hold is named: label, KEEP, WAIT, or a try at once.
  void start_lock(std::uint32_t slot, bool keep, std::optional<std::uint64_t> wait_ms,
                  std::optional<std::string_view> label, std::optional<std::uint64_t> max_hold_ms);
  void start_unlock(std::uint32_t slot, std::string_view owner);
  void start_extend(std::uint32_t slot, std::string_view owner, std::uint64_t ttl_ms);
  std::uint32_t first_slot(const operation& op) const; // a permit's first slot to try
  void finish(std::uint32_t slot, std::string line);
  void finish_grant(std::uint32_t slot, grant_reply grant);
  std::shared_ptr<reply_sink> retire(std::uint32_t slot); // its sink; null if the client left
  void free_slot(std::uint32_t slot);
  void begin_round(std::uint32_t slot, op_phase phase, request_kind kind);
  void open_round(std::uint32_t slot, op_phase phase); // a new generation, tally and deadline
  void send_round(std::uint32_t slot, request_kind kind);
  void format_round(const operation& op, request_kind kind, script_by by); // into command_
  void decide(std::uint32_t slot);
  // The round's votes as its kind decides them: a permit's acquire by slot (same_slot_view,
  // which also sets the winning slot), every other round as counted.
  const vote_tally& votes_of(std::uint32_t slot);
  void decide_unlock(std::uint32_t slot);
  void decide_extend(std::uint32_t slot);
  std::int64_t validity_now(const operation& op) const;
  bool eligible(std::size_t node) const {
    return io_.usable(node) && health_.started() && health_.trusted(node);
  }
  void add_deadline(clock_type::time_point when, std::uint32_t slot, std::uint64_t stamp,
                    timer_kind kind);
  bool stale(const deadline& entry) const;
  void fire(const deadline& entry);

  // Whether `tag` is the current round of its operation and `node` has not answered it yet.
  bool expects(const request_tag& tag, std::size_t node) const;
  // A reply (or one passed on to a hand-over's waiter) for the operation `tag` names: counted,
  // drained, or sent again by source after NOSCRIPT.
  void take_reply(std::size_t node, const request_tag& tag, const script_reply& reply);
  // A grant that comes after a waiter's failed attempt was decided: it may show a split vote.
  void late_grant(const request_tag& tag, const script_reply& reply);
  // The winning round's grants that come after its quorum while (or after) a fencing round is
  // out: the lease's masters too (engine_acquire.cpp).
  void late_winning_grant(const request_tag& tag, std::size_t node, const script_reply& reply);
  static bool grants_other_slot(const script_reply& reply, std::int64_t slot);
  void watch_late_grants(std::uint32_t slot);
  bool grants_for(const script_reply& reply, std::size_t node, std::int64_t slot) const;

  // Votes and key-loss detection (engine_votes.cpp)
  void count_vote(std::uint32_t slot, std::size_t node, const script_reply& reply);
  bool clock_ok(std::size_t node, const std::optional<node_time>& time, const operation& op);
  void drain_reply(std::uint32_t slot, std::size_t node, const script_reply& reply);
  bool skips_key_loss(const script_reply& reply) const;
  void after_vote(std::uint32_t slot);
  void end_draining(std::uint32_t slot);
  void expect_lease(operation& op);
  bool expect_set_holding(operation& op); // some members of a set this daemon granted
  void judge_key_loss(operation& op);
  void key_lost(std::uint32_t masters, std::string_view key); // quarantines them
  void data_lost(std::size_t node); // a grant found no fence register there: quarantined

  // LOCK, WAIT and KEEP (engine_acquire.cpp)
  void try_acquire(std::uint32_t slot);
  void new_attempt(operation& op); // a fresh owner, start time and fence proposal
  void decide_lock(std::uint32_t slot, const verdict& v);
  void start_fencing_round(std::uint32_t slot);
  // Above everything seen, and at least the masters' time when this daemon knows it (floored).
  std::uint64_t propose_fence(bool& floored);
  // A grant's proposal was made without the masters' clock and is below the clock at its start.
  bool below_clock_at_start(const operation& op) const;
  void lock_acquired(std::uint32_t slot, std::int64_t validity);
  void take_slot(std::uint32_t slot); // a permit's grant: its slot, the others released
  void lock_failed(std::uint32_t slot, std::string line);
  // Leaves the queue; when `slot` was its head, the new head tries at `wake_next`. The last
  // waiter to leave without the lock (not `served`) takes this daemon's wait-marker entries out.
  void dequeue(std::uint32_t slot, std::optional<clock_type::time_point> wake_next = std::nullopt,
               bool served = false);
  void unmark(const std::string& key);
  void wake_yielded(const operation& op);
  // The wait mark of a queued LOCK's attempt (in marker_).
  wait_mark mark_of(const operation& op);
  // A waiter between attempts whose WAIT ran out: answered with its last failure.
  void wait_ran_out(std::uint32_t slot);
  // The head waiter of `key`, if it is between attempts, tries at `when`.
  void keep_rest_of_set(const operation& op);
  void wake_head(const std::string& key, clock_type::time_point when);
  // The queued `slot` tries at `when`, unless a retry is due earlier already.
  void schedule_retry(std::uint32_t slot, clock_type::time_point when);
  // The hold named `key` was released (an UNLOCK or a KEEP end here, a grant nobody took): the
  // head waiter tries at `when`, or, if its attempt is in flight, at once should that fail; so
  // do the heads of the sets that wait for it, and for a set those of its members.
  void lock_released(const std::string& key, clock_type::time_point when);
  void retry_head(const std::string& key, clock_type::time_point when);
  // An attempt on `key` that held no majority is being released (its cleanup is on its way):
  // this daemon's heads of the other queues that wait for one of its lock keys (a set's members,
  // the sets that hold one), which its keys may have refused, try again soon, counted as a
  // split's retries are (a few per release seen: retry_after_split).
  void attempt_released(const std::string& key, clock_type::time_point now);
  // Holds back waiting set `slot` while set_attempt_out (true), to try when that attempt is
  // decided (retry_deferred) or in 20 ms.
  bool held_back(std::uint32_t slot);
  // Whether another queue's head of this daemon, a set sharing a member with waiting set `op`,
  // has its attempt out: the two would split the masters, each refused by the other's keys.
  bool set_attempt_out(const operation& op) const;
  // A set's attempt on `key` was decided: the sets it held back (deferred) go now.
  void retry_deferred(const std::string& key);
  void retry_head_counted(const std::string& key, clock_type::time_point when);
  // The queued sets other than `key` that hold lock key `key` or, where `key` is a set, one of
  // its members: oldest request first.
  std::vector<std::string> sets_sharing(const std::string& key) const;
  // A release of `key` published by a master: its head waiter tries now.
  void wake_released(const std::string& key);
  std::chrono::milliseconds jitter(std::uint64_t up_to_ms);
  std::uint32_t start_keep(std::uint32_t slot, std::int64_t validity); // returns its index
  void renew(std::uint32_t index);
  void decide_renewal(std::uint32_t slot);
  void lose(std::uint32_t index, std::string_view why);
  // An UNLOCK handed over to the head waiter (engine_handover.cpp). start_hand_over runs the
  // UNLOCK in `unlock_slot` as a hand-over round together with its head waiter's round and
  // returns true, or returns false (the UNLOCK releases normally). pass_to_waiter gives the
  // waiter its vote from a master's answer to the UNLOCK (nullptr: the connection was lost),
  // while the waiter's round is the one the UNLOCK carries (handing_to_waiter).
  bool start_hand_over(std::uint32_t unlock_slot, bool releaser_holds);
  bool handing_to_waiter(const operation& unlock_op) const;
  void pass_to_waiter(std::uint32_t unlock_slot, std::size_t node, const script_reply* reply);
  // A KEEP lock ends without an UNLOCK (lost, or its client gone): released everywhere, the
  // resource lock-delayed, its head waiter woken.
  void end_keep(std::uint32_t index);

  const config& cfg_;
  node_io& io_;
  std::shared_ptr<spdlog::logger> log_;
  now_function now_;
  std::size_t node_count_;
  register_keys keys_;
  fence_register fences_;
  owner_generator owners_;
  // Names this daemon in the wait markers it leaves, so that its own releases do not publish
  // wake-ups for its own waiters (they learn of them here): 16 random hex characters.
  std::string daemon_id_;
  // How long past a waiter's next try its wait-marker entry counts, and how long a woken
  // daemon's entry still counts after a release: time to try (2 node timeouts and 100 ms).
  std::uint64_t mark_slack_ms_;
  // What this daemon's releases of granted holds pass the scripts (release_wake), made once.
  std::string release_wake_;
  engine_counters counters_;
  latency_histogram acquire_latency_;
  latency_histogram acquire_round_latency_;
  latency_histogram acquire_wait_latency_;
  std::vector<operation> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::uint64_t next_serial_ = 1;
  deadline_queue deadlines_;
  std::string command_;         // the current round's command, the same for every node
  std::string marker_;          // the wait marker of the current round's lock
  std::string value_;           // the value the current round's grant stores (owner and label)
  std::string wake_key_;        // the key of the wake-up being handled
  vote_tally slot_tally_;       // votes_of's view of a permit's round
  std::size_t set_waiters_ = 0; // queued MLOCKs: releases look for the sets they free only then
  node_health health_;
  wait_queues queues_;
  redlockd::keep_locks keeps_;
  lease_table leases_;
  release_cleanups cleanups_;
  // Locks granted after a fencing round, whose winning round's grants may still come: by that
  // round's tag, the masters not heard yet, until its deadline.
  struct late_grant_watch {
    std::uint32_t slot = 0;
    std::uint32_t generation = 0;
    std::string key;
    owner_id owner{};
    std::uint32_t pending = 0;
    std::int64_t permit_slot = 0;
    clock_type::time_point until{};
    // What a grant of another slot releases (a permit's): the hold, and when its key expires.
    lock_kind kind = lock_kind::exclusive;
    std::uint32_t permits = 0;
    clock_type::time_point expires{};
  };
  std::vector<late_grant_watch> late_grants_;
  std::minstd_rand random_;
};

} // namespace redlockd
