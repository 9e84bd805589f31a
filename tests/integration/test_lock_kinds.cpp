// The lock family (protocol v1.1, issue 23) from outside: the real daemon over TCP against real
// redis-server masters. Each of the research note's counter-examples is staged here with the
// key layout forcing which masters grant (another owner's keys on some masters, as a plain
// Redlock client or a stale hold leaves them), and where a weakened daemon exists its control
// shows the violation the rule prevents.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checks.hpp"
#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

using clock_type = std::chrono::steady_clock;

// Another owner's key (a plain Redlock client, or a stale hold) on some masters.
void occupy(const redis_fleet& fleet, const std::vector<std::size_t>& nodes, const std::string& key,
            long long ttl_ms = 60000) {
  for (const auto i : nodes)
    REQUIRE(fleet.run(i, "SET", key, "someone-else", "PX", std::to_string(ttl_ms)).str == "OK");
}

void vacate(const redis_fleet& fleet, const std::vector<std::size_t>& nodes,
            const std::string& key) {
  for (const auto i : nodes)
    fleet.run(i, "DEL", key);
}

std::vector<std::size_t> masters_with_reader(const redis_fleet& fleet, const std::string& key,
                                             const std::string& owner) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < fleet.size(); ++i)
    if (fleet.run(i, "ZSCORE", key + " readers", owner).type == redis_reply::kind::string)
      out.push_back(i);
  return out;
}

std::string owner_slot(const std::string& owner) {
  return owner.substr(5, 3);
}

} // namespace

TEST_CASE("shared holders share, and an exclusive lock, redlockd's or a standard Redlock "
          "client's, excludes them and is excluded by them",
          "[integration][kinds]") {
  fleet_and_daemon env;
  line_client a = env.client();
  line_client b = env.client();
  const lock_grant r1 = must_lock(a, "LOCK doc 30000 SHARED");
  const lock_grant r2 = must_lock(b, "LOCK doc 30000 SHARED LABEL reader-b");
  CHECK(r1.owner.substr(0, 5) == "00001"); // a shared owner says so
  CHECK(r2.fence > r1.fence);
  CHECK(masters_with_reader(env.fleet, "doc", r1.owner).size() == 5);
  // A writer is refused while readers live, told how long they keep it.
  const std::string busy = a.request("LOCK doc 1000");
  REQUIRE(starts_with(busy, "BUSY "));
  CHECK(std::stoll(busy.substr(5)) > 25000);
  // So is a standard Redlock client: the readers' guard holds the key on every master.
  for (std::size_t i = 0; i < env.fleet.size(); ++i)
    CHECK_FALSE(env.fleet.set_nx_px(i, "doc", "standard-client", 5000));
  CHECK(starts_with(a.request("STATUS doc"), "OK HELD "));
  CHECK(a.request("STATUS doc").find(" readers=2") != std::string::npos);
  CHECK(starts_with(a.request("EXTEND doc " + r1.owner + " 40000"), "OK "));
  CHECK(a.request("UNLOCK doc " + r1.owner) == "OK");
  CHECK(a.request("UNLOCK doc " + r1.owner) == "NOTHELD");
  CHECK(b.request("UNLOCK doc " + r2.owner) == "OK");
  // Free: the writer gets in, and now readers are refused.
  const lock_grant w = must_lock(a, "LOCK doc 30000");
  CHECK(w.fence > r2.fence);
  CHECK(starts_with(b.request("LOCK doc 1000 SHARED"), "BUSY "));
  // An owner of another kind than the hold is a wrong owner.
  CHECK(b.request("UNLOCK doc " + r2.owner) == "NOTHELD");
  CHECK(a.request("UNLOCK doc " + w.owner) == "OK");
  // A standard Redlock client's SET NX excludes readers too (it is an exclusive hold).
  occupy(env.fleet, {0, 1, 2, 3, 4}, "doc", 5000);
  CHECK(starts_with(b.request("LOCK doc 1000 SHARED"), "BUSY "));
}

