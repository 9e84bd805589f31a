#include "redlockd/ctl/duration.hpp"

#include <catch2/catch.hpp>

using redlockd::ctl::parse_duration;
using namespace std::chrono_literals;

TEST_CASE("durations take ms, s, m and h, or plain milliseconds", "[duration]") {
  CHECK(parse_duration("250ms") == 250ms);
  CHECK(parse_duration("30s") == 30s);
  CHECK(parse_duration("5m") == 5min);
  CHECK(parse_duration("2h") == 2h);
  CHECK(parse_duration("1500") == 1500ms);
  CHECK(parse_duration("0") == 0ms);
}

TEST_CASE("anything else is refused", "[duration]") {
  for (const char* bad : {"", "s", "-1s", "+1s", "1.5s", "10d", "10 s", "1e3", "ms5", "5S",
                          "99999999999999999999", "9223372036854775807s"})
    CHECK_FALSE(parse_duration(bad));
}
