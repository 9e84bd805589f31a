// WAIT, KEEP, LOST and lock-delay through the real daemon against real masters.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "checks.hpp"
#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

TEST_CASE("20 waiters on one resource are granted first come, first served",
          "[integration][wait]") {
  fleet_and_daemon env;
  line_client holder = env.client();
  lock_grant held = must_lock(holder, "LOCK fifo 30000");

  std::vector<line_client> waiters;
  for (int i = 0; i < 20; ++i) {
    waiters.push_back(env.client());
    waiters.back().send("LOCK fifo 30000 WAIT 20000\n");
    // Each waiter must be queued before the next one arrives.
    REQUIRE(eventually([&] { return env.daemon.info().at("waiters") == i + 1; }, 5s));
  }
  std::string owner = held.owner;
  line_client* current = &holder;
  std::uint64_t last_fence = held.fence;
  for (int i = 0; i < 20; ++i) {
    CHECK(current->request("UNLOCK fifo " + owner) == "OK");
    const std::string reply = waiters[i].read_line();
    INFO("waiter " << i << " got: " << reply);
    const auto grant = parse_lock_ok(reply);
    REQUIRE(grant);
    CHECK(grant->fence > last_fence);
    last_fence = grant->fence;
    // Nobody behind it has been answered: all of them are still queued.
    CHECK(env.daemon.info().at("waiters") == 20 - i - 1);
    for (int j = i + 1; j < 20; ++j)
      CHECK_FALSE(waiters[j].try_read_line(0ms));
    owner = grant->owner;
    current = &waiters[i];
  }
  CHECK(current->request("UNLOCK fifo " + owner) == "OK");
  CHECK(lock_keys(env.fleet).empty());
}

TEST_CASE("a waiter that disconnects is never granted", "[integration][wait]") {
  fleet_and_daemon env;
  line_client holder = env.client();
  const lock_grant held = must_lock(holder, "LOCK gone 30000");
  {
    line_client leaver = env.client();
    leaver.send("LOCK gone 30000 WAIT 20000\n");
    REQUIRE(eventually([&] { return env.daemon.info().at("waiters") == 1; }, 5s));
  } // closed
  REQUIRE(eventually([&] { return env.daemon.info().at("waiters") == 0; }, 5s));
  line_client stayer = env.client();
  stayer.send("LOCK gone 30000 WAIT 20000\n");
  REQUIRE(eventually([&] { return env.daemon.info().at("waiters") == 1; }, 5s));
  CHECK(holder.request("UNLOCK gone " + held.owner) == "OK");
  const auto grant = parse_lock_ok(stayer.read_line());
  REQUIRE(grant);
  // The key on the masters belongs to the waiter that stayed, not to the one that left.
  CHECK(nodes_holding(env.fleet, "gone", grant->owner).size() >= 3);
  CHECK(env.daemon.info().at("counters").at("acquired") == 2);
}

TEST_CASE("WAIT gives up with BUSY when the lock stays held", "[integration][wait]") {
  fleet_and_daemon env;
  line_client holder = env.client();
  must_lock(holder, "LOCK held 30000");
  line_client waiter = env.client();
  const auto start = std::chrono::steady_clock::now();
  const std::string reply = waiter.request("LOCK held 30000 WAIT 300");
  const auto waited = std::chrono::steady_clock::now() - start;
  INFO("reply: " << reply);
  CHECK(starts_with(reply, "BUSY "));
  CHECK(waited >= 300ms); // never answers before the deadline it was given
  CHECK(env.daemon.info().at("waiters") == 0);
}

TEST_CASE("a waiter gets a lock held elsewhere once its TTL runs out", "[integration][wait]") {
  fleet_and_daemon env;
  // A plain Redlock client (not this daemon) holds it on 3 masters for 400 ms.
  for (std::size_t i = 0; i < 3; ++i)
    REQUIRE(env.fleet.set_nx_px(i, "outside", "someone-else", 400));
  line_client waiter = env.client();
  waiter.set_timeout(10s);
  const auto grant = parse_lock_ok(waiter.request("LOCK outside 5000 WAIT 5000"));
  REQUIRE(grant);
  CHECK(nodes_holding(env.fleet, "outside", grant->owner).size() >= 3);
}

