// Masters that die, come back empty, or stop answering.
#include <catch2/catch.hpp>

#include <string>

#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

// A restarted master is quarantined for up to the longest TTL: keep that short here.
const nlohmann::json short_ttls = {{"max_ttl_ms", 2000}};

// True when every lock key is gone from the live masters (the fence key excepted).
bool no_lock_keys(const redis_fleet& fleet) {
  return lock_keys(fleet).empty();
}

// Asserts "NOQUORUM <granted> 3" with granted <= 2.
void check_noquorum(const std::string& reply) {
  CAPTURE(reply);
  REQUIRE(starts_with(reply, "NOQUORUM "));
  const auto words = split_words(reply);
  REQUIRE(words.size() == 3);
  const auto granted = parse_int(words[1]);
  REQUIRE(granted);
  CHECK(*granted <= 2);
  CHECK(words[2] == "3");
}

} // namespace

TEST_CASE("two masters down: LOCK still succeeds - three down: NOQUORUM, nothing left locked",
          "[integration]") {
  fleet_and_daemon env(short_ttls);
  auto c = env.client();

  env.fleet.kill(0);
  env.fleet.kill(1);
  const auto reply = c.request("LOCK res 1000");
  CAPTURE(reply);
  const auto grant = parse_lock_ok(reply);
  REQUIRE(grant);
  CHECK(nodes_holding(env.fleet, "res", grant->owner).size() == 3);
  CHECK(c.request("UNLOCK res " + grant->owner) == "OK");
  CHECK(no_lock_keys(env.fleet));

  // A lock taken now, then a third master dies: UNLOCK cannot reach a majority, EXTEND neither.
  const auto held = parse_lock_ok(c.request("LOCK held 1000"));
  REQUIRE(held);
  env.fleet.kill(2);
  CHECK(c.request("UNLOCK held " + held->owner) == "NOTHELD");
  check_noquorum(c.request("EXTEND held " + held->owner + " 1000"));

  check_noquorum(c.request("LOCK other 1000"));
  // Any late SET has landed, and the release after it, once a later command has.
  REQUIRE(daemon_links_flushed(env.daemon, env.fleet, {3, 4}));
  for (std::size_t i = 3; i < 5; ++i) {
    CAPTURE(i);
    CHECK_FALSE(env.fleet.get(i, "other"));
  }
  CHECK(env.daemon.info().at("counters").at("noquorum").get<int>() >= 1);

  // The daemon reports the dead masters as not ok.
  CHECK(eventually([&] {
    const auto info = env.daemon.info();
    return count_nodes_in_state(info, env.fleet.addresses(), "ok") == 2;
  }));
  const auto info = env.daemon.info();
  for (std::size_t i = 0; i < 3; ++i) {
    const auto state = node_state(info, env.fleet.address(i));
    CAPTURE(i, state);
    CHECK((state == "down" || state == "connecting"));
  }

  // The masters come back (empty): the daemon reconnects by itself and LOCK works again.
  const auto last_fence = held->fence;
  for (std::size_t i = 0; i < 3; ++i) {
    env.fleet.restart(i);
  }
  std::string last;
  CHECK(eventually(
      [&] {
        last = c.request("LOCK back 1000");
        return parse_lock_ok(last).has_value();
      },
      15s));
  CAPTURE(last);
  const auto back = parse_lock_ok(last);
  REQUIRE(back);
  CHECK(back->fence > last_fence); // restarted-empty masters must not make fences go back
  CHECK(eventually(
      [&] { return count_nodes_in_state(env.daemon.info(), env.fleet.addresses(), "ok") == 5; },
      15s));
}

TEST_CASE("three masters down at once: NOQUORUM and no key left on the live ones",
          "[integration]") {
  fleet_and_daemon env(short_ttls);
  auto c = env.client();
  env.fleet.kill(1);
  env.fleet.kill(2);
  env.fleet.kill(4);
  check_noquorum(c.request("LOCK res 1000"));
  check_noquorum(c.request("LOCK res 1000")); // again, with the daemon now knowing
  REQUIRE(daemon_links_flushed(env.daemon, env.fleet, {0, 3}));
  CHECK(no_lock_keys(env.fleet));
  CHECK(c.request("PING") == "PONG");
}

