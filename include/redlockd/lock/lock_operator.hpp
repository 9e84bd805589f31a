// Operating locks (protocol v1.1): LIST reads every master's holds with a bounded SCAN, BREAK
// ends a resource's holds on every master whatever their owner. Like STATUS (status_query.hpp)
// this runs outside the lock engine: it takes part in no lock, shares only the masters'
// eligibility, and tells the engine of a BREAK's result (lock-delay, LOST to a KEEP holder).
// One thread, no I/O of its own.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/lock/engine_io.hpp"
#include "redlockd/protocol/protocol.hpp"
#include "redlockd/resp/pipeline.hpp"
#include "redlockd/resp/script_calls.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace spdlog {
class logger;
}

namespace redlockd {

// LIST's bounds on each master (proto/PROTOCOL.md says what they cost): each step is one script
// call that SCANs with this COUNT, at most this many steps per master per LIST, and the whole
// LIST gives up on a master that has not finished after list_time_budget.
inline constexpr std::uint32_t list_scan_count = 200;
inline constexpr std::uint32_t list_steps_max = 50;
inline constexpr std::chrono::milliseconds list_time_budget{1000};

// The SCAN MATCH pattern for the keys whose names start with `key_prefix` + `prefix`: glob
// characters (* ? [ ] \) escaped, then '*'.
std::string list_pattern(std::string_view key_prefix, std::string_view prefix);

// BREAK's verdict from each master's answer (std::nullopt: silent, 1: it ended a hold, 0: none
// there): ended when any master ended a hold; not_held when a quorum answered and none held
// one; noquorum otherwise (`answered` of `needed`).
struct break_verdict {
  enum class kind : std::uint8_t { ended, not_held, noquorum };
  kind outcome = kind::noquorum;
  std::size_t ended_on = 0;
  std::size_t answered = 0;
  std::size_t needed = 0;
};
break_verdict decide_break(std::span<const std::optional<std::int64_t>> answers);

// What one master's scan gave: whether it answered at all, whether its scan ran to the end, and
// the holds it found.
struct node_listing {
  bool answered = false;
  bool complete = false;
  std::vector<listed_hold> holds;
};

// One resource LIST reports.
struct listed_lock {
  std::string resource;
  std::string kind;          // "exclusive" (also a set's member), "shared" or "permit"
  std::uint64_t ttl_ms = 0;  // a lower bound, as STATUS's
  std::uint64_t holders = 1; // shared holders, or permits in use, counted as STATUS counts
  std::vector<std::string> labels;
};

struct listing {
  bool quorum = false; // a quorum of masters answered
  std::size_t answered = 0;
  std::size_t needed = 0;
  bool truncated = false; // a master's scan did not finish, or more than `count` matched
  std::vector<listed_lock> locks;
};

// Keeps the keys held on a quorum of masters, sorted by resource, at most `count`. The time
// left is STATUS's (the (N-Q+1)-th largest PTTL) less `elapsed` and the drift allowance; a
// master whose scan did not finish counts as silent for the keys it did not report.
listing merge_listings(std::span<const node_listing> nodes, std::string_view key_prefix,
                       std::uint32_t count, std::chrono::microseconds elapsed,
                       double clock_drift_factor);
// `OK <json>` for a listing with a quorum.
std::string format_listing(const listing& result);

class lock_operator {
 public:
  using now_function = std::function<clock_type::time_point()>;
  using eligible_function = std::function<bool(std::size_t node)>;
  using arm_function = std::function<void(clock_type::time_point)>;
  using broken_function = std::function<void(const std::string& key)>;

  // `eligible` says whether a master's answer counts (the engine's view); `arm` asks for
  // on_timer() at a time; `broken` tells the engine that a BREAK ended holds of a key.
  lock_operator(const config& cfg, node_io& io, eligible_function eligible, arm_function arm,
                broken_function broken, std::shared_ptr<spdlog::logger> log,
                now_function now = &clock_type::now);

  // The reply goes to `sink` with `seq`, possibly before returning. BREAK is logged with `peer`.
  void list(const list_request& req, std::shared_ptr<reply_sink> sink, std::uint64_t seq);
  void break_hold(const break_request& req, std::string_view peer, std::shared_ptr<reply_sink> sink,
                  std::uint64_t seq);
  // A master answered a request_kind::break_hold or list_step, or never will.
  void on_reply(std::size_t node, const request_tag& tag, const script_reply& reply);
  void on_failure(std::size_t node, const request_tag& tag);
  // The time given to `arm` came.
  void on_timer();

 private:
  enum class job_kind : std::uint8_t { list, break_hold };
  struct job {
    std::uint32_t generation = 1;
    bool active = false;
    job_kind kind = job_kind::list;
    clock_type::time_point started{};
    clock_type::time_point deadline{};
    std::string key;     // BREAK: the lock key
    std::string peer;    // BREAK: who asked
    std::string pattern; // LIST: the SCAN pattern
    std::uint32_t count = 0;
    std::size_t waiting = 0; // masters still at work
    std::array<std::optional<std::int64_t>, max_nodes> ended{};
    std::array<node_listing, max_nodes> listings{};
    std::array<std::uint32_t, max_nodes> steps{};
    std::shared_ptr<reply_sink> sink;
    std::uint64_t seq = 0;
  };
  std::uint32_t start(job_kind kind, std::shared_ptr<reply_sink> sink, std::uint64_t seq,
                      std::chrono::milliseconds budget);
  job* current(const request_tag& tag);
  void send_list_step(std::uint32_t slot, std::size_t node, std::string_view cursor);
  void node_done(std::uint32_t slot);
  void finish(std::uint32_t slot);
  std::string finish_break(job& j);
  void rearm();

  const config& cfg_;
  node_io& io_;
  eligible_function eligible_;
  arm_function arm_;
  broken_function broken_;
  std::shared_ptr<spdlog::logger> log_;
  now_function now_;
  register_keys keys_;
  std::vector<job> jobs_;
  std::vector<std::uint32_t> free_;
  std::string command_;
  std::string marker_;
};

} // namespace redlockd
