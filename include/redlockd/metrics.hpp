// Prometheus text exposition (format 0.0.4) of the daemon's state. No I/O.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redlockd {

// Acquire latency in fixed buckets: recording is two comparisons and an increment.
class latency_histogram {
 public:
  // Upper bounds in seconds; +Inf is implicit.
  static constexpr std::array<double, 14> bounds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0};

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

struct node_metrics {
  std::string address;
  bool up = false;
  std::int64_t rtt_us = -1; // -1: not measured yet
  std::int64_t quarantined_ms = 0;
};

// Everything /metrics shows, gathered by the I/O layer.
struct metrics_snapshot {
  std::uint64_t results_ok = 0;
  std::uint64_t results_busy = 0;
  std::uint64_t results_noquorum = 0;
  std::uint64_t results_notheld = 0;
  std::uint64_t results_error = 0;
  std::uint64_t lost = 0;
  std::uint64_t renewed = 0;
  std::uint64_t fence_conflicts = 0;
  std::uint64_t master_restarts = 0;
  std::uint64_t master_clock_jumps = 0;
  std::uint64_t master_key_losses = 0;
  std::uint64_t auth_failures = 0;
  std::uint64_t keep_locks = 0;
  std::uint64_t waiters = 0;
  std::uint64_t clients = 0;
  std::uint64_t fence_high_water = 0;
  double uptime_seconds = 0;
  std::vector<node_metrics> nodes;
  const latency_histogram* acquire_latency = nullptr;
};

std::string render_metrics(const metrics_snapshot& snapshot);

// Escapes a label value: backslash, double quote and line feed.
std::string escape_label(std::string_view value);

} // namespace redlockd
