// The Redlock arithmetic: quorum, drift, validity and the vote tally of one round. No I/O.
#pragma once

#include "redlockd/config/config.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace redlockd {

// Majority of n nodes.
constexpr std::size_t quorum(std::size_t n) {
  return n / 2 + 1;
}

// Drift allowance for a TTL: ttl * factor + 2 ms, in microseconds.
std::int64_t drift_us(std::uint64_t ttl_ms, double clock_drift_factor);

// Milliseconds the lock is still guaranteed: ttl - elapsed - drift, rounded down.
// Negative or zero means no guarantee is left.
std::int64_t validity_ms(std::uint64_t ttl_ms, std::chrono::microseconds elapsed,
                         double clock_drift_factor);

// The per-node timeout of one request: node_timeout_ms, but never more than ttl/10 (at least 1 ms).
std::chrono::milliseconds node_timeout_for(std::uint64_t ttl_ms, std::uint32_t node_timeout_ms);

// One node's answer in a round.
enum class vote : std::uint8_t {
  pending, // not answered yet
  yes,     // granted (set, released, extended)
  no,      // refused: the key is held by someone else / not held by us
  failed,  // down, timed out, quarantined, error reply
};

// Counts the votes of one round over n nodes and says when the outcome is known:
// as soon as a quorum said yes, or as soon as a quorum can no longer be reached.
class vote_tally {
 public:
  enum class outcome : std::uint8_t { pending, reached, impossible };

  vote_tally() = default;
  explicit vote_tally(std::size_t nodes) { reset(nodes); }

  // `needed`: the votes that decide; 0 means a majority, quorum(nodes). Anything else is the
  // simulator's weakened variant (config::weakened).
  void reset(std::size_t nodes, std::size_t needed = 0);

  // Records a node's vote. Returns false (and changes nothing) if the node already voted.
  bool record(std::size_t node, vote v);

  outcome state() const;

  vote of(std::size_t node) const { return votes_[node]; }
  std::size_t nodes() const { return nodes_; }
  std::size_t needed() const { return needed_; }
  std::size_t yes() const { return yes_; }
  // The nodes that voted `v`, as a bit set (max_nodes fits in 32 bits).
  std::uint32_t mask_of(vote v) const {
    std::uint32_t mask = 0;
    for (std::size_t node = 0; node < nodes_; ++node)
      if (votes_[node] == v)
        mask |= std::uint32_t{1} << node;
    return mask;
  }
  std::uint32_t yes_mask() const { return mask_of(vote::yes); }
  std::size_t no() const { return no_; }
  std::size_t failed() const { return failed_; }
  std::size_t pending() const { return nodes_ - yes_ - no_ - failed_; }

  // After an impossible outcome: true when explicit refusals alone made the quorum unreachable
  // (more than n - quorum nodes said no), i.e. the resource is held elsewhere. Otherwise the
  // failure is for lack of reachable nodes.
  bool refused_by_majority() const { return no_ > nodes_ - needed(); }

 private:
  std::array<vote, max_nodes> votes_{};
  std::size_t nodes_ = 0;
  std::size_t needed_ = quorum(0);
  std::size_t yes_ = 0;
  std::size_t no_ = 0;
  std::size_t failed_ = 0;
};

} // namespace redlockd
