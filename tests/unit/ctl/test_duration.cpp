#include "redlockd/ctl/duration.hpp"
#include "redlockd/ctl/run_command.hpp"

#include <catch2/catch.hpp>

using redlockd::ctl::parse_duration;
using namespace std::chrono_literals;

TEST_CASE("durations take ms, s, m and h", "[duration]") {
  CHECK(parse_duration("250ms") == 250ms);
  CHECK(parse_duration("30s") == 30s);
  CHECK(parse_duration("5m") == 5min);
  CHECK(parse_duration("2h") == 2h);
  CHECK(parse_duration("0ms") == 0ms);
  CHECK(parse_duration("007s") == 7s);
}

TEST_CASE("a bare number is refused: its unit is required", "[duration]") {
  using redlockd::ctl::lacks_unit;
  for (const char* bare : {"30", "0", "1500"}) {
    CHECK_FALSE(parse_duration(bare));
    CHECK(lacks_unit(bare));
  }
  for (const char* other : {"", "30s", "s", "-1", "1.5"})
    CHECK_FALSE(lacks_unit(other));
}

TEST_CASE("anything else is refused", "[duration]") {
  for (const char* bad : {"", "s", "-1s", "+1s", "1.5s", "10d", "10 s", "1e3", "ms5", "5S",
                          "99999999999999999999", "9223372036854775807s"})
    CHECK_FALSE(parse_duration(bad));
}

TEST_CASE("run's timing stays inside what is left of a KEEP lock", "[duration][run]") {
  using redlockd::ctl::default_kill_after;
  using redlockd::ctl::run_options;
  using redlockd::ctl::timing_for;
  CHECK(default_kill_after(10s) == 2500ms - 102ms);
  CHECK(default_kill_after(600ms) == 150ms - 8ms);
  CHECK(default_kill_after(10ms) == 1ms); // never 0 or negative
  for (auto ttl : {10ms, 100ms, 600ms, 900ms, 10'000ms, 3'600'000ms}) {
    run_options options;
    options.ttl = ttl;
    const auto t = timing_for(options);
    INFO("ttl " << ttl.count());
    CHECK(t.kill_after == default_kill_after(ttl));
    if (ttl >= 100ms) {
      // LOST comes while more than ttl/3 is valid: SIGKILL before it runs out, drift included.
      CHECK(t.kill_after + ttl / 100 + 2ms <= ttl / 3);
      // A silent daemon: noticed and killed within 5/8 of the TTL of its last answer, less than
      // the 2/3 a renewed KEEP lock has left.
      CHECK(t.ping_every + t.silence_limit + t.kill_after < ttl * 2 / 3);
    }
  }
  run_options explicit_kill;
  explicit_kill.kill_after = 5s;
  CHECK(timing_for(explicit_kill).kill_after == 5s);
}
