// Prometheus text exposition (format 0.0.4) of the daemon's state. No I/O.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redlockd {

// Acquire latency in fixed buckets: recording is a few comparisons and an increment.
class latency_histogram {
 public:
  // Upper bounds in seconds; +Inf is implicit. Rounds take milliseconds; waits under WAIT can
  // take minutes.
  static constexpr std::array<double, 17> bounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                    0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                                    1.0,    5.0,     10.0,   30.0,  60.0};

  void record(std::chrono::nanoseconds elapsed);

  // Per bucket (not cumulative), the last one is +Inf.
  const std::array<std::uint64_t, bounds.size() + 1>& buckets() const { return buckets_; }
  double sum_seconds() const { return sum_seconds_; }
  std::uint64_t count() const { return count_; }

 private:
  std::array<std::uint64_t, bounds.size() + 1> buckets_{};
  double sum_seconds_ = 0;
  std::uint64_t count_ = 0;
};

// Replies to client requests, by request and outcome (redlockd_results_total{op,outcome}).
enum class result_op : std::uint8_t { lock, unlock, extend, other };
enum class result_outcome : std::uint8_t { ok, busy, noquorum, notheld, error };

class result_counters {
 public:
  static constexpr std::size_t ops = 4;
  static constexpr std::size_t outcomes = 5;

  void add(result_op op, result_outcome outcome) {
    ++counts_[static_cast<std::size_t>(op)][static_cast<std::size_t>(outcome)];
  }
  // Counts the reply line to a LOCK, UNLOCK or EXTEND by its first word.
  void add_reply(result_op op, std::string_view line);
  std::uint64_t get(result_op op, result_outcome outcome) const {
    return counts_[static_cast<std::size_t>(op)][static_cast<std::size_t>(outcome)];
  }

 private:
  std::array<std::array<std::uint64_t, outcomes>, ops> counts_{};
};

// The node states of INFO; /metrics shows each as redlockd_node_state{node,state} 0 or 1.
inline constexpr std::array<std::string_view, 8> node_states = {"ok",
                                                                "connecting",
                                                                "down",
                                                                "down:auth",
                                                                "quarantined:restart",
                                                                "quarantined:keyloss",
                                                                "quarantined:clock",
                                                                "refused:eviction"};

struct node_metrics {
  std::string address;
  bool up = false;
  std::int64_t rtt_us = -1; // -1: not measured yet
  std::int64_t quarantined_ms = 0;
  std::string_view state = "connecting"; // one of node_states
};

// The process_* metrics every Prometheus client library exports, read from /proc.
struct process_metrics {
  bool valid = false; // false: /proc could not be read; no process_* samples
  double cpu_seconds = 0;
  double resident_bytes = 0;
  double virtual_bytes = 0;
  double open_fds = 0;
  double max_fds = 0;
  double start_time_seconds = 0; // since the Unix epoch
};

// Everything /metrics shows, gathered by the I/O layer.
struct metrics_snapshot {
  std::string_view version;
  result_counters results;
  std::uint64_t other_errors = 0; // ERR replies to anything but LOCK, UNLOCK and EXTEND
  std::size_t quorum = 0;         // votes a lock needs
  std::uint64_t lost = 0;
  std::uint64_t renewed = 0;
  std::uint64_t fence_conflicts = 0;
  std::uint64_t master_restarts = 0;
  std::uint64_t master_clock_jumps = 0;
  std::uint64_t master_key_losses = 0;
  std::uint64_t master_clock_jumps_backward = 0;
  std::uint64_t auth_failures = 0;
  std::uint64_t delayed = 0;
  std::uint64_t handovers = 0;
  std::uint64_t wakeups = 0;
  // Grants by lock kind: (kind name, count), in the kinds table's order.
  std::vector<std::pair<std::string_view, std::uint64_t>> grants;
  std::uint64_t keep_locks = 0;
  std::uint64_t waiters = 0;
  std::uint64_t clients = 0;
  std::uint64_t operations_in_flight = 0;
  std::uint64_t fence_high_water = 0;
  std::uint64_t max_ttl_granted_ms = 0;
  double uptime_seconds = 0;
  std::vector<node_metrics> nodes;
  const latency_histogram* acquire_latency = nullptr; // request to reply, WAIT included
  const latency_histogram* acquire_round = nullptr;   // an attempt's start to its decision
  const latency_histogram* acquire_wait = nullptr;    // request to the winning attempt's start
  process_metrics process;
};

std::string render_metrics(const metrics_snapshot& snapshot);

// Escapes a label value: backslash, double quote and line feed.
std::string escape_label(std::string_view value);

} // namespace redlockd