namespace {

// T-b1's staging: reader X through daemon 0 lands on masters 0, 1, 2 only and reader Y through
// daemon 1 on 2, 3, 4 only (an exclusive key of another owner where each is not). Every
// majority of masters then has a live reader. `then` runs while both hold.
// `guards_lost`: `then` takes the guard out on every master, so X's hold is gone on all of its
// masters and its UNLOCK answers NOTHELD; that step guards the readers left (Y) again, on every
// master it reaches, and Y's UNLOCK is answered as usual.
template <typename Then>
void with_readers_on_two_majorities(Then then, bool guards_lost = false) {
  redis_fleet fleet;
  daemon_process d0(fleet.addresses());
  daemon_process d1(fleet.addresses());
  line_client x_client(d0.port());
  line_client y_client(d1.port());
  occupy(fleet, {3, 4}, "report");
  const lock_grant x = must_lock(x_client, "LOCK report 30000 SHARED");
  // (Answered at quorum: the refusals of 3 and 4 come before their keys go, or X is granted there.)
  REQUIRE(daemon_links_flushed(d0, fleet, {3, 4}));
  vacate(fleet, {3, 4}, "report");
  REQUIRE(masters_with_reader(fleet, "report", x.owner) == std::vector<std::size_t>{0, 1, 2});
  occupy(fleet, {0, 1}, "report");
  const lock_grant y = must_lock(y_client, "LOCK report 30000 SHARED");
  REQUIRE(daemon_links_flushed(d1, fleet, {0, 1}));
  vacate(fleet, {0, 1}, "report");
  REQUIRE(masters_with_reader(fleet, "report", y.owner) == std::vector<std::size_t>{2, 3, 4});
  // The other owner's key on 0 and 1 replaced X's guard there (a review), and taking it out left
  // X unguarded: put back as it was (X's EXTEND would now hear -1 there, a guard lost), so that
  // every master's lock key is the readers' guard.
  for (const std::size_t i : {0, 1}) {
    const std::string until = fleet.run(i, "ZSCORE", "report readers", x.owner).str;
    REQUIRE(fleet.run(i, "SET", "report", "redlockd:readers", "PXAT", until).str == "OK");
  }
  REQUIRE(starts_with(x_client.request("EXTEND report " + x.owner + " 30000"), "OK "));
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    INFO("master " << i);
    REQUIRE(fleet.run(i, "GET", "report").str == "redlockd:readers");
  }
  then(fleet, d0, d1);
  // Once both readers leave, a writer is granted.
  CHECK(x_client.request("UNLOCK report " + x.owner) == (guards_lost ? "NOTHELD" : "OK"));
  CHECK(y_client.request("UNLOCK report " + y.owner) == "OK");
  line_client writer(d0.port());
  must_lock(writer, "LOCK report 5000");
}

} // namespace

TEST_CASE("a reader and a writer on different majorities: the writer is refused (T-b1)",
          "[integration][kinds]") {
  with_readers_on_two_majorities([](redis_fleet&, daemon_process& d0, daemon_process& d1) {
    for (daemon_process* d : {&d0, &d1}) {
      line_client writer(d->port());
      const std::string reply = writer.request("LOCK report 5000");
      INFO("a writer while readers hold masters {0,1,2} and {2,3,4}: " << reply);
      CHECK(starts_with(reply, "BUSY "));
    }
  });
}

TEST_CASE("the same split with the readers' guard gone admits the writer beside both readers",
          "[integration][kinds]") {
  // The control of T-b1 (the research note names no weakened daemon for it): what refuses the
  // writer is the readers' guard, the lock key every shared hold keeps on its masters
  // (lib/shared.lua). Readers that left the lock key free, as the simulator's
  // readers-without-guard does, would let an exclusive acquire in beside them.
  with_readers_on_two_majorities(
      [](redis_fleet& fleet, daemon_process& d0, daemon_process&) {
        for (std::size_t i = 0; i < fleet.size(); ++i)
          fleet.run(i, "DEL", "report");
        line_client writer(d0.port());
        const std::string reply = writer.request("LOCK report 5000");
        INFO("a writer while readers hold masters {0,1,2} and {2,3,4}, without their guard: "
             << reply);
        const auto granted = parse_lock_ok(reply);
        REQUIRE(granted);
        CHECK(writer.request("UNLOCK report " + granted->owner) == "OK");
      },
      true);
}

