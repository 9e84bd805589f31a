// Every deadline of the engine in one min-heap behind one timer. An entry carries the stamp
// (generation or serial) of what it was made for; one that no longer matches is dropped when
// it comes up, so nothing is ever removed from the middle. No I/O.
#pragma once

#include "redlockd/lock/engine_io.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <queue>
#include <vector>

namespace redlockd {

enum class timer_kind : std::uint8_t { round, wait_retry, wait_expiry, renew, node };

struct deadline {
  clock_type::time_point when;
  std::uint64_t stamp;
  std::uint32_t slot; // operation slot, KEEP lock index or node, by kind
  timer_kind kind;
  bool operator>(const deadline& other) const { return when > other.when; }
};

class deadline_queue {
 public:
  // Adds `d`; true when the timer must be armed for it (it is earlier than the armed time).
  bool add(const deadline& d) {
    heap_.push(d);
    if (armed_ && *armed_ <= d.when)
      return false;
    armed_ = d.when;
    return true;
  }

  // The timer went off: pops every entry due at `now`, skipping those `stale` rejects, firing
  // the others. Returns when the timer must go off next, if anything is left.
  template <typename Stale, typename Fire>
  std::optional<clock_type::time_point> run_due(clock_type::time_point now, Stale&& stale,
                                                Fire&& fire) {
    armed_.reset();
    while (!heap_.empty() && heap_.top().when <= now) {
      const deadline entry = heap_.top();
      heap_.pop();
      if (!stale(entry))
        fire(entry);
    }
    armed_ = next(stale);
    return armed_;
  }

  // The earliest deadline still current; stale ones on top are dropped so they do not wake the
  // loop.
  template <typename Stale>
  std::optional<clock_type::time_point> next(Stale&& stale) {
    while (!heap_.empty()) {
      if (!stale(heap_.top()))
        return heap_.top().when;
      heap_.pop();
    }
    return std::nullopt;
  }

 private:
  std::priority_queue<deadline, std::vector<deadline>, std::greater<>> heap_;
  std::optional<clock_type::time_point> armed_;
};

} // namespace redlockd
