// An UNLOCK that hands its lock to the head waiter in one round keeps every promise of a plain
// UNLOCK: the same answer, the same key-loss detection, nothing granted after a wait ran out.
#include <catch2/catch.hpp>

#include <csignal>
#include <string>
#include <thread>

#include "checks.hpp"
#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

TEST_CASE("a hand-over notices a master that lost the releaser's key, as a plain UNLOCK does, "
          "so there is no second holder",
          "[integration][handover][quarantine]") {
  fleet_and_daemon env;
  // r1 and r2 are held on masters 0, 1 and 2 only: someone else held them on 3 and 4 for a
  // moment when they were granted (a second: both LOCKs must fit in it on a loaded machine).
  for (const std::size_t i : {3u, 4u})
    for (const char* key : {"r1", "r2"})
      REQUIRE(env.fleet.set_nx_px(i, key, "someone-else", 1000));
  line_client holder = env.client();
  const lock_grant r1 = must_lock(holder, "LOCK r1 30000");
  const lock_grant r2 = must_lock(holder, "LOCK r2 30000");
  REQUIRE(nodes_holding(env.fleet, "r1", r1.owner) == std::vector<std::size_t>{0, 1, 2});
  REQUIRE(nodes_holding(env.fleet, "r2", r2.owner) == std::vector<std::size_t>{0, 1, 2});
  REQUIRE(eventually([&] {
    return lock_keys(env.fleet) == std::vector<std::string>{"node0:r1", "node0:r2", "node1:r1",
                                                            "node1:r2", "node2:r1", "node2:r2"};
  }));

  // A waiter queues on r1; its first attempt is refused by 0-2 (its grants on 3, 4 released).
  const std::int64_t calls_before = script_calls(env.fleet, 3);
  line_client waiter = env.client();
  waiter.send("LOCK r1 30000 WAIT 20000\n");
  REQUIRE(eventually([&] { return script_calls(env.fleet, 3) >= calls_before + 2; }));
  REQUIRE(eventually([&] { return !env.fleet.get(3, "r1") && !env.fleet.get(4, "r1"); }));

  // Master 2 loses its data; then the holder unlocks r1, which goes to the waiter.
  env.fleet.run(2, "FLUSHALL");
  // Found on 0 and 1 only, as without a waiter: not released by a majority.
  CHECK(holder.request("UNLOCK r1 " + r1.owner) == "NOTHELD");
  waiter.set_timeout(10s);
  INFO("the waiter: " << waiter.read_line());
  // Master 2 granted r1 and lost its key while it was valid: quarantined, exactly as a plain
  // UNLOCK would have it.
  CHECK(eventually(
      [&] { return node_state(env.daemon.info(), env.fleet.address(2)) == "quarantined:keyloss"; },
      3s));
  // r2 is still held on 0 and 1 for 29 s: nobody may get it.
  line_client intruder = env.client();
  const std::string reply = intruder.request("LOCK r2 30000");
  INFO("LOCK r2 while its holder holds it on 0 and 1: " << reply);
  CHECK_FALSE(parse_lock_ok(reply));
  CHECK(starts_with(reply, "NOQUORUM "));
  // Master 2 still shows that it lost its data: the hand-over did not create its fence key.
  CHECK_FALSE(env.fleet.get(2, default_fence_key));
}