TEST_CASE("KEEP renews the lock across three TTLs and releases it when the connection closes",
          "[integration][keep]") {
  fleet_and_daemon env;
  long long expired_before = 0;
  {
    line_client keeper = env.client();
    const lock_grant grant = must_lock(keeper, "LOCK kept 600 KEEP");
    std::this_thread::sleep_for(1800ms); // three TTLs
    CHECK(nodes_holding(env.fleet, "kept", grant.owner).size() >= 3);
    for (std::size_t i = 0; i < 5; ++i) {
      const long long pttl = env.fleet.pttl(i, "kept");
      CHECK(pttl > 0);
      CHECK(pttl <= 600);
    }
    CHECK(env.daemon.info().at("counters").at("renewed") >= 3);
    line_client other = env.client();
    CHECK(starts_with(other.request("LOCK kept 600"), "BUSY"));
    expired_before = expired_keys(env.fleet);
  }
  // Closed: released on every master, by the daemon (the masters expired nothing).
  CHECK(eventually([&] { return lock_keys(env.fleet).empty(); }));
  CHECK(expired_keys(env.fleet) == expired_before);
  CHECK(env.daemon.info().at("keep_locks") == 0);
}

TEST_CASE("a plain lock outlives its connection", "[integration][keep]") {
  fleet_and_daemon env;
  std::string owner;
  {
    line_client client = env.client();
    owner = must_lock(client, "LOCK lease 30000").owner;
    // The reply came at quorum: let every master grant it before the connection goes.
    REQUIRE(eventually([&] { return nodes_holding(env.fleet, "lease", owner).size() == 5; }));
  }
  // The daemon has seen the close (only INFO's own connection is left), and whatever it sent
  // the masters because of it has run.
  REQUIRE(eventually([&] { return env.daemon.info().at("clients") == 1; }));
  REQUIRE(daemon_links_flushed(env.daemon, env.fleet, {0, 1, 2, 3, 4}));
  CHECK(nodes_holding(env.fleet, "lease", owner).size() == 5);
}

TEST_CASE("LOST is pushed when three masters die under a KEEP lock", "[integration][keep]") {
  fleet_and_daemon env;
  line_client keeper = env.client();
  const lock_grant grant = must_lock(keeper, "LOCK doomed 900 KEEP");
  env.fleet.kill(0);
  env.fleet.kill(1);
  env.fleet.kill(2);
  keeper.set_timeout(3s);
  const std::string push = keeper.read_line();
  CHECK(push == "LOST doomed " + grant.owner);
  CHECK(env.daemon.info().at("counters").at("lost") == 1);
  // The connection still works after the push.
  CHECK(keeper.request("PING") == "PONG");
}

TEST_CASE("lock-delay follows a dropped KEEP connection but not an UNLOCK",
          "[integration][delay]") {
  // A delay long enough for the refusal below to come inside it on any machine.
  fleet_and_daemon env(nlohmann::json{{"lock_delay_ms", 5000}});
  const long long expired_before = expired_keys(env.fleet);
  {
    line_client keeper = env.client();
    must_lock(keeper, "LOCK delayed 30000 KEEP");
  }
  // Released by the daemon, not expired: a 30 s TTL would not run out in this test.
  REQUIRE(eventually([&] { return lock_keys(env.fleet).empty(); }));
  CHECK(expired_keys(env.fleet) == expired_before);
  line_client other = env.client();
  const std::string refused = other.request("LOCK delayed 5000");
  INFO("reply: " << refused);
  CHECK(starts_with(refused, "BUSY "));
  CHECK(lock_keys(env.fleet).empty()); // refused without touching the masters
  // A waiter is granted once the delay is over.
  other.set_timeout(30s);
  const auto later = parse_lock_ok(other.request("LOCK delayed 5000 WAIT 20000"));
  REQUIRE(later);

  // A clean UNLOCK: the next LOCK is granted at once.
  CHECK(other.request("UNLOCK delayed " + later->owner) == "OK");
  CHECK(parse_lock_ok(other.request("LOCK delayed 5000")));
}

