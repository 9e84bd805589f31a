// The Redlock engine: runs LOCK / UNLOCK / EXTEND over N nodes, queues waiters per resource,
// renews KEEP locks and applies lock-delay. It owns no socket and no timer: the I/O layer hands it
// node replies and timer expiries, and it answers through node_io and reply_sink. One thread.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/lock/fencing.hpp"
#include "redlockd/metrics/metrics.hpp"
#include "redlockd/lock/owner.hpp"
#include "redlockd/resp/pipeline.hpp"
#include "redlockd/protocol/protocol.hpp"
#include "redlockd/lock/redlock.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct redisReply;

namespace spdlog {
class logger;
}

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
};

class lock_engine {
 public:
  using now_function = std::function<clock_type::time_point()>;

  lock_engine(const config& cfg, node_io& io, std::shared_ptr<spdlog::logger> log,
              now_function now = &clock_type::now);

  // Client requests. The reply is delivered to `sink` with `seq`, possibly before returning.
  // LOCK ... WAIT beyond max_waiters(_per_resource) and KEEP beyond
  // max_keep_locks_per_connection answer ERR TOO_MANY.
  void lock(const lock_request& req, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  void unlock(const unlock_request& req, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  void extend(const extend_request& req, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  // The client's connection closed: its waiters leave their queues and its KEEP locks are
  // released on every node.
  void client_gone(const reply_sink* client);
  // The daemon is stopping: waiters are answered ERR SHUTTING_DOWN, KEEP locks are pushed LOST
  // and released on every node. Acquisitions already in flight complete normally.
  void shutdown();

  // A node answered a request the engine sent.
  void on_reply(std::size_t node, const request_tag& tag, const redisReply& reply);
  // A request the engine sent will never be answered (its connection was lost).
  void on_failure(std::size_t node, const request_tag& tag);
  // What a link read from a master when it connected, before the master takes requests.
  struct node_facts {
    std::optional<std::uint64_t> fence; // its fencing counter; nullopt: the key is missing
    std::uint64_t max_ttl_ms = 0;       // its record of the longest TTL granted on the fleet
    std::string_view run_id;
    std::uint64_t uptime_ms = 0;
  };
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

  enum class quarantine_reason : std::uint8_t { none, restart, keyloss, clock };
  struct node_status {
    quarantine_reason reason = quarantine_reason::none;
    std::int64_t remaining_ms = 0;
  };
  node_status status_of(std::size_t node);
  // The longest TTL known on the fleet: granted here or read from the masters.
  std::uint64_t max_ttl_granted() const { return max_ttl_granted_; }
  // Whether a node's answer counts now (connected, not quarantined): for STATUS, which reads
  // the masters outside the engine (status_query.hpp).
  bool votes(std::size_t node) { return eligible(node); }
  // The timer armed through node_io::arm_timer expired.
  void on_timer();
  std::optional<clock_type::time_point> next_deadline();

  const engine_counters& counters() const { return counters_; }
  std::uint64_t fence_high_water() const { return fences_.high_water(); }
  std::size_t nodes() const { return node_count_; }
  std::size_t operations_in_flight() const { return slots_.size() - free_slots_.size(); }
  std::size_t waiters() const { return waiter_count_; }
  std::size_t keep_locks() const { return keeps_.size() - free_keeps_.size(); }
  const latency_histogram& acquire_latency() const { return acquire_latency_; }

  // For a session writing a grant later than it was decided: the KEEP lock's validity now, or
  // nullopt if it is gone; grant_expired() drops a KEEP lock whose OK could not be written.
  std::optional<clock_type::time_point> valid_until(const grant_reply& grant) const;
  void grant_expired(const grant_reply& grant);

 private:
  enum class op_kind : std::uint8_t { lock, unlock, extend, renew };
  // draining: an UNLOCK or EXTEND already answered, still collecting the remaining nodes' replies
  // to see whether one of them lost a key it should hold.
  enum class op_phase : std::uint8_t { idle, waiting, voting, fencing, draining };

  struct operation {
    std::uint32_t generation = 1; // changes with every round, so stale replies do not match
    std::uint64_t serial = 0;     // unique per request, for timers that span rounds
    op_kind kind = op_kind::lock;
    op_phase phase = op_phase::idle;
    std::string key;
    owner_id owner{};
    std::uint64_t ttl_ms = 0;
    clock_type::time_point t0{};           // start of the current round's attempt
    clock_type::time_point requested_at{}; // when the client's request arrived
    vote_tally tally;
    fence_round fence;
    unsigned fence_rounds = 0;
    std::uint64_t retry_ms = 0; // smallest remaining TTL among refusals, 0 = unknown
    std::shared_ptr<reply_sink> sink;
    std::uint64_t seq = 0;
    // LOCK ... WAIT: queued on `key`; gives up at wait_until.
    bool queued = false;
    bool keep = false;
    bool keep_started = false; // the KEEP lock exists; it owns the per-client count now
    clock_type::time_point wait_until{};
    std::string last_failure;          // the reply to give if the wait runs out
    std::uint32_t keep_index = 0;      // renew: which KEEP lock
    std::uint32_t keep_generation = 0; // renew: that lock's generation when the renewal began
    // Key-loss detection. lock: the nodes that granted in the voting round. unlock and extend:
    // the nodes that granted the lease this daemon gave for (key, owner), if it is still valid
    // until expect_until, and the nodes that answered that the key is gone.
    bool drain = false; // after the reply, collect the other nodes' answers (phase draining)
    std::uint32_t granted = 0;
    std::uint32_t expect_held = 0;
    clock_type::time_point expect_until{};
    std::uint32_t missing = 0;
  };

  // A lock bound to a client connection, renewed by the daemon.
  struct keep_lock {
    std::uint32_t generation = 1;
    bool active = false;
    bool renewing = false;
    std::string key;
    owner_id owner{};
    std::uint64_t ttl_ms = 0;
    clock_type::time_point valid_until{};
    std::uint32_t granted = 0; // nodes that granted the acquisition or the last renewal
    std::shared_ptr<reply_sink> sink;
    std::uint64_t seq = 0; // of the OK that granted it: LOST never goes out before it
  };

  enum class timer_kind : std::uint8_t { round, wait_retry, wait_expiry, renew, node };

  // Deadlines of every kind share one heap and one timer. `stamp` is the generation or serial
  // the entry was made for; an entry that no longer matches is dropped when it comes up.
  struct deadline_entry {
    clock_type::time_point when;
    std::uint64_t stamp;
    std::uint32_t slot;
    timer_kind kind;
    bool operator>(const deadline_entry& other) const { return when > other.when; }
  };

  std::uint32_t allocate(op_kind kind, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  void finish(std::uint32_t slot, std::string line);
  void finish_grant(std::uint32_t slot, grant_reply grant);
  // The common end of an operation: returns its sink (null if its client left).
  std::shared_ptr<reply_sink> retire(std::uint32_t slot);
  void free_slot(std::uint32_t slot);
  // After a node's vote: key-loss check, then the decision (or the end of draining).
  void after_vote(std::uint32_t slot);
  // A reply to an operation already answered (phase draining), and the end of that phase.
  void drain_reply(std::uint32_t slot, std::size_t node, const redisReply& reply);
  void end_draining(std::uint32_t slot);
  void release_keep_count(const operation& op);
  void add_deadline(clock_type::time_point when, std::uint32_t slot, std::uint64_t stamp,
                    timer_kind kind);
  void begin_round(std::uint32_t slot, op_phase phase, request_kind kind);
  void send_round(std::uint32_t slot, request_kind kind);
  // Formats the request of a round into command_.
  void format_command(std::uint32_t slot, request_kind kind, bool by_sha);
  // Releases nobody waits for, on every node: also those that refused or did not answer (their
  // SET may have happened after all). A node that is down, or whose reply is lost or NOSCRIPT,
  // gets it again when it is back, until `expires`.
  void release_everywhere(std::string_view key, const owner_id& owner,
                          clock_type::time_point expires);
  std::uint32_t new_cleanup(std::string_view key, const owner_id& owner,
                            clock_type::time_point expires);
  void format_cleanup(std::uint32_t entry, bool by_sha); // into scratch_
  void send_cleanup(std::size_t node, std::uint32_t entry);
  void cleanup_reply(std::size_t node, const request_tag& tag, const redisReply* reply);
  void owe_cleanup(std::size_t node, std::uint32_t entry);
  void drop_cleanup_ref(std::uint32_t entry);
  void decide(std::uint32_t slot);
  void decide_lock(std::uint32_t slot);
  void decide_fencing(std::uint32_t slot);
  void decide_renewal(std::uint32_t slot);
  void start_fencing_round(std::uint32_t slot);
  void lock_acquired(std::uint32_t slot, std::int64_t validity);
  void lock_failed(std::uint32_t slot, std::string line);
  std::int64_t validity_now(const operation& op) const;
  bool expired(const deadline_entry& entry) const;
  void fire(const deadline_entry& entry);

  // WAIT
  void try_acquire(std::uint32_t slot);
  // Leaves the queue; when `slot` was its head, the new head tries at `wake_next`.
  void dequeue(std::uint32_t slot, std::optional<clock_type::time_point> wake_next = std::nullopt);
  void wake_head(const std::string& key, clock_type::time_point when);
  std::chrono::milliseconds jitter(std::uint64_t up_to_ms);
  // KEEP
  std::uint32_t start_keep(std::uint32_t slot, std::int64_t validity); // returns its index
  void renew(std::uint32_t index);
  void lose(std::uint32_t index);
  void drop_keep(std::uint32_t index);
  // quarantine
  bool eligible(std::size_t node) const;
  bool trusted(std::size_t node) const;
  bool clock_ok(std::size_t node, const redisReply& seconds, const redisReply& micros,
                clock_type::time_point sent_at);
  std::int64_t clock_jump_bound_us() const;
  void expect_lease(operation& op);
  void judge_key_loss(operation& op);
  void try_start();
  void judge(std::size_t node, const node_facts& facts);
  // The node may have lost locks since `since`: it stops voting, and its quarantine is sized
  // from the longest TTL a majority of the other masters recorded.
  void quarantine(std::size_t node, quarantine_reason reason, clock_type::time_point since);
  void start_fleet_read(std::size_t node);
  void fleet_read_reply(std::size_t answering, const request_tag& tag, const redisReply* reply);
  void fleet_read_done(std::size_t node);
  void send_seed(std::size_t node);
  void seed_reply(std::size_t node, const request_tag& tag, const redisReply* reply);
  void node_timer(std::size_t node);
  void raise_max_ttl(std::uint64_t ttl_ms);
  // lock-delay
  void delay(const std::string& key);
  std::optional<clock_type::time_point> delayed_until(const std::string& key);
  void sweep_delays();

  const config& cfg_;
  node_io& io_;
  std::shared_ptr<spdlog::logger> log_;
  now_function now_;
  std::size_t node_count_;
  fence_register fences_;
  owner_generator owners_;
  engine_counters counters_;
  latency_histogram acquire_latency_;
  std::vector<operation> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::uint64_t next_serial_ = 1;
  std::priority_queue<deadline_entry, std::vector<deadline_entry>, std::greater<>> deadlines_;
  std::optional<clock_type::time_point> armed_;
  std::string scratch_; // reused buffer for unawaited commands
  std::string command_; // the current round's command, the same for every node

  // Waiters per resource key, first come first served: (slot, serial).
  std::unordered_map<std::string, std::deque<std::pair<std::uint32_t, std::uint64_t>>> queues_;
  std::size_t waiter_count_ = 0;
  std::vector<keep_lock> keeps_;
  std::vector<std::uint32_t> free_keeps_;
  std::unordered_map<std::string, std::uint32_t> keep_by_key_;
  // KEEP locks and KEEP acquisitions in flight per client, for max_keep_locks_per_connection.
  std::unordered_map<const reply_sink*, std::uint32_t> keeps_per_client_;
  // Plain leases granted here (key -> owner, expiry, validity given, nodes that granted): for
  // lock-delay and to notice a node that lost a key it should hold. Keys refused until a time.
  struct lease {
    owner_id owner;
    clock_type::time_point expires;
    clock_type::time_point valid_until;
    std::uint32_t granted = 0;
  };
  std::unordered_map<std::string, lease> leases_;
  std::unordered_map<std::string, clock_type::time_point> delays_;
  std::size_t delay_sweep_at_ = 1024; // sweep expired entries when the tables grow past this
  std::minstd_rand random_;

  // Quarantine. A node votes only once the fleet has been read from a majority of masters that
  // kept their data (started_) and while it is trusted. A node that may have lost locks is
  // quarantined (its length from a fleet read), then re-seeded (an awaited write), then trusted.
  enum class trust : std::uint8_t { unknown, trusted, quarantined, reseeding };
  struct node_health {
    std::string run_id;
    trust state = trust::unknown;
    std::optional<node_facts> pending;          // read before the fleet was known; judged at start
    std::string pending_run_id;                 // pending->run_id points here
    clock_type::time_point lost_since{};        // when it may have lost its data
    clock_type::time_point quarantined_until{}; // a lower bound until the fleet read is done
    quarantine_reason reason = quarantine_reason::none;
    // The fleet read for this node: answers from the other masters.
    std::uint32_t read_generation = 0;
    bool read_done = false;
    std::size_t read_sent = 0;
    std::size_t read_answers = 0;         // answers and failures
    std::size_t read_trusted_answers = 0; // answers from trusted masters
    std::uint64_t read_fence = 0;
    std::uint64_t read_max_ttl = 0;
    bool seed_in_flight = false;
    struct time_sample {
      std::int64_t node_us;            // the node's TIME
      clock_type::time_point sent;     // when its request was sent
      clock_type::time_point received; // when its reply was handled
    };
    std::optional<time_sample> clock; // the last TIME sample
  };
  std::array<node_health, max_nodes> health_{};
  bool started_ = false; // the fleet's registers are known from a majority
  std::uint64_t max_ttl_granted_ = 0;
  std::uint64_t min_ttl_granted_ = 0; // 0: none yet
  std::string max_ttl_key_;

  // Releases nobody waits for, kept while a reply or a node that was down still owes them.
  struct cleanup_entry {
    std::string key;
    owner_id owner{};
    clock_type::time_point expires{};
    std::uint32_t refs = 0;
  };
  std::vector<cleanup_entry> cleanups_;
  std::vector<std::uint32_t> free_cleanups_;
  std::array<std::vector<std::uint32_t>, max_nodes> owed_{}; // per node, entries to send again
};

} // namespace redlockd