namespace {

// T-c1: semaphore s with 2 permits. X through daemon 0 on masters {0,1,2} (slot 0), Y through
// daemon 1 on {2,3,4} (slot 1), then Z on all five. Every master but 2 has one free slot, so
// "a majority of masters each admits at most 2" admits Z: three holders of two permits.
// Returns Z's reply.
std::string third_permit_after_split(nlohmann::json extra) {
  redis_fleet fleet;
  daemon_process d0(fleet.addresses(), extra);
  daemon_process d1(fleet.addresses(), extra);
  line_client x_client(d0.port());
  line_client y_client(d1.port());
  // X: refused by 3 and 4 (both slots held by another owner), slot 1 taken on 0, 1, 2.
  occupy(fleet, {3, 4}, "s permit:0");
  occupy(fleet, {3, 4}, "s permit:1");
  occupy(fleet, {0, 1, 2}, "s permit:1");
  const lock_grant x = must_lock(x_client, "LOCK s 30000 PERMITS 2");
  REQUIRE(daemon_links_flushed(d0, fleet, {0, 1, 2, 3, 4})); // every attempt answered first
  vacate(fleet, {0, 1, 2, 3, 4}, "s permit:1");
  vacate(fleet, {3, 4}, "s permit:0");
  CHECK(owner_slot(x.owner) == "000");
  // Y: refused by 0 and 1 (both slots held), slot 0 taken on 3 and 4 (and by X on 2).
  occupy(fleet, {0, 1}, "s permit:1");
  occupy(fleet, {3, 4}, "s permit:0");
  const std::string y_reply = y_client.request("LOCK s 30000 PERMITS 2");
  REQUIRE(daemon_links_flushed(d1, fleet, {0, 1, 3, 4}));
  vacate(fleet, {0, 1}, "s permit:1");
  vacate(fleet, {3, 4}, "s permit:0");
  INFO("Y: " << y_reply);
  REQUIRE(parse_lock_ok(y_reply));
  CHECK(owner_slot(parse_lock_ok(y_reply)->owner) == "001");
  // Z through either daemon, all masters reachable.
  line_client z_client(d0.port());
  const std::string z_reply = z_client.request("LOCK s 30000 PERMITS 2");
  const std::string status = z_client.request("STATUS s");
  INFO("Z: " << z_reply << "  STATUS: " << status);
  return z_reply;
}

} // namespace

TEST_CASE("a semaphore split across two daemons never admits a third holder of two permits "
          "(T-c1)",
          "[integration][kinds]") {
  const std::string z = third_permit_after_split(nlohmann::json::object());
  INFO("Z, the third request for 2 permits while X and Y hold: " << z);
  CHECK(starts_with(z, "BUSY "));
}

TEST_CASE("the same split against a daemon counting permits per master admits three holders",
          "[integration][kinds]") {
  // The weakened control: each master admits at most 2, a majority of masters admitted Z.
  const std::string z =
      third_permit_after_split(nlohmann::json{{"unsafe_count_permits_per_master", true}});
  INFO("Z on the weakened daemon: " << z);
  CHECK(parse_lock_ok(z));
}

