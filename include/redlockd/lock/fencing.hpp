// Fencing tokens as a replicated max-register (proto/PROTOCOL.md, "Fencing tokens"). No I/O.
//
// Every node keeps a never-expiring counter. An acquisition proposes T inside the script that
// sets the lock; a granting node stores max(counter, T) and returns its previous counter. If every
// granting node of the quorum had counter < T, T is now on a majority and larger than any token
// handed out before (majorities intersect): it is safe. Otherwise another proposal, above
// everything seen, goes to all nodes in a further round.
#pragma once

#include <cstdint>

namespace redlockd {

// The daemon's high-water mark: every proposal is unique and above everything observed.
class fence_register {
 public:
  // A new proposal, strictly above every earlier proposal and observation, and at least `floor`
  // (the masters' time in µs, node_health::fleet_time_us): daemons that propose one above what
  // they last saw tie and leapfrog each other on a busy fleet, so that every round loses to the
  // others' rounds in flight (simulator seed 170613); proposals that follow a clock they share
  // reach the masters nearly in the order they were made. Safety does not depend on the floor.
  // At 2^64 - 1 it stays there: the rounds then fail, tokens never wrap.
  std::uint64_t propose(std::uint64_t floor = 0) {
    if (high_water_ != max_token)
      ++high_water_;
    if (floor > high_water_)
      high_water_ = floor;
    return high_water_;
  }
  // A counter value seen on a node (at connect, or returned by a script).
  void observe(std::uint64_t value) {
    if (value > high_water_)
      high_water_ = value;
  }
  std::uint64_t high_water() const { return high_water_; }

  static constexpr std::uint64_t max_token = ~std::uint64_t{0};

 private:
  std::uint64_t high_water_ = 0;
};

// One round of a proposal: collects the previous counters the voting nodes returned.
class fence_round {
 public:
  fence_round() = default;
  explicit fence_round(std::uint64_t proposed) : proposed_(proposed) {}

  std::uint64_t proposed() const { return proposed_; }

  // A node stored max(counter, proposed) and returned its previous counter.
  // Returns true if that node had not seen anything at or above the proposal.
  bool accept(std::uint64_t previous) {
    if (previous > max_previous_)
      max_previous_ = previous;
    if (previous >= proposed_) {
      conflict_ = true;
      return false;
    }
    return true;
  }

  // Some voting node had already seen the proposal or more: the token is not safe.
  bool conflict() const { return conflict_; }
  std::uint64_t max_previous() const { return max_previous_; }

 private:
  std::uint64_t proposed_ = 0;
  std::uint64_t max_previous_ = 0;
  bool conflict_ = false;
};

} // namespace redlockd