TEST_CASE("an UNLOCK handing over to a waiter with a short TTL answers as without a waiter",
          "[integration][handover]") {
  // The waiter's rounds wait at most a tenth of its TTL (10 ms) for a master; the UNLOCK waits
  // node_timeout_ms (500 ms), with or without a waiter.
  fleet_and_daemon env(nlohmann::json{{"node_timeout_ms", 500}});
  line_client holder = env.client();
  const lock_grant held = must_lock(holder, "LOCK slow 30000");
  REQUIRE(eventually([&] { return nodes_holding(env.fleet, "slow", held.owner).size() == 5; }));
  line_client waiter = env.client();
  waiter.send("LOCK slow 100 WAIT 20000\n");
  REQUIRE(eventually([&] { return env.daemon.info().at("waiters") == 1; }));
  std::this_thread::sleep_for(100ms); // its first attempt is over: it is between attempts
  // Three masters answer 100 ms late.
  for (std::size_t i = 0; i < 3; ++i)
    env.fleet.run(i, "CLIENT", "PAUSE", "100", "ALL");
  CHECK(holder.request("UNLOCK slow " + held.owner) == "OK");
  CHECK(nodes_holding(env.fleet, "slow", held.owner).empty());
  waiter.set_timeout(10s);
  const std::string reply = waiter.read_line();
  INFO("the waiter: " << reply);
  CHECK(parse_lock_ok(reply));
}

TEST_CASE("an UNLOCK read in the loop turn where the waiter's WAIT ran out releases instead of "
          "handing over",
          "[integration][handover][wait]") {
  fleet_and_daemon env;
  line_client holder = env.client();
  const lock_grant held = must_lock(holder, "LOCK turn 30000");
  line_client waiter = env.client();
  waiter.send("LOCK turn 30000 WAIT 300\n");
  REQUIRE(eventually([&] { return env.daemon.info().at("waiters") == 1; }));
  std::this_thread::sleep_for(100ms); // its first attempt is over: it is between attempts
  // The daemon sleeps past the waiter's deadline; when it wakes, the UNLOCK is already there.
  REQUIRE(::kill(env.daemon.pid(), SIGSTOP) == 0);
  std::this_thread::sleep_for(500ms);
  holder.send("UNLOCK turn " + held.owner + "\n");
  std::this_thread::sleep_for(100ms);
  REQUIRE(::kill(env.daemon.pid(), SIGCONT) == 0);
  const std::string reply = waiter.read_line();
  INFO("the waiter, WAIT 300, woken after 600 ms: " << reply);
  CHECK(starts_with(reply, "BUSY "));
  CHECK(holder.read_line() == "OK");
  REQUIRE(daemon_links_flushed(env.daemon, env.fleet, {0, 1, 2, 3, 4}));
  CHECK(lock_keys(env.fleet).empty());
}

TEST_CASE("a release answered at quorum is sent again by source to a master that lost its "
          "scripts",
          "[integration][handover][noscript]") {
  const bool with_waiter = GENERATE(false, true);
  CAPTURE(with_waiter);
  fleet_and_daemon env(nlohmann::json{{"node_timeout_ms", 500}});
  line_client holder = env.client();
  const lock_grant held = must_lock(holder, "LOCK flushed 30000");
  REQUIRE(eventually([&] { return nodes_holding(env.fleet, "flushed", held.owner).size() == 5; }));
  line_client waiter = env.client();
  if (with_waiter) {
    waiter.send("LOCK flushed 30000 WAIT 20000\n");
    REQUIRE(eventually([&] { return env.daemon.info().at("waiters") == 1; }));
    std::this_thread::sleep_for(100ms); // between attempts: the UNLOCK hands over
  }
  // Master 4 forgets the scripts and answers after the others: after the UNLOCK's reply.
  env.fleet.run(4, "SCRIPT", "FLUSH");
  env.fleet.run(4, "CLIENT", "PAUSE", "100", "ALL");
  CHECK(holder.request("UNLOCK flushed " + held.owner) == "OK");
  // Its NOSCRIPT comes once the others answered; the release (or hand-over) goes again by source.
  CHECK(eventually(
      [&] { return !env.fleet.get(4, "flushed") || *env.fleet.get(4, "flushed") != held.owner; },
      3s));
  if (with_waiter) {
    const auto grant = parse_lock_ok(waiter.read_line());
    REQUIRE(grant);
    CHECK(waiter.request("UNLOCK flushed " + grant->owner) == "OK");
  }
}