TEST_CASE("permits: at most n, another n is refused, a killed holder's permit comes back",
          "[integration][kinds]") {
  fleet_and_daemon env;
  line_client a = env.client();
  auto killed = std::make_unique<line_client>(env.daemon.port());
  const lock_grant p1 = must_lock(*killed, "LOCK pool 3000 PERMITS 2");
  const lock_grant p2 = must_lock(a, "LOCK pool 30000 PERMITS 2 LABEL worker-2");
  CHECK(owner_slot(p1.owner) != owner_slot(p2.owner));
  CHECK(starts_with(a.request("LOCK pool 1000 PERMITS 2"), "BUSY "));
  CHECK(starts_with(a.request("LOCK pool 1000 PERMITS 3"), "ERR PERMITS_MISMATCH "));
  CHECK(starts_with(a.request("LOCK pool 1000 PERMITS 3 WAIT 500"), "ERR PERMITS_MISMATCH "));
  // The semaphore pool and the lock pool are different things.
  must_lock(a, "LOCK pool 1000");
  CHECK(a.request("STATUS pool").find(" permits=2/2") != std::string::npos);
  // p1's client is killed (its connection closes, unreleased): a lease outlives its
  // connection, so the permit is still taken, and it comes back after its TTL, to a waiter.
  const auto clients = env.daemon.info().at("clients").get<int>();
  killed.reset();
  REQUIRE(eventually([&] { return env.daemon.info().at("clients").get<int>() < clients; }));
  CHECK(starts_with(a.request("LOCK pool 1000 PERMITS 2"), "BUSY "));
  {
    line_client waiter = env.client();
    const auto start = clock_type::now();
    const lock_grant p3 = must_lock(waiter, "LOCK pool 5000 PERMITS 2 WAIT 6000");
    CHECK(clock_type::now() - start < 4s); // p1's 3 s TTL, not the waiter's whole wait
    CHECK(owner_slot(p3.owner) == owner_slot(p1.owner));
    CHECK(waiter.request("UNLOCK pool " + p3.owner) == "OK");
  }
  // A KEEP permit comes back at once when its connection closes.
  auto keeper = std::make_unique<line_client>(env.daemon.port());
  const lock_grant kept = must_lock(*keeper, "LOCK pool 30000 PERMITS 2 KEEP");
  line_client waiter = env.client();
  waiter.send("LOCK pool 30000 PERMITS 2 WAIT 10000\n");
  REQUIRE(eventually([&] { return env.daemon.info().at("waiters") == 1; }, 5s));
  const auto closed = clock_type::now();
  keeper.reset();
  waiter.set_timeout(10s);
  const auto grant = parse_lock_ok(waiter.read_line());
  REQUIRE(grant);
  CHECK(clock_type::now() - closed < 2s);
  CHECK(owner_slot(grant->owner) == owner_slot(kept.owner));
  CHECK(a.request("UNLOCK pool " + p2.owner) == "OK");
}

TEST_CASE("the same kill with the permit's key made to last never gives the permit back",
          "[integration][kinds]") {
  // The control of the killed holder's permit (the research note's T-c3 names none): what
  // brings it back is its key's TTL on the masters. A semaphore that counts without expiry
  // (Redisson's RSemaphore, issue 23) keeps a crashed holder's permit for good; here the slot's
  // key loses its TTL on the masters that hold it, and a waiter never gets the permit.
  fleet_and_daemon env;
  auto killed = std::make_unique<line_client>(env.daemon.port());
  const lock_grant p = must_lock(*killed, "LOCK slots 3000 PERMITS 1");
  const std::string slot_key = "slots permit:" + std::to_string(std::stoi(owner_slot(p.owner)));
  long long persisted = 0;
  for (std::size_t i = 0; i < env.fleet.size(); ++i)
    persisted += env.fleet.run(i, "PERSIST", slot_key).integer;
  REQUIRE(persisted >= 3); // a majority holds it without expiry
  killed.reset();
  line_client waiter = env.client();
  waiter.set_timeout(10s);
  const std::string reply = waiter.request("LOCK slots 1000 PERMITS 1 WAIT 4500");
  INFO("a waiter for a killed holder's permit whose key never expires: " << reply);
  CHECK(starts_with(reply, "BUSY "));
}

TEST_CASE("a try-lock that names another n than a semaphore's waiters is refused PERMITS_MISMATCH",
          "[integration][kinds]") {
  // A try-lock behind waiters does not jump their queue; one that names another n than theirs
  // is still told that another n is in force (it was answered BUSY 0 from the queue), and its
  // round takes nothing.
  fleet_and_daemon env;
  line_client a = env.client();
  const lock_grant held = must_lock(a, "LOCK pool 30000 PERMITS 1");
  line_client waiter = env.client();
  waiter.send("LOCK pool 30000 PERMITS 1 WAIT 10000\n");
  REQUIRE(eventually([&] { return env.daemon.info().at("waiters") == 1; }, 5s));
  line_client c = env.client();
  CHECK(starts_with(c.request("LOCK pool 1000 PERMITS 3"), "ERR PERMITS_MISMATCH 1 "));
  CHECK(starts_with(c.request("LOCK pool 1000 PERMITS 1"), "BUSY "));
  CHECK(a.request("UNLOCK pool " + held.owner) == "OK");
  waiter.set_timeout(5s);
  const auto next = parse_lock_ok(waiter.read_line());
  REQUIRE(next);
  CHECK(c.request("STATUS pool").find(" permits=1/1") != std::string::npos);
  for (std::size_t i = 0; i < env.fleet.size(); ++i) {
    INFO("master " << i);
    CHECK(env.fleet.run(i, "GET", "pool permits").str == "1"); // the check wrote no n
  }
}

