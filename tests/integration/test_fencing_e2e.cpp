// Fencing tokens end to end: strictly increasing across locks, daemons, restarts.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

// LOCK then UNLOCK `resource`; returns the fence.
std::uint64_t lock_unlock(line_client& c, const std::string& resource,
                          std::uint64_t ttl_ms = 10000) {
  const auto reply = c.request("LOCK " + resource + " " + std::to_string(ttl_ms));
  CAPTURE(reply);
  const auto grant = parse_lock_ok(reply);
  REQUIRE(grant);
  REQUIRE(c.request("UNLOCK " + resource + " " + grant->owner) == "OK");
  return grant->fence;
}

// Polls LOCK until it succeeds (the fleet may still be recovering); returns the grant.
lock_grant lock_eventually(line_client& c, const std::string& resource, std::uint64_t ttl_ms) {
  std::string last;
  const bool ok = eventually(
      [&] {
        last = c.request("LOCK " + resource + " " + std::to_string(ttl_ms));
        return parse_lock_ok(last).has_value();
      },
      20s);
  CAPTURE(last);
  REQUIRE(ok);
  return *parse_lock_ok(last);
}

// How many masters hold a fence counter >= `fence`, asserting it never expires.
std::size_t nodes_with_fence_at_least(const redis_fleet& fleet, std::uint64_t fence) {
  std::size_t count = 0;
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    if (!fleet.alive(i)) {
      continue;
    }
    const auto value = fleet.get(i, default_fence_key);
    if (!value) {
      continue;
    }
    CAPTURE(i, *value);
    CHECK(fleet.pttl(i, default_fence_key) == -1);
    const auto parsed = parse_int(*value);
    REQUIRE(parsed);
    if (static_cast<std::uint64_t>(*parsed) >= fence) {
      ++count;
    }
  }
  return count;
}

} // namespace

TEST_CASE("fences strictly increase over 50 sequential LOCK/UNLOCK", "[integration]") {
  fleet_and_daemon env;
  auto c = env.client();
  std::uint64_t previous = 0;
  for (int i = 0; i < 50; ++i) {
    CAPTURE(i);
    // Same resource and different resources alike.
    const auto fence = lock_unlock(c, i % 2 == 0 ? "same" : "r" + std::to_string(i));
    CHECK(fence > previous);
    previous = fence;
  }
  CHECK(nodes_with_fence_at_least(env.fleet, previous) >= 3);
  CHECK(env.daemon.info().at("fence_high_water").get<std::uint64_t>() >= previous);
}

TEST_CASE("fences keep increasing across a kill -9 and restart of the daemon", "[integration]") {
  fleet_and_daemon env;
  std::uint64_t previous = 0;
  {
    auto c = env.client();
    for (int i = 0; i < 5; ++i) {
      const auto fence = lock_unlock(c, "res", 1000);
      CHECK(fence > previous);
      previous = fence;
    }
  }
  // A daemon that starts quarantines masters younger than the longest TTL granted (they may
  // have restarted empty while no daemon watched): let this young fleet pass 1000 ms of uptime.
  REQUIRE(eventually([&] {
    for (std::size_t i = 0; i < env.fleet.size(); ++i) {
      const std::string info = env.fleet.run(i, "INFO", "server").str;
      const auto at = info.find("uptime_in_seconds:");
      if (at == std::string::npos || std::stoll(info.substr(at + 18)) < 2)
        return false;
    }
    return true;
  }));
  env.daemon.restart(); // SIGKILL, same port, wait until all five nodes are ok
  auto c = env.client();
  for (int i = 0; i < 5; ++i) {
    CAPTURE(i);
    const auto fence = lock_unlock(c, "res", 1000);
    CHECK(fence > previous);
    previous = fence;
  }
  CHECK(nodes_with_fence_at_least(env.fleet, previous) >= 3);
}

TEST_CASE("two daemons on one fleet, used alternately, hand out increasing fences",
          "[integration]") {
  redis_fleet fleet;
  daemon_process first(fleet.addresses());
  daemon_process second(fleet.addresses());
  line_client c1(first.port());
  line_client c2(second.port());

  std::uint64_t previous = 0;
  for (int round = 0; round < 20; ++round) {
    CAPTURE(round);
    const auto f1 = lock_unlock(c1, "shared");
    CHECK(f1 > previous);
    const auto f2 = lock_unlock(c2, round % 2 == 0 ? "shared" : "elsewhere");
    CHECK(f2 > f1);
    previous = f2;
  }

  // And the two daemons exclude each other.
  const auto grant = parse_lock_ok(c1.request("LOCK shared 10000"));
  REQUIRE(grant);
  CHECK(starts_with(c2.request("LOCK shared 10000"), "BUSY "));
  CHECK(c2.request("UNLOCK shared " + grant->owner) == "OK"); // the owner is the capability
  CHECK(grant->fence > previous);
  CHECK(nodes_with_fence_at_least(fleet, grant->fence) >= 3);
}

TEST_CASE("masters restarted empty and a restarted daemon never make fences go back",
          "[integration]") {
  // Restarted masters are quarantined for up to the longest TTL: keep it short.
  const nlohmann::json extra = {{"max_ttl_ms", 2000}};
  redis_fleet fleet;
  daemon_options options;
  options.nodes = fleet.addresses();
  options.extra = extra;
  daemon_process daemon(options);
  auto c = std::make_unique<line_client>(daemon.port());

  std::uint64_t previous = 0;
  for (int i = 0; i < 10; ++i) {
    const auto fence = lock_unlock(*c, "res", 1000);
    CHECK(fence > previous);
    previous = fence;
  }

  // Nodes 0 and 1 lose their data; 2 and 3 stop answering (their data intact): every majority
  // now needs 0 or 1. Only one master that kept its data is reachable, so the fleet's largest
  // fence cannot be read from a majority: the restarted nodes are not re-seeded and nothing is
  // granted, however long the quarantine has been over (this daemon's own memory does not count:
  // another daemon could have handed out larger fences).
  fleet.restart(0);
  fleet.restart(1);
  fleet.pause(2);
  fleet.pause(3);
  const auto refused_until = std::chrono::steady_clock::now() + 3s; // the longest TTL is 1 s
  while (std::chrono::steady_clock::now() < refused_until) {
    const std::string reply = c->request("LOCK res 1000");
    CAPTURE(reply);
    REQUIRE(!parse_lock_ok(reply));
    std::this_thread::sleep_for(200ms);
  }
  fleet.resume(2);
  fleet.resume(3);
  auto grant = lock_eventually(*c, "res", 1000);
  CHECK(grant.fence > previous);
  previous = grant.fence;
  REQUIRE(c->request("UNLOCK res " + grant.owner) == "OK");
  // The restarted nodes were re-seeded before they voted.
  CHECK(nodes_with_fence_at_least(fleet, previous) >= 3);

  // Now 2 and 3 come back empty, 4 stops answering, and the daemon forgets everything (kill -9).
  // Only 0, 1 and the silent 4 remember the fences: nothing is granted until 4 answers again.
  fleet.restart(2);
  fleet.restart(3);
  fleet.pause(4);
  c.reset();
  daemon.kill();
  daemon.start(3); // 4 is silent: 4 of 5 connect, 2 of them intact
  c = std::make_unique<line_client>(daemon.port());
  const std::string before = c->request("LOCK res 1000");
  CAPTURE(before);
  CHECK(!parse_lock_ok(before));
  fleet.resume(4);
  grant = lock_eventually(*c, "res", 1000);
  CHECK(grant.fence > previous);
  CHECK(c->request("UNLOCK res " + grant.owner) == "OK");
}
