// Virtual time and the one queue of everything that happens in a run: message deliveries,
// timers, client actions, faults. Events at the same time run in the order they were scheduled,
// so a run is a pure function of its seed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace redlockd::sim {

// Microseconds of the simulation's true time (the clients' and checkers' clock). Daemons and
// masters read their own clocks, derived from it with an offset, a drift and jumps.
using sim_time = std::int64_t;
constexpr sim_time operator""_ms(unsigned long long v) {
  return static_cast<sim_time>(v) * 1000;
}
constexpr sim_time operator""_s(unsigned long long v) {
  return static_cast<sim_time>(v) * 1'000'000;
}

// Something an event is delivered to. `kind` and `arg` mean what the target says they mean;
// targets live as long as the run and use `arg` to tell a stale event (a generation) from a
// current one.
class event_target {
 public:
  virtual void fire(std::uint32_t kind, std::uint64_t arg) = 0;

 protected:
  ~event_target() = default;
};

class scheduler {
 public:
  sim_time now() const { return now_; }
  std::uint64_t events_run() const { return events_run_; }

  void at(sim_time when, event_target& target, std::uint32_t kind, std::uint64_t arg = 0) {
    heap_.push_back({std::max(when, now_), next_seq_++, &target, kind, arg});
    std::push_heap(heap_.begin(), heap_.end(), later{});
  }
  void after(sim_time delay, event_target& target, std::uint32_t kind, std::uint64_t arg = 0) {
    at(now_ + delay, target, kind, arg);
  }

  // Runs the next event if it is due by `until`; false when there is none (time then stands at
  // `until`).
  bool step(sim_time until) {
    if (heap_.empty() || heap_.front().at > until) {
      now_ = std::max(now_, until);
      return false;
    }
    std::pop_heap(heap_.begin(), heap_.end(), later{});
    const event e = heap_.back();
    heap_.pop_back();
    now_ = e.at;
    ++events_run_;
    e.target->fire(e.kind, e.arg);
    return true;
  }

 private:
  struct event {
    sim_time at;
    std::uint64_t seq;
    event_target* target;
    std::uint32_t kind;
    std::uint64_t arg;
  };
  struct later {
    bool operator()(const event& a, const event& b) const {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };

  std::vector<event> heap_;
  sim_time now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t events_run_ = 0;
};

} // namespace redlockd::sim
