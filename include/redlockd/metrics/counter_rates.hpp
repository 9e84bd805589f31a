// Per-second rates of the daemon's counters for the status page, without a timer: each reading
// is compared with one kept from a few seconds before (at first, with zeros at the start), so any
// number of viewers refreshing at any pace sees rates over a window of at least `step`. No I/O.
#pragma once

#include "redlockd/lock/engine_io.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>

namespace redlockd {

class counter_rates {
 public:
  using counters = std::map<std::string, std::uint64_t, std::less<>>;
  struct rates {
    double window_s = 0;                 // the time between the two readings compared
    std::map<std::string, double> per_s; // every counter of the reading, per second
  };

  explicit counter_rates(clock_type::time_point started,
                         std::chrono::seconds step = std::chrono::seconds(5));

  // The rates from the kept reading to `current` (read at `now`); keeps `current` too when the
  // newest kept reading is at least `step` old. A counter the kept reading lacks counts from 0.
  rates observe(clock_type::time_point now, const counters& current);

 private:
  struct reading {
    clock_type::time_point at;
    counters values;
  };
  std::chrono::seconds step_;
  std::deque<reading> kept_; // one or two readings, oldest first
};

} // namespace redlockd
