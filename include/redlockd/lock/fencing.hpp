// Fencing tokens as a replicated max-register (proto/PROTOCOL.md, "Fencing tokens"). No I/O.
//
// Every node keeps a never-expiring counter. An acquisition proposes T inside the script that
// sets the lock; a granting node stores max(counter, T) and returns its previous counter. If every
// granting node of the quorum had counter < T, T is now on a majority and larger than any token
// handed out before (majorities intersect): it is safe. Otherwise another proposal, above
// everything seen, goes to all nodes in a further round.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

namespace redlockd {

// The daemon's high-water mark: every proposal is unique and above everything observed.
class fence_register {
 public:
  // A new proposal, strictly above every earlier proposal and observation.
  std::uint64_t propose() { return ++high_water_; }
  // A proposal `lead` above that (fence_lead): tokens are not dense. It stops at 2^64 - 1
  // rather than wrap: a register that large (set by hand) conflicts either way.
  std::uint64_t propose_ahead(std::uint64_t lead) {
    const std::uint64_t room = std::numeric_limits<std::uint64_t>::max() - high_water_;
    high_water_ += room == 0 ? 0 : std::min(lead, room - 1) + 1;
    return high_water_;
  }
  // A counter value seen on a node (at connect, or returned by a script).
  void observe(std::uint64_t value) {
    if (value > high_water_)
      high_water_ = value;
  }
  std::uint64_t high_water() const { return high_water_; }

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

// How far above everything seen a fencing round proposes when round `last` conflicted, the
// `lost`-th round lost in a row (1: the acquire's own round). After the acquire's round: none,
// as before (its proposal may be stale, so its gap says how far behind the daemon was, not how
// fast the counter moves, and leads measured on it fed on the other daemons' leads: tokens grew
// about 1.6 times per grant among three daemons taking turns). After a fencing round, whose
// proposal was above everything seen when it was sent: as far as the counter moved past it
// while that round was in flight, doubled for each further round lost, at most max_fence_lead.
// Other daemons' grants go on raising the one counter while the next round is in flight too;
// one above what was seen lost round after round under load (simulator seed 170613: three
// daemons, a waiter that gave up after four rounds again and again for 400 ms on a free lock).
inline constexpr std::uint64_t max_fence_lead = 1024;
inline std::uint64_t fence_lead(const fence_round& last, unsigned lost) {
  if (!last.conflict() || lost < 2)
    return 0;
  std::uint64_t lead = std::min(last.max_previous() - last.proposed() + 1, max_fence_lead);
  for (unsigned round = 2; round < lost && lead < max_fence_lead; ++round)
    lead *= 2;
  return std::min(lead, max_fence_lead);
}

} // namespace redlockd
