// The Redlock engine: runs LOCK / UNLOCK / EXTEND over N nodes. It owns no socket and no timer:
// the I/O layer hands it node replies and timer expiries, and it answers through node_io and
// reply_sink. Everything runs on one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <vector>

#include "redlockd/config.hpp"
#include "redlockd/fencing.hpp"
#include "redlockd/owner.hpp"
#include "redlockd/pipeline.hpp"
#include "redlockd/protocol.hpp"
#include "redlockd/redlock.hpp"

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

// Where a request's reply line goes (a client session). `seq` orders replies per client.
class reply_sink {
public:
  virtual ~reply_sink() = default;
  virtual void deliver(std::uint64_t seq, std::string line) = 0;
};

struct engine_counters {
  std::uint64_t acquired = 0;
  std::uint64_t busy = 0;
  std::uint64_t noquorum = 0;
  std::uint64_t released = 0;
  std::uint64_t extended = 0;
  std::uint64_t notheld = 0;
  std::uint64_t lost = 0;
  std::uint64_t fence_conflicts = 0; // acquisitions that needed a second fencing round
};

class lock_engine {
public:
  using now_function = std::function<clock_type::time_point()>;

  lock_engine(const config& cfg, node_io& io, std::shared_ptr<spdlog::logger> log,
              now_function now = &clock_type::now);

  // Client requests. The reply is delivered to `sink` with `seq`, possibly before returning.
  void lock(const lock_request& req, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  void unlock(const unlock_request& req, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  void extend(const extend_request& req, std::shared_ptr<reply_sink> sink, std::uint64_t seq);

  // A node answered a request the engine sent.
  void on_reply(std::size_t node, const request_tag& tag, const redisReply& reply);
  // A request the engine sent will never be answered (its connection was lost).
  void on_failure(std::size_t node, const request_tag& tag);
  // A node's fencing counter, read when it connected.
  void on_fence_read(std::uint64_t value) { fences_.observe(value); }
  // The timer armed through node_io::arm_timer expired.
  void on_timer();
  std::optional<clock_type::time_point> next_deadline();

  const engine_counters& counters() const { return counters_; }
  std::uint64_t fence_high_water() const { return fences_.high_water(); }
  std::size_t nodes() const { return node_count_; }
  std::size_t operations_in_flight() const { return slots_.size() - free_slots_.size(); }

private:
  enum class op_kind : std::uint8_t { lock, unlock, extend };
  enum class op_phase : std::uint8_t { idle, voting, fencing };

  struct operation {
    std::uint32_t generation = 1;
    op_kind kind = op_kind::lock;
    op_phase phase = op_phase::idle;
    std::string key;
    owner_id owner{};
    std::uint64_t ttl_ms = 0;
    clock_type::time_point t0{};
    vote_tally tally;
    fence_round fence;
    unsigned fence_rounds = 0;
    std::uint64_t retry_ms = 0; // smallest remaining TTL among refusals, 0 = unknown
    std::shared_ptr<reply_sink> sink;
    std::uint64_t seq = 0;
  };

  // A round's deadline. Each round of an operation has its own generation, so a deadline or a
  // reply of an earlier round no longer matches.
  struct deadline_entry {
    clock_type::time_point when;
    std::uint32_t slot;
    std::uint32_t generation;
    bool operator>(const deadline_entry& other) const { return when > other.when; }
  };

  std::uint32_t allocate(op_kind kind, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  void finish(std::uint32_t slot, std::string line);
  void begin_round(std::uint32_t slot, op_phase phase, request_kind kind);
  void send_round(std::uint32_t slot, request_kind kind);
  void send_command(std::size_t node, std::uint32_t slot, request_kind kind, bool by_sha);
  void release_everywhere(const operation& op);
  void record(std::uint32_t slot, std::size_t node, vote v);
  void decide(std::uint32_t slot);
  void decide_lock(std::uint32_t slot);
  void decide_fencing(std::uint32_t slot);
  void start_fencing_round(std::uint32_t slot);
  std::int64_t validity_now(const operation& op) const;

  const config& cfg_;
  node_io& io_;
  std::shared_ptr<spdlog::logger> log_;
  now_function now_;
  std::size_t node_count_;
  fence_register fences_;
  owner_generator owners_;
  engine_counters counters_;
  std::vector<operation> slots_;
  std::vector<std::uint32_t> free_slots_;
  std::priority_queue<deadline_entry, std::vector<deadline_entry>, std::greater<>> deadlines_;
  std::string scratch_; // reused buffer for formatting commands
  std::optional<clock_type::time_point> armed_;
};

} // namespace redlockd
