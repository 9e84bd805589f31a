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

TEST_CASE("durations take fractions and several units, largest first", "[duration]") {
  CHECK(parse_duration("1.5s") == 1500ms);
  CHECK(parse_duration("0.25s") == 250ms);
  CHECK(parse_duration(".5s") == 500ms);
  CHECK(parse_duration("1.s") == 1s);
  CHECK(parse_duration("1.5m") == 90s);
  CHECK(parse_duration("0.5h") == 30min);
  CHECK(parse_duration("1m30s") == 90s);
  CHECK(parse_duration("1h30m") == 90min);
  CHECK(parse_duration("2s500ms") == 2500ms);
  CHECK(parse_duration("1h2m3s4ms") == 1h + 2min + 3s + 4ms);
  CHECK(parse_duration("1m30.5s") == 90500ms);
  CHECK(parse_duration("1.0000s") == 1s);
  CHECK(parse_duration("0.001s") == 1ms);
}

TEST_CASE("a bare number is refused: its unit is required", "[duration]") {
  using redlockd::ctl::lacks_unit;
  for (const char* bare : {"30", "0", "1500", "1.5", ".5"}) {
    CHECK_FALSE(parse_duration(bare));
    CHECK(lacks_unit(bare));
  }
  for (const char* other : {"", "30s", "s", "-1", ".", "1m30"})
    CHECK_FALSE(lacks_unit(other));
}

TEST_CASE("anything else is refused", "[duration]") {
  for (const char* bad : {"",
                          "s",
                          ".s",
                          "-1s",
                          "+1s",
                          "10d",
                          "10 s",
                          "1e3",
                          "ms5",
                          "5S",
                          "1.5.5s",
                          "1..5s",
                          "30s1m", // smallest unit first
                          "1s1s",
                          "1m1m",
                          "1ms1ms", // a unit twice
                          "1m30",   // a part without its unit
                          "1.0005s",
                          "0.5ms",         // finer than a millisecond
                          "1.0000000001h", // more fraction digits than any millisecond needs
                          "99999999999999999999",
                          "9223372036854775807s",
                          "9223372036854775807ms1ms",
                          "2562047788016h"}) {
    INFO(bad);
    CHECK_FALSE(parse_duration(bad));
  }
  CHECK(parse_duration("9223372036854775807ms") == std::chrono::milliseconds::max());
  CHECK(parse_duration("2562047788015h") == std::chrono::hours(2562047788015));
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