namespace {

// Readers overlap without end (each holds 400 ms, a new one every 100 ms, through another
// daemon: the writer's own daemon would make them queue behind it) while a writer waits up to
// 3 s through a daemon configured with `extra`. Returns the writer's reply.
std::string writer_behind_readers(nlohmann::json extra) {
  redis_fleet fleet;
  daemon_process readers_daemon(fleet.addresses());
  daemon_process writers_daemon(fleet.addresses(), std::move(extra));
  std::atomic<bool> stop{false};
  std::atomic<int> readers{0};
  std::thread stream([&] {
    line_client reader(readers_daemon.port());
    while (!stop) {
      const auto grant = parse_lock_ok(reader.request("LOCK feed 400 SHARED"));
      if (grant)
        ++readers;
      std::this_thread::sleep_for(100ms);
    }
  });
  std::this_thread::sleep_for(300ms);
  line_client writer(writers_daemon.port());
  writer.set_timeout(10s);
  const std::string reply = writer.request("LOCK feed 5000 WAIT 3000");
  stop = true;
  stream.join();
  INFO("readers granted meanwhile: " << readers.load());
  CHECK(readers > 2);
  return reply;
}

} // namespace

TEST_CASE("another n left on a minority of the masters refuses no request of the semaphore's own "
          "n, and a majority's n still refuses another",
          "[integration][kinds]") {
  // A request of another n whose attempt reached a master late (held in a partition after the
  // daemon had answered it) leaves that n there for its TTL (simulator seed 101914). Two of five
  // masters say 3 while the semaphore's n is 2 on the other three.
  fleet_and_daemon env;
  line_client a = env.client();
  const lock_grant p1 = must_lock(a, "LOCK pool 30000 PERMITS 2");
  const lock_grant p2 = must_lock(a, "LOCK pool 30000 PERMITS 2");
  for (const std::size_t i : {0, 1})
    REQUIRE(env.fleet.run(i, "SET", "pool permits", "3", "PX", "30000").str == "OK");
  // All n held: busy, as without the stale n; another n: refused, a majority holds n = 2.
  const std::string held = a.request("LOCK pool 1000 PERMITS 2");
  INFO("all n held, two masters saying 3: " << held);
  CHECK(starts_with(held, "BUSY "));
  CHECK(starts_with(a.request("LOCK pool 1000 PERMITS 3"), "ERR PERMITS_MISMATCH 2 "));
  // A waiter gets the permit its holder gives back.
  line_client waiter = env.client();
  waiter.send("LOCK pool 5000 PERMITS 2 WAIT 5000\n");
  std::this_thread::sleep_for(300ms);
  CHECK(a.request("UNLOCK pool " + p2.owner) == "OK");
  const auto granted = parse_lock_ok(waiter.read_line());
  REQUIRE(granted);
  CHECK(owner_slot(granted->owner) == owner_slot(p2.owner));
  CHECK(a.request("UNLOCK pool " + p1.owner) == "OK");
}

TEST_CASE("a writer behind a stream of readers gets in: its intent stops new readers (T-b4)",
          "[integration][kinds]") {
  const std::string reply = writer_behind_readers(nlohmann::json::object());
  INFO("the writer: " << reply);
  CHECK(parse_lock_ok(reply));
}

TEST_CASE("the same stream against a daemon whose writers leave no intent starves the writer",
          "[integration][kinds]") {
  const std::string reply = writer_behind_readers(nlohmann::json{{"unsafe_no_write_intent", true}});
  INFO("the writer on the weakened daemon: " << reply);
  CHECK(starts_with(reply, "BUSY "));
}

