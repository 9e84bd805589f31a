#include "redlockd/lock/redlock.hpp"

#include <catch2/catch.hpp>

using namespace redlockd;
using std::chrono::microseconds;

TEST_CASE("quorum is a strict majority", "[redlock]") {
  CHECK(quorum(1) == 1);
  CHECK(quorum(2) == 2);
  CHECK(quorum(3) == 2);
  CHECK(quorum(4) == 3);
  CHECK(quorum(5) == 3);
  CHECK(quorum(16) == 9);
}

TEST_CASE("drift is ttl times the factor plus 2 ms", "[redlock]") {
  CHECK(drift_us(10000, 0.01) == 102'000);
  CHECK(drift_us(10, 0.01) == 2'100);
  CHECK(drift_us(1000, 0.0) == 2'000);
  CHECK(drift_us(333, 0.01) == 5'330);
}

TEST_CASE("validity is ttl minus elapsed minus drift, rounded down", "[redlock]") {
  CHECK(validity_ms(10000, microseconds(0), 0.01) == 9898);
  CHECK(validity_ms(10000, microseconds(1'500), 0.01) == 9896); // 9896.5 -> 9896
  CHECK(validity_ms(30000, microseconds(2'000), 0.01) == 29696);
  CHECK(validity_ms(10, microseconds(7'900), 0.01) == 0); // 0 µs left
  CHECK(validity_ms(10, microseconds(7'000), 0.01) == 0); // 900 µs left: not a whole ms
  CHECK(validity_ms(10, microseconds(6'900), 0.01) == 1);
  CHECK(validity_ms(10, microseconds(8'000), 0.01) == -1); // overdrawn by 100 µs
  CHECK(validity_ms(10, microseconds(50'000), 0.01) == -43);
}

TEST_CASE("node timeout is capped at a tenth of the ttl", "[redlock]") {
  CHECK(node_timeout_for(30000, 50).count() == 50);
  CHECK(node_timeout_for(300, 50).count() == 30);
  CHECK(node_timeout_for(10, 50).count() == 1);
  CHECK(node_timeout_for(5, 50).count() == 1); // never zero
}

TEST_CASE("a tally reaches quorum as soon as a majority said yes", "[redlock]") {
  vote_tally tally(5);
  CHECK(tally.needed() == 3);
  CHECK(tally.record(0, vote::yes));
  CHECK(tally.record(1, vote::yes));
  CHECK(tally.state() == vote_tally::outcome::pending);
  CHECK(tally.record(4, vote::yes));
  CHECK(tally.state() == vote_tally::outcome::reached);
  CHECK(tally.pending() == 2);
}

TEST_CASE("a tally fails as soon as a majority is out of reach", "[redlock]") {
  vote_tally tally(5);
  tally.record(0, vote::no);
  tally.record(1, vote::failed);
  CHECK(tally.state() == vote_tally::outcome::pending);
  tally.record(2, vote::no);
  CHECK(tally.state() == vote_tally::outcome::impossible);
  CHECK(tally.pending() == 2);
  CHECK_FALSE(tally.refused_by_majority()); // two refusals of five: not enough to say "held"
}

TEST_CASE("refusals by more than n - quorum nodes mean the resource is held", "[redlock]") {
  vote_tally tally(5);
  tally.record(0, vote::no);
  tally.record(1, vote::no);
  tally.record(2, vote::no);
  CHECK(tally.state() == vote_tally::outcome::impossible);
  CHECK(tally.refused_by_majority());
}

TEST_CASE("a node votes once per round", "[redlock]") {
  vote_tally tally(3);
  CHECK(tally.record(1, vote::yes));
  CHECK_FALSE(tally.record(1, vote::no));
  CHECK_FALSE(tally.record(3, vote::yes)); // out of range
  CHECK_FALSE(tally.record(0, vote::pending));
  CHECK(tally.yes() == 1);
  CHECK(tally.no() == 0);
  tally.reset(3);
  CHECK(tally.pending() == 3);
  CHECK(tally.record(1, vote::no));
}
