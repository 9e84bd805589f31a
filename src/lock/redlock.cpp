#include "redlockd/lock/redlock.hpp"

#include <algorithm>
#include <cmath>

namespace redlockd {

std::int64_t drift_us(std::uint64_t ttl_ms, double clock_drift_factor) {
  // Rounded up: the allowance must never be smaller than the factor says.
  const double drift = std::ceil(static_cast<double>(ttl_ms) * clock_drift_factor * 1000.0);
  return static_cast<std::int64_t>(drift) + 2000;
}

std::int64_t validity_ms(std::uint64_t ttl_ms, std::chrono::microseconds elapsed,
                         double clock_drift_factor) {
  const std::int64_t left_us = static_cast<std::int64_t>(ttl_ms) * 1000 - elapsed.count() -
                               drift_us(ttl_ms, clock_drift_factor);
  // Round toward minus infinity so that a fraction of a millisecond is never promised.
  if (left_us >= 0)
    return left_us / 1000;
  return -((-left_us + 999) / 1000);
}

std::chrono::milliseconds node_timeout_for(std::uint64_t ttl_ms, std::uint32_t node_timeout_ms) {
  const std::uint64_t cap = std::max<std::uint64_t>(1, ttl_ms / 10);
  return std::chrono::milliseconds(std::min<std::uint64_t>(node_timeout_ms, cap));
}

void vote_tally::reset(std::size_t nodes, std::size_t needed) {
  nodes_ = std::min(nodes, max_nodes);
  needed_ = needed == 0 ? quorum(nodes_) : needed;
  votes_.fill(vote::pending);
  yes_ = no_ = failed_ = 0;
}

bool vote_tally::record(std::size_t node, vote v) {
  if (node >= nodes_ || votes_[node] != vote::pending || v == vote::pending)
    return false;
  votes_[node] = v;
  switch (v) {
  case vote::yes:
    ++yes_;
    break;
  case vote::no:
    ++no_;
    break;
  case vote::failed:
    ++failed_;
    break;
  case vote::pending:
    break;
  }
  return true;
}

vote_tally::outcome vote_tally::state() const {
  if (yes_ >= needed())
    return outcome::reached;
  if (yes_ + pending() < needed())
    return outcome::impossible;
  return outcome::pending;
}

} // namespace redlockd