TEST_CASE("MLOCK: all or nothing, one token, released and extended by the set in any order",
          "[integration][kinds]") {
  fleet_and_daemon env;
  line_client a = env.client();
  line_client b = env.client();
  const lock_grant set = must_lock(a, "MLOCK 3 acct:1 acct:2 acct:3 5000 LABEL transfer");
  CHECK(set.owner.substr(0, 5) == "00003");
  for (const char* key : {"acct:1", "acct:2", "acct:3"})
    CHECK(nodes_holding(env.fleet, key, set.owner + " transfer").size() == 5);
  // Any member is held exclusively; an overlapping set is refused and leaves nothing.
  CHECK(starts_with(b.request("LOCK acct:2 1000"), "BUSY "));
  CHECK(starts_with(b.request("LOCK acct:2 1000 SHARED"), "BUSY "));
  CHECK(starts_with(b.request("MLOCK 2 acct:9 acct:3 1000"), "BUSY "));
  const std::vector<std::string> keys = env.fleet.keys(0);
  CHECK(std::find(keys.begin(), keys.end(), "acct:9") == keys.end());
  CHECK(starts_with(a.request("MEXTEND 3 acct:3 acct:1 acct:2 " + set.owner + " 20000"), "OK "));
  CHECK(env.fleet.pttl(0, "acct:2") > 15000);
  // Another owner, or a wrong set, is not the holder.
  CHECK(b.request("MUNLOCK 2 acct:1 acct:2 " + std::string(40, 'a')) == "NOTHELD");
  CHECK(a.request("MUNLOCK 3 acct:2 acct:3 acct:1 " + set.owner) == "OK");
  const lock_grant after = must_lock(b, "MLOCK 2 acct:2 acct:9 1000");
  CHECK(after.fence > set.fence);
  // Errors change nothing.
  CHECK(starts_with(b.request("MLOCK 2 x x 1000"), "ERR BAD_RESOURCE "));
  CHECK(starts_with(b.request("MLOCK 0 a 1000"), "ERR BAD_COUNT "));
  CHECK(starts_with(b.request("MLOCK 2 x 1000"), "ERR "));
}

TEST_CASE("two MLOCKs naming the same resources in opposite orders from two daemons under WAIT "
          "both keep going, never together (T-d1)",
          "[integration][kinds]") {
  redis_fleet fleet;
  daemon_process d0(fleet.addresses());
  daemon_process d1(fleet.addresses());
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  const auto loop = [&](std::uint16_t port, std::string line, const std::string& names,
                        int& grants) {
    line_client c(port);
    c.set_timeout(10s);
    const auto until = clock_type::now() + 3s;
    while (clock_type::now() < until) {
      const auto grant = parse_lock_ok(c.request(line));
      if (!grant)
        continue;
      ++grants;
      if (++inside > 1)
        overlap = true;
      std::this_thread::sleep_for(5ms);
      --inside;
      REQUIRE(c.request("MUNLOCK 2 " + names + " " + grant->owner) == "OK");
    }
  };
  int forward = 0;
  int backward = 0;
  std::thread a(
      [&] { loop(d0.port(), "MLOCK 2 left right 2000 WAIT 2000", "left right", forward); });
  std::thread b(
      [&] { loop(d1.port(), "MLOCK 2 right left 2000 WAIT 2000", "right left", backward); });
  a.join();
  b.join();
  INFO("grants: " << forward << " in one order, " << backward << " in the other");
  CHECK_FALSE(overlap);
  CHECK(forward >= 10);
  CHECK(backward >= 10);
}

TEST_CASE("the control: two clients taking the same two locks one by one in opposite orders "
          "under WAIT deadlock until their waits run out",
          "[integration][kinds]") {
  fleet_and_daemon env;
  line_client a = env.client();
  line_client b = env.client();
  const lock_grant a_left = must_lock(a, "LOCK left 10000");
  const lock_grant b_right = must_lock(b, "LOCK right 10000");
  a.send("LOCK right 10000 WAIT 1500\n");
  b.send("LOCK left 10000 WAIT 1500\n");
  a.set_timeout(5s);
  b.set_timeout(5s);
  CHECK(starts_with(a.read_line(), "BUSY "));
  CHECK(starts_with(b.read_line(), "BUSY "));
  CHECK(a.request("UNLOCK left " + a_left.owner) == "OK");
  CHECK(b.request("UNLOCK right " + b_right.owner) == "OK");
}