TEST_CASE("UNLOCK hands the lock to the waiter in one round: its owner and TTL on the masters, a "
          "larger fence",
          "[integration][wait][handover]") {
  fleet_and_daemon env;
  line_client holder = env.client();
  const lock_grant held = must_lock(holder, "LOCK handed 30000");
  line_client waiter = env.client();
  waiter.send("LOCK handed 7000 WAIT 20000\n");
  REQUIRE(eventually([&] { return env.daemon.info().at("waiters") == 1; }, 5s));
  // Its first attempt (refused: the holder's key is on every master) must be over: the head
  // of the queue is handed the lock only between attempts.
  std::this_thread::sleep_for(200ms);

  const auto start = std::chrono::steady_clock::now();
  holder.send("UNLOCK handed " + held.owner + "\n");
  const std::string reply = waiter.read_line();
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(holder.read_line() == "OK");
  INFO("waiter got: " << reply);
  const auto grant = parse_lock_ok(reply);
  REQUIRE(grant);
  CHECK(grant->owner != held.owner);
  CHECK(grant->fence > held.fence);
  CHECK(grant->validity_ms > 6800);
  // One round on loopback: far less than the 20 ms a waiter's retry takes.
  CHECK(waited < 20ms);
  const auto holding = nodes_holding(env.fleet, "handed", grant->owner);
  CHECK(holding.size() >= 3);
  for (const auto i : holding) {
    const long long pttl = env.fleet.pttl(i, "handed");
    CHECK(pttl > 0);
    CHECK(pttl <= 7000); // the waiter's TTL, not the holder's 30 s
  }
  CHECK(nodes_holding(env.fleet, "handed", held.owner).empty());
  const auto counters = env.daemon.info().at("counters");
  CHECK(counters.at("handovers") == 1);
  CHECK(counters.at("released") == 1);
  CHECK(counters.at("acquired") == 2);
  CHECK(waiter.request("UNLOCK handed " + grant->owner) == "OK");
  CHECK(lock_keys(env.fleet).empty());
}

TEST_CASE("a waiter whose attempt is in flight when a KEEP lock ends tries again at once",
          "[integration][wait][keep]") {
  // The daemon waits up to 2 s for a master's answer: an attempt stays in flight while masters
  // are paused.
  fleet_and_daemon env(nlohmann::json{{"node_timeout_ms", 2000}});
  line_client keeper = env.client();
  must_lock(keeper, "LOCK job 20000 KEEP");
  // The first waiter's attempt is refused everywhere: it sleeps the KEEP lock's TTL.
  const std::int64_t first_before = script_calls(env.fleet, 3);
  line_client first = env.client();
  first.send("LOCK job 30000 WAIT 20000\n");
  REQUIRE(eventually([&] { return script_calls(env.fleet, 3) >= first_before + 2; }));
  line_client second = env.client();
  second.send("LOCK job 30000 WAIT 5000\n");
  REQUIRE(eventually([&] { return env.daemon.info().at("waiters") == 2; }));
  // Masters 0-2 stop answering for a second; the first waiter leaves and the second tries now:
  // refused by 3 and 4, its requests to 0-2 waiting.
  for (std::size_t i = 0; i < 3; ++i)
    env.fleet.run(i, "CLIENT", "PAUSE", "1000", "ALL");
  const std::int64_t calls_before = script_calls(env.fleet, 3);
  first.reset();
  REQUIRE(eventually([&] { return script_calls(env.fleet, 3) > calls_before; }));
  // The KEEP connection closes while that attempt is out: its lock is released everywhere (on
  // 0-2 after the attempt, which they refuse).
  keeper.reset();
  REQUIRE(eventually([&] { return env.daemon.info().at("keep_locks") == 0; }));
  second.set_timeout(10s);
  const std::string reply = second.read_line();
  INFO("the head, WAIT 5000, behind a 20 s KEEP lock that ended during its attempt: " << reply);
  CHECK(parse_lock_ok(reply));
}