TEST_CASE("BUSY needs more than N - quorum refusals - failed attempts are released everywhere",
          "[integration]") {
  fleet_and_daemon env(short_ttls);
  auto c = env.client();

  SECTION("3 of 5 held by another owner: BUSY, nothing of ours on the other two") {
    for (std::size_t i = 0; i < 3; ++i) {
      REQUIRE(env.fleet.set_nx_px(i, "res", "another-owner", 10000));
    }
    const auto reply = c.request("LOCK res 1000");
    CAPTURE(reply);
    REQUIRE(starts_with(reply, "BUSY "));
    // BUSY came at the third refusal: the attempts on 3 and 4 may still be on their way.
    REQUIRE(daemon_links_flushed(env.daemon, env.fleet, {3, 4}));
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(env.fleet.get(i, "res") == "another-owner");
    }
    for (std::size_t i = 3; i < 5; ++i) {
      CAPTURE(i);
      CHECK_FALSE(env.fleet.get(i, "res"));
    }
  }
  SECTION("2 of 5 held by another owner: the other 3 are a quorum") {
    for (std::size_t i = 0; i < 2; ++i) {
      REQUIRE(env.fleet.set_nx_px(i, "res", "another-owner", 10000));
    }
    const auto grant = parse_lock_ok(c.request("LOCK res 1000"));
    REQUIRE(grant);
    CHECK(nodes_holding(env.fleet, "res", grant->owner) == std::vector<std::size_t>{2, 3, 4});
    CHECK(c.request("UNLOCK res " + grant->owner) == "OK");
    for (std::size_t i = 0; i < 2; ++i) {
      CHECK(env.fleet.get(i, "res") == "another-owner");
    }
  }
  SECTION("2 held by another owner and 1 down: NOQUORUM, not BUSY") {
    for (std::size_t i = 0; i < 2; ++i) {
      REQUIRE(env.fleet.set_nx_px(i, "res", "another-owner", 10000));
    }
    env.fleet.kill(4);
    const auto reply = c.request("LOCK res 1000");
    // The daemon answers as soon as a quorum is out of reach, so it may not have heard the
    // two grants yet: granted is at most 2.
    const auto words = split_words(reply);
    REQUIRE(words.size() == 3);
    CHECK(words[0] == "NOQUORUM");
    CHECK(parse_int(words[1]) <= 2);
    CHECK(words[2] == "3");
    REQUIRE(daemon_links_flushed(env.daemon, env.fleet, {2, 3}));
    for (std::size_t i = 2; i < 4; ++i) {
      CAPTURE(i);
      CHECK_FALSE(env.fleet.get(i, "res"));
    }
  }
}

TEST_CASE("stopped masters time out: two stopped still lock, three stopped is NOQUORUM",
          "[integration]") {
  fleet_and_daemon env(short_ttls);
  auto c = env.client();

  env.fleet.pause(0);
  env.fleet.pause(1);
  const auto grant = parse_lock_ok(c.request("LOCK res 1000"));
  REQUIRE(grant);
  env.fleet.pause(2);
  const auto reply = c.request("LOCK res2 1000");
  env.fleet.resume(0);
  env.fleet.resume(1);
  env.fleet.resume(2);
  check_noquorum(reply);

  // Everything expires or is released; afterwards locking works again on all five.
  CHECK(eventually([&] { return no_lock_keys(env.fleet); }, 10s));
  std::string last;
  CHECK(eventually(
      [&] {
        last = c.request("LOCK res3 1000");
        return parse_lock_ok(last).has_value();
      },
      10s));
  CAPTURE(last);
  REQUIRE(parse_lock_ok(last));
  CHECK(c.request("PING") == "PONG");
}