TEST_CASE("KEEP and LOST for every kind: a set's LOST names its first resource",
          "[integration][kinds]") {
  fleet_and_daemon env;
  auto connection = std::make_unique<line_client>(env.daemon.port());
  line_client& keeper = *connection;
  const lock_grant shared = must_lock(keeper, "LOCK k:r 300 SHARED KEEP");
  const lock_grant permit = must_lock(keeper, "LOCK k:p 300 PERMITS 1 KEEP");
  const lock_grant set = must_lock(keeper, "MLOCK 2 k:b k:a 300 KEEP");
  // Renewed well past their TTL.
  std::this_thread::sleep_for(1s);
  CHECK(masters_with_reader(env.fleet, "k:r", shared.owner).size() == 5);
  CHECK(nodes_holding(env.fleet, "k:p permit:0", permit.owner).size() == 5);
  CHECK(nodes_holding(env.fleet, "k:a", set.owner).size() == 5);
  CHECK(env.daemon.info().at("keep_locks") == 3);
  // Another owner takes the set's keys away on every master: the next renewal finds it gone.
  occupy(env.fleet, {0, 1, 2, 3, 4}, "k:a");
  keeper.set_timeout(3s);
  CHECK(keeper.read_line() == "LOST k:b " + set.owner);
  CHECK(env.daemon.info().at("keep_locks") == 2);
  // Closing the connection releases the others on every master.
  connection.reset();
  CHECK(eventually([&] {
    return masters_with_reader(env.fleet, "k:r", shared.owner).empty() &&
           nodes_holding(env.fleet, "k:p permit:0", permit.owner).empty();
  }));
}

TEST_CASE("a KEEP set whose client releases one member keeps the rest, and says no LOST",
          "[integration][kinds]") {
  fleet_and_daemon env;
  line_client keeper = env.client();
  const lock_grant set = must_lock(keeper, "MLOCK 3 s:a s:b s:c 300 KEEP");
  CHECK(keeper.request("UNLOCK s:a " + set.owner) == "OK");
  // Renewed well past its TTL without s:a (before the fix: the first renewal found s:a gone,
  // LOST came, and the rest expired).
  std::this_thread::sleep_for(1s);
  CHECK(nodes_holding(env.fleet, "s:b", set.owner).size() == 5);
  CHECK(nodes_holding(env.fleet, "s:c", set.owner).size() == 5);
  CHECK(nodes_holding(env.fleet, "s:a", set.owner).empty());
  CHECK(env.daemon.info().at("keep_locks") == 1);
  CHECK(keeper.request("MUNLOCK 2 s:c s:b " + set.owner) == "OK");
  CHECK(env.daemon.info().at("keep_locks") == 0);
  CHECK(keeper.request("PING") == "PONG");
}

TEST_CASE("BREAK ends shared holders and the semaphore of the same name, and a set's member",
          "[integration][kinds]") {
  redis_fleet fleet;
  temp_dir dir;
  const auto admin_file = dir.path() / "admin";
  write_file(admin_file, "admin-s3cret\n");
  daemon_process d(fleet.addresses(), {{"admin_secret_file", admin_file.string()}});
  line_client holder(d.port());
  const lock_grant reader = must_lock(holder, "LOCK stuck 60000 SHARED");
  const lock_grant permit = must_lock(holder, "LOCK stuck 60000 PERMITS 3 KEEP");
  const lock_grant set = must_lock(holder, "MLOCK 2 wedged other 60000");
  line_client admin(d.port());
  REQUIRE(admin.request("AUTH admin-s3cret") == "OK");
  CHECK(admin.request("BREAK stuck") == "OK");
  CHECK(holder.read_line() == "LOST stuck " + permit.owner);
  CHECK(masters_with_reader(fleet, "stuck", reader.owner).empty());
  CHECK(admin.request("STATUS stuck") == "OK FREE");
  CHECK(admin.request("BREAK stuck") == "NOTHELD");
  const lock_grant writer = must_lock(admin, "LOCK stuck 1000");
  CHECK(writer.fence > set.fence);
  // A set's member: the set no longer holds it.
  CHECK(admin.request("BREAK wedged") == "OK");
  must_lock(admin, "LOCK wedged 1000");
}
