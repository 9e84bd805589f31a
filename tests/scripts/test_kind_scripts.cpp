// The lock family's Lua scripts (src/lua/lib/{readers,shared,permit,multi}.lua), run as the
// masters run them (the embedded text) on a real redis-server: each kind's conflict rule and
// the five rules (R1-R5) of the research note, one master at a time. The daemon's decisions
// over a quorum are tested elsewhere (unit tests, integration tests, the simulator).
#include "redlockd/resp/scripts.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "redis_fleet.hpp"

using namespace redlockd;
using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

const std::string fence = "redlockd:fence";
const std::string max_ttl = "redlockd:fence:max_ttl";

// Owners as the daemon makes them: exclusive ones random, the others tagged '0000' + kind + slot.
const std::string reader_a = "00001000aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const std::string reader_b = "00001000bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const std::string permit_a = "00002000aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const std::string permit_b = "00002000bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const std::string permit_c = "00002000cccccccccccccccccccccccccccccccc";
const std::string set_a = "00003000aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const std::string set_b = "00003000bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

// One master, seeded with a fence register as a daemon seeds every master before it votes;
// `eval` runs a script by source as the daemon's EVAL fallback does.
struct master {
  redis_fleet fleet{1};

  master() { REQUIRE(fleet.command(0, {"SET", fence, "0"}).str == "OK"); }

  redis_reply eval(script s, const std::vector<std::string>& keys,
                   const std::vector<std::string>& args) const {
    std::vector<std::string> command{"EVAL", std::string(script_source(s)),
                                     std::to_string(keys.size())};
    command.insert(command.end(), keys.begin(), keys.end());
    command.insert(command.end(), args.begin(), args.end());
    const redis_reply reply = fleet.command(0, command);
    INFO("script error: " << reply.str);
    REQUIRE_FALSE(reply.is_error());
    return reply;
  }
  std::string get(const std::string& key) const { return fleet.get(0, key).value_or("(nil)"); }
  long long pttl(const std::string& key) const { return fleet.pttl(0, key); }
  redis_reply run(const std::vector<std::string>& args) const { return fleet.command(0, args); }
  // The master's TIME in ms.
  long long now_ms() const {
    const redis_reply time = run({"TIME"});
    return std::stoll(time.elements.at(0).str) * 1000 + std::stoll(time.elements.at(1).str) / 1000;
  }
};

long long field(const redis_reply& reply, std::size_t i) {
  REQUIRE(reply.elements.size() > i);
  const redis_reply& e = reply.elements[i];
  return e.type == redis_reply::kind::integer ? e.integer : std::stoll(e.str);
}

// How many PUBLISHes the master has run (the scripts' wake-ups among them).
long long publishes(const master& m) {
  const std::string stats = m.run({"INFO", "commandstats"}).str;
  const auto at = stats.find("cmdstat_publish:calls=");
  return at == std::string::npos ? 0 : std::stoll(stats.substr(at + 22));
}

redis_reply shared_lock(const master& m, const std::string& owner, long long ttl,
                        const std::string& label = "", const std::string& key = "r",
                        long long proposal = 100) {
  return m.eval(script::shared_acquire, {key, fence, max_ttl},
                {owner, std::to_string(ttl), std::to_string(proposal), label});
}

// Daemon d2's head (permit_b, ticket 9) attempts a permit of semaphore s with n permits
// (permit_acquire of a WAIT, `wait_ms` left), taking its turn on the wait mark of 's permits'.
redis_reply permit_head_waits(const master& m, const std::string& n, const std::string& wait_ms,
                              const std::string& slack = "200") {
  return m.eval(script::permit_acquire,
                {"s permits", fence, max_ttl, "redlockd:fence:waiting:s permits"},
                {permit_b, "4000", "9", wait_ms, "d2d2d2d2d2d2d2d2", "9", slack, "0", n, "0", ""});
}

// Daemon d2's head, a writer, attempts r (acquire_wait): refused by readers, it marks r.
redis_reply writer_waits(const master& m, const std::string& marker) {
  return m.eval(script::acquire_wait, {"r", fence, max_ttl, marker},
                {"writer-1", "5000", "8", "2500", "d2d2d2d2d2d2d2d2", "8", "200", "0"});
}

// The release of a granted shared hold of r through daemon d1.
redis_reply release_reader(const master& m, const std::string& marker, const std::string& owner) {
  return m.eval(script::shared_release, {"r", marker},
                {owner, "d1d1d1d1d1d1d1d1 200 redlockd:fence:wake"});
}

redis_reply permit(const master& m, const std::string& owner, long long ttl, int n, int first = 0,
                   const std::string& label = "") {
  return m.eval(
      script::permit_acquire, {"s permits", fence, max_ttl},
      {owner, std::to_string(ttl), "100", std::to_string(n), std::to_string(first), label});
}

// A permit's release as the daemon sends it (release.lua's layout); with `n`, the cleanup of a
// failed attempt whose slot is unknown.
redis_reply permit_release(const master& m, const std::string& owner, const std::string& n = "") {
  return m.eval(script::permit_release, {"s permits", "redlockd:fence:waiting:s permits"},
                {owner, "daemon 200 redlockd:fence:wake", n});
}

redis_reply multi_lock(const master& m, const std::string& owner,
                       const std::vector<std::string>& members, long long ttl,
                       const std::string& label = "") {
  std::vector<std::string> keys{fence, max_ttl};
  keys.insert(keys.end(), members.begin(), members.end());
  return m.eval(script::multi_acquire, keys, {owner, std::to_string(ttl), "100", label});
}

} // namespace

TEST_CASE("shared holds share, raise the fence and the longest TTL, and keep labels",
          "[scripts][shared]") {
  master m;
  const auto first = shared_lock(m, reader_a, 8000, "web-1:42", "r", 41);
  CHECK(field(first, 0) == 1);
  CHECK(field(first, 1) == 0); // the fence counter before this grant
  CHECK(m.get(fence) == "41");
  CHECK(m.get(max_ttl) == "8000");
  const auto second = shared_lock(m, reader_b, 1000, "", "r", 42);
  CHECK(field(second, 0) == 1);
  CHECK(field(second, 1) == 41);
  CHECK(m.run({"ZCARD", "r readers"}).integer == 2);
  CHECK(m.run({"HGET", "r labels", reader_a}).str == "web-1:42");
  CHECK(m.run({"HEXISTS", "r labels", reader_b}).integer == 0);
  CHECK(m.get(max_ttl) == "8000"); // a max-register: 1000 does not lower it
  // A shared hold's key holds no owner: it is the readers' guard, until the last reader ends.
  CHECK(m.get("r") == "redlockd:readers");
  CHECK(m.pttl("r") > 7000);
}

TEST_CASE("a shorter reader never shortens the set another reader relies on (R2)",
          "[scripts][shared]") {
  master m;
  shared_lock(m, reader_a, 8000);
  shared_lock(m, reader_b, 1000);
  CHECK(m.pttl("r readers") > 7000);
  // EXTEND of the short reader to a still shorter TTL: its own score moves, the set's TTL stays.
  const auto extended = m.eval(script::shared_extend, {"r", max_ttl}, {reader_b, "500"});
  CHECK(field(extended, 0) == 1);
  CHECK(m.pttl("r readers") > 7000);
}

TEST_CASE("an exclusive owner whose key is gone with the readers' guard in its place hears gone "
          "(-1), not another owner, from every exclusive path (key-loss detection)",
          "[scripts][shared]") {
  // A master lost an exclusive lock's key (or a set's member) early; a reader was then granted
  // there. The owner's renewal, release or hand-over must still report the key gone, for the
  // daemon to judge the loss (review of 222258c: the guard made it answer 0).
  master m;
  const std::string marker = "redlockd:fence:waiting:r";
  REQUIRE(field(shared_lock(m, reader_a, 30000), 0) == 1);
  REQUIRE(field(shared_lock(m, reader_b, 30000, "", "s"), 0) == 1);
  const std::string lost = "0123456789abcdef0123456789abcdef01234567";
  CHECK(m.eval(script::release, {"r", marker}, {lost, "d1 200 redlockd:fence:wake"}).integer == -1);
  CHECK(m.eval(script::release, {"r", marker}, {lost, ""}).integer == -1);
  CHECK(field(m.eval(script::extend, {"r", max_ttl}, {lost, "5000"}), 0) == -1);
  const auto handed = m.eval(script::hand_over, {"r", fence, max_ttl, marker},
                             {"writer-1", "5000", "8", "2500", "d1d1d1d1d1d1d1d1", "8", "200", lost,
                              "redlockd:fence:wake", "0"});
  CHECK(field(handed, 0) == 0);  // the head is refused by the readers
  CHECK(field(handed, 4) == -1); // and the releasing owner's key is gone
  CHECK(m.eval(script::multi_release, {"r", "s"}, {lost}).integer == -1);
  CHECK(field(m.eval(script::multi_extend, {max_ttl, "r", "s"}, {lost, "5000"}), 0) == -1);
  // The guard and the readers are as they were.
  CHECK(m.get("r") == "redlockd:readers");
  CHECK(m.get("s") == "redlockd:readers");
  CHECK(m.run({"ZCARD", "r readers"}).integer == 1);
}

TEST_CASE("a reader whose time looks live again beside an exclusive holder cannot be extended "
          "(a clock set back on one master)",
          "[scripts][shared]") {
  // The state a master is left in when its clock goes back: a writer was granted after the
  // readers' guard expired, and the reader's score is in the future again.
  master m;
  m.run({"ZADD", "r readers", std::to_string(m.now_ms() + 5000), reader_a});
  m.run({"PEXPIRE", "r readers", "5000"});
  REQUIRE(m.fleet.set_nx_px(0, "r", "writer", 5000));
  CHECK(field(m.eval(script::shared_extend, {"r", max_ttl}, {reader_a, "9000"}), 0) == -1);
  CHECK(m.get("r") == "writer");
  CHECK(m.pttl("r") <= 5000);
}

TEST_CASE("a key of another type at a lock key refuses a shared hold, as any holder does",
          "[scripts][shared]") {
  master m;
  m.run({"HSET", "r", "field", "value"});
  m.run({"PEXPIRE", "r", "5000"});
  const auto refused = shared_lock(m, reader_a, 1000);
  CHECK(field(refused, 0) == 0);
  CHECK(field(refused, 1) > 4000);
  CHECK(m.run({"EXISTS", "r readers"}).integer == 0);
  const auto waiting =
      m.eval(script::shared_acquire, {"r", fence, max_ttl, "redlockd:fence:waiting:r"},
             {reader_b, "1000", "9", "2500", "d3d3d3d3d3d3d3d3", "9", "200", "0", ""});
  CHECK(field(waiting, 0) == 0);
  CHECK(m.run({"TYPE", "r"}).str == "hash");
}

TEST_CASE("a shared hold is refused by an exclusive holder and by a waiting writer's mark",
          "[scripts][shared]") {
  master m;
  REQUIRE(m.fleet.set_nx_px(0, "r", "holder", 5000));
  auto refused = shared_lock(m, reader_a, 1000);
  CHECK(field(refused, 0) == 0);
  CHECK(field(refused, 1) > 4000);
  CHECK(m.run({"EXISTS", "r readers"}).integer == 0);
  CHECK(m.get(fence) == "0"); // a refusal raises nothing

  // A writer waits for q: its hint is when that writer can get in, once the readers now in are
  // gone, not when its intent (the writer's whole WAIT) ends (simulator seed 101660).
  m.run({"SET", "q write-intent", "1", "PX", "3000"});
  refused = shared_lock(m, reader_a, 1000, "", "q");
  CHECK(field(refused, 0) == 0);
  CHECK(field(refused, 1) == 0); // no reader in: at once
  const long long now_ms = m.now_ms();
  m.run({"ZADD", "q readers", std::to_string(now_ms + 1500), reader_b});
  refused = shared_lock(m, reader_a, 1000, "", "q");
  CHECK(field(refused, 0) == 0);
  CHECK(field(refused, 1) > 1000);
  CHECK(field(refused, 1) <= 1500);
  m.run({"ZADD", "q readers", std::to_string(now_ms + 9000), reader_b});
  CHECK(field(shared_lock(m, reader_a, 1000, "", "q"), 1) <= 3000); // the intent ends first
}

TEST_CASE("an exclusive grant is refused by live readers, and a waiting writer leaves its intent",
          "[scripts][shared]") {
  master m;
  shared_lock(m, reader_a, 4000);
  // A try-lock: refused, with the readers' time left as the hint; no intent left behind.
  const auto plain = m.eval(script::acquire, {"r", fence}, {"writer-1", "5000", "7"});
  CHECK(field(plain, 0) == 0);
  CHECK(field(plain, 1) > 3000);
  CHECK(m.get("r") == "redlockd:readers");
  CHECK(m.pttl("r write-intent") == -2);
  // A LOCK ... WAIT's attempt: refused, and its intent lives as long as it still waits.
  const std::string marker = "redlockd:fence:waiting:r";
  const auto waiting = [&](const std::string& owner) {
    return m.eval(script::acquire_wait, {"r", fence, max_ttl, marker},
                  {owner, "5000", "8", "2500", "d1d1d1d1d1d1d1d1", "8", "200", "0"});
  };
  CHECK(field(waiting("writer-2"), 0) == 0);
  CHECK(m.pttl("r write-intent") > 2000);
  // New readers are refused now; the reader already in keeps its hold.
  CHECK(field(shared_lock(m, reader_b, 1000), 0) == 0);
  CHECK(m.run({"ZSCORE", "r readers", reader_a}).type == redis_reply::kind::string);
  // The last reader leaves: the writer is granted and takes its intent out.
  CHECK(m.eval(script::shared_release, {"r", marker}, {reader_a, ""}).integer == 1);
  CHECK(field(waiting("writer-2"), 0) == 1);
  CHECK(m.get("r") == "writer-2");
  CHECK(m.pttl("r write-intent") == -2);
}

TEST_CASE("a waiting writer's intent lasts until about its next try plus the slack, not for the "
          "rest of its wait, so that a crashed daemon's intent keeps readers out no longer "
          "(simulator seed 9109146)",
          "[scripts][shared]") {
  master m;
  shared_lock(m, reader_a, 1000);
  const std::string marker = "redlockd:fence:waiting:r";
  // Refused by a reader with 1 s left, it tries again in about 1 s: the intent lasts that long
  // plus 1 % and the slack (200 ms), not the 9 s its writer still waits.
  CHECK(field(m.eval(script::acquire_wait, {"r", fence, max_ttl, marker},
                     {"writer-1", "5000", "8", "9000", "d1d1d1d1d1d1d1d1", "8", "200", "0"}),
              0) == 0);
  CHECK(m.pttl("r write-intent") > 900);
  CHECK(m.pttl("r write-intent") <= 1210);
  // Never past its wait: with 300 ms left, 300 ms.
  m.run({"DEL", "r write-intent"});
  CHECK(field(m.eval(script::acquire_wait, {"r", fence, max_ttl, marker},
                     {"writer-1", "5000", "10", "300", "d1d1d1d1d1d1d1d1", "8", "200", "0"}),
              0) == 0);
  CHECK(m.pttl("r write-intent") > 0);
  CHECK(m.pttl("r write-intent") <= 300);
}

TEST_CASE("readers hold the lock key as their guard: an exclusive SET NX, a LOCK's or a standard "
          "Redlock client's, is refused for the time the readers have left, and goes through once "
          "they are gone",
          "[scripts][shared]") {
  master m;
  const auto attempt = [&](const char* owner) {
    return m.eval(script::acquire, {"r", fence}, {owner, "5000", "7"});
  };
  REQUIRE(field(shared_lock(m, reader_a, 60000), 0) == 1);
  REQUIRE(field(shared_lock(m, reader_b, 300), 0) == 1);
  CHECK(m.get("r") == "redlockd:readers");
  CHECK(m.pttl("r") > 59000); // the reader that ends last
  CHECK_FALSE(m.fleet.set_nx_px(0, "r", "standard-client", 5000));
  auto refused = attempt("writer-1");
  CHECK(field(refused, 0) == 0);
  CHECK(field(refused, 1) > 50000);
  // The reader that ends last leaves: the guard follows the one left, not the set's TTL.
  CHECK(m.eval(script::shared_release, {"r", "redlockd:fence:waiting:r"}, {reader_a, ""}).integer ==
        1);
  CHECK(m.pttl("r readers") > 59000);
  refused = attempt("writer-2");
  CHECK(field(refused, 0) == 0);
  CHECK(field(refused, 1) <= 300);
  // An extension moves the guard with it; the last reader's time passes: the writer gets in.
  CHECK(field(m.eval(script::shared_extend, {"r", max_ttl}, {reader_b, "400"}), 0) == 1);
  CHECK(m.pttl("r") > 300);
  std::this_thread::sleep_for(450ms);
  CHECK(field(attempt("writer-3"), 0) == 1);
  CHECK(m.get("r") == "writer-3");
  // A reader's release after its time leaves the writer's key alone.
  m.eval(script::shared_release, {"r", "redlockd:fence:waiting:r"}, {reader_b, ""});
  CHECK(m.get("r") == "writer-3");
  // A reader is not refused by the guard of other readers, and STATUS sees readers, not a holder.
  REQUIRE(field(shared_lock(m, reader_a, 5000, "", "s"), 0) == 1);
  REQUIRE(field(shared_lock(m, reader_b, 8000, "reporting", "s"), 0) == 1);
  const redis_reply status = m.eval(script::status_read, {"s"}, {});
  CHECK(field(status, 0) > 7000);
  CHECK(status.elements.at(1).str == "reporting");
  CHECK(field(status, 2) == 2);
  // The last reader's release takes the guard out.
  m.eval(script::shared_release, {"s", "redlockd:fence:waiting:s"}, {reader_a, ""});
  m.eval(script::shared_release, {"s", "redlockd:fence:waiting:s"}, {reader_b, ""});
  CHECK(m.pttl("s") == -2);
  CHECK(m.fleet.set_nx_px(0, "s", "standard-client", 5000));
}

TEST_CASE("a writer's intent goes with its daemon's unmark, not with another daemon's "
          "(simulator seed 114, where readers waited on a writer that had given up)",
          "[scripts][shared]") {
  master m;
  shared_lock(m, reader_a, 4000);
  const std::string marker = "redlockd:fence:waiting:r";
  const std::string d1 = "d1d1d1d1d1d1d1d1";
  const std::string d2 = "d2d2d2d2d2d2d2d2";
  CHECK(field(m.eval(script::acquire_wait, {"r", fence, max_ttl, marker},
                     {"writer-1", "5000", "8", "2500", d1, "8", "200", "0"}),
              0) == 0);
  REQUIRE(m.pttl("r write-intent") > 2000);
  // Another daemon's unmark leaves it: its writers never set it.
  m.eval(script::unmark, {marker, "r"}, {d2});
  CHECK(m.pttl("r write-intent") > 2000);
  // d2's head, a reader, is refused by the intent and marked: it sleeps on the intent's time.
  const auto refused = m.eval(script::shared_acquire, {"r", fence, max_ttl, marker},
                              {reader_b, "1000", "91", "2500", d2, "10", "200", "0", ""});
  CHECK(field(refused, 0) == 0);
  CHECK(field(refused, 1) > 2000);
  // The writer's daemon gives up (its WAIT ran out): the intent goes, d2's head is woken (the
  // lock key on the wake channel), and new readers come in at once.
  const long long before = publishes(m);
  CHECK(m.eval(script::unmark, {marker, "r"}, {d1, "redlockd:fence:wake"}).integer == 1);
  CHECK(m.pttl("r write-intent") == -2);
  CHECK(publishes(m) == before + 1);
  CHECK(field(shared_lock(m, reader_b, 1000), 0) == 1);
}

TEST_CASE("wake_yielded publishes the lock key only where another daemon's head came after the "
          "granted head, and leaves the mark as it is",
          "[scripts][shared]") {
  master m;
  const std::string marker = "redlockd:fence:waiting:r";
  const std::string d1 = "d1d1d1d1d1d1d1d1";
  const std::string d3 = "d3d3d3d3d3d3d3d3";
  const std::string channel = "redlockd:fence:wake";
  // d1's older head (ticket 5) is marked; d3's reader head (ticket 9) yields its turn to it.
  m.run({"SET", marker, d1 + " 5 " + std::to_string(m.now_ms() + 20'000) + ";", "PX", "20000"});
  CHECK(field(m.eval(script::shared_acquire, {"r", fence, max_ttl, marker},
                     {reader_b, "1000", "9", "9000", d3, "9", "200", "0", ""}),
              0) == 0);
  const std::string mark = m.run({"GET", marker}).str;
  REQUIRE(mark.find(d3 + " 9 ") != std::string::npos);
  const long long before = publishes(m);
  // d1's head granted: d3's yielded to it.
  CHECK(m.eval(script::wake_yielded, {marker, "r"}, {d1, "5", channel}).integer == 1);
  CHECK(publishes(m) == before + 1);
  CHECK(m.run({"GET", marker}).str == mark);
  // A head with a later ticket than d3's, or d3's own: nobody yielded to it.
  CHECK(m.eval(script::wake_yielded, {marker, "r"}, {d1, "10", channel}).integer == 0);
  CHECK(m.eval(script::wake_yielded, {marker, "r"}, {d3, "9", channel}).integer == 0);
  m.run({"DEL", marker});
  CHECK(m.eval(script::wake_yielded, {marker, "r"}, {d1, "5", channel}).integer == 0);
  CHECK(publishes(m) == before + 1);
}

TEST_CASE("a writer whose daemon owns the intent does not yield to an older head of another "
          "daemon, which may be a reader the intent refuses (simulator seed 41560)",
          "[scripts][shared]") {
  master m;
  const std::string marker = "redlockd:fence:waiting:r";
  const std::string d1 = "d1d1d1d1d1d1d1d1";
  const std::string d2 = "d2d2d2d2d2d2d2d2";
  const auto writer = [&](const std::string& daemon, const std::string& ticket) {
    return m.eval(script::acquire_wait, {"r", fence, max_ttl, marker},
                  {"writer-" + daemon, "5000", "90", "2500", daemon, ticket, "200", "0"});
  };
  const auto reader = [&](const std::string& ticket) { // d2's head, a reader
    return m.eval(script::shared_acquire, {"r", fence, max_ttl, marker},
                  {reader_b, "1000", "91", "2500", d2, ticket, "200", "0", ""});
  };
  shared_lock(m, reader_a, 300);
  CHECK(field(writer(d1, "20"), 0) == 0); // refused by the reader: d1's intent
  REQUIRE(m.get("r write-intent") == d1);
  CHECK(field(reader("10"), 0) == 0); // d2's older head, refused by the intent
  m.eval(script::shared_release, {"r", marker}, {reader_a, ""});
  // The readers are gone: d1's writer goes before d2's older reader it holds back.
  CHECK(field(writer(d1, "20"), 0) == 1);
  CHECK(m.get("r") == "writer-" + d1);
  CHECK(m.pttl("r write-intent") == -2);
  // Without an intent of its own, a writer yields to the older head as before.
  m.run({"DEL", "r"});
  CHECK(field(reader("10"), 0) == 1); // d2's reader is in
  m.eval(script::shared_release, {"r", marker}, {reader_b, ""});
  m.run({"SET", marker, d2 + " 10 " + std::to_string(m.now_ms() + 60'000) + ";"}); // d2 waits again
  CHECK(field(writer(d1, "20"), 0) == 0);
}

TEST_CASE("the last reader's release wakes another daemon's waiting writer, and a permit's release "
          "wakes the semaphore's",
          "[scripts][shared][permit]") {
  master m;
  const std::string marker = "redlockd:fence:waiting:r";
  shared_lock(m, reader_a, 4000);
  shared_lock(m, reader_b, 4000);
  // Daemon d2's writer waits: refused, it marks r.
  writer_waits(m, marker);
  REQUIRE(m.get(marker) != "(nil)");
  CHECK(release_reader(m, marker, reader_a).integer == 1);
  CHECK(m.run({"INFO", "commandstats"}).str.find("cmdstat_publish") == std::string::npos);
  CHECK(release_reader(m, marker, reader_b).integer == 1); // the last one: the writer is woken
  CHECK(m.run({"INFO", "commandstats"}).str.find("cmdstat_publish:calls=1") != std::string::npos);

  // A permit: daemon d2's waiter marks 's permits'; a release through d1 wakes it.
  const std::string semaphore_marker = "redlockd:fence:waiting:s permits";
  permit(m, permit_a, 4000, 1);
  const auto waiter = permit_head_waits(m, "1", "2500");
  CHECK(field(waiter, 0) == 0);
  REQUIRE(m.get(semaphore_marker) != "(nil)");
  CHECK(permit_release(m, permit_a).integer == 1);
  CHECK(m.run({"INFO", "commandstats"}).str.find("cmdstat_publish:calls=2") != std::string::npos);
}

TEST_CASE("a permit's head that yields to an older head tries when that head's entry ends, not "
          "after the longest permit (simulator seed 120224)",
          "[scripts][permits]") {
  master m;
  const std::string semaphore_marker = "redlockd:fence:waiting:s permits";
  CHECK(field(permit(m, permit_a, 10000, 2), 0) == 1); // 's permits' lives 10 s, slot 1 is free
  // d1's older head (ticket 5) tries again within about 300 ms.
  m.run({"SET", semaphore_marker, "d1d1d1d1d1d1d1d1 5 " + std::to_string(m.now_ms() + 300) + ";",
         "PX", "300"});
  const auto yielded = permit_head_waits(m, "2", "2500");
  CHECK(field(yielded, 0) == 0);
  CHECK(field(yielded, 1) > 0);
  CHECK(field(yielded, 1) <= 300);
}

TEST_CASE("a reader or a permit that yields only to an older head's turn looks again after the "
          "slack, not at the end of that head's entry, as its grant, beside which they could be "
          "granted, wakes nobody (simulator seeds 10 --mix shared and --mix permit)",
          "[scripts][shared][permits]") {
  master m;
  const std::string d1_until = std::to_string(m.now_ms() + 20'000);
  // d1's older head (ticket 5) is marked for 20 s on both; nothing else keeps either out.
  const std::string marker = "redlockd:fence:waiting:r";
  const std::string semaphore_marker = "redlockd:fence:waiting:s permits";
  for (const std::string& mark : {marker, semaphore_marker})
    m.run({"SET", mark, "d1d1d1d1d1d1d1d1 5 " + d1_until + ";", "PX", "20000"});
  const auto reader =
      m.eval(script::shared_acquire, {"r", fence, max_ttl, marker},
             {reader_b, "1000", "9", "9000", "d3d3d3d3d3d3d3d3", "9", "200", "0", ""});
  CHECK(field(reader, 0) == 0);
  CHECK(field(reader, 1) > 0);
  CHECK(field(reader, 1) <= 200);
  const auto permit_head = permit_head_waits(m, "2", "9000");
  CHECK(field(permit_head, 0) == 0);
  CHECK(field(permit_head, 1) > 0);
  CHECK(field(permit_head, 1) <= 200);
  // With every slot held it does not poll: it sleeps until a slot's time ends (or a release
  // wakes it), whichever is first with the older head's turn.
  CHECK(field(permit(m, permit_a, 10000, 2), 0) == 1);
  CHECK(field(permit(m, permit_c, 8000, 2), 0) == 1);
  const auto full = permit_head_waits(m, "2", "9000");
  CHECK(field(full, 0) == 0);
  CHECK(field(full, 1) > 7000);
  CHECK(field(full, 1) <= 8000);
  // A writer in the same place still sleeps to about that head's try: its grant could not go
  // beside it.
  m.run({"SET", "w marker", "d1d1d1d1d1d1d1d1 5 " + d1_until + ";", "PX", "20000"});
  const auto writer =
      m.eval(script::acquire_wait, {"w", fence, max_ttl, "w marker"},
             {"writer-1", "5000", "9", "9000", "d2d2d2d2d2d2d2d2", "9", "200", "0"});
  CHECK(field(writer, 0) == 0);
  CHECK(field(writer, 1) > 15'000);
}

TEST_CASE("a reader or a permit that yields only to an older head whose try is due looks again "
          "within half the slack, not at that head's entry's end (simulator seed 56 --mix shared)",
          "[scripts][shared][permits]") {
  // With a slack of 2 s, d1's older head (ticket 5) tries 2 s before its entry ends. Nothing
  // else keeps a reader or a permit out. (Seconds, not ms: a busy machine between commands.)
  const auto hints_beside_entry_of = [](long long left) {
    master m;
    const std::string until = std::to_string(m.now_ms() + left);
    const std::string marker = "redlockd:fence:waiting:r";
    const std::string semaphore_marker = "redlockd:fence:waiting:s permits";
    for (const std::string& mark : {marker, semaphore_marker})
      m.run({"SET", mark, "d1d1d1d1d1d1d1d1 5 " + until + ";", "PX", std::to_string(left)});
    const auto reader =
        m.eval(script::shared_acquire, {"r", fence, max_ttl, marker},
               {reader_b, "1000", "9", "9000", "d3d3d3d3d3d3d3d3", "9", "2000", "0", ""});
    const auto permit_head = permit_head_waits(m, "2", "9000", "2000");
    CHECK(field(reader, 0) == 0);
    CHECK(field(permit_head, 0) == 0);
    return std::pair{field(reader, 1), field(permit_head, 1)};
  };
  // Its entry ends within the slack (1.9 s): its try is due or under way, and decided within
  // half the slack. At the entry's end (1.9 s) they slept past its grant, which wakes nobody.
  const auto [reader_due, permit_due] = hints_beside_entry_of(1900);
  CHECK(reader_due > 0);
  CHECK(reader_due <= 1000);
  CHECK(permit_due > 0);
  CHECK(permit_due <= 1000);
  // Its entry ends later (5 s): its try is 3 s away; they look again after the slack.
  const auto [reader_later, permit_later] = hints_beside_entry_of(5000);
  CHECK(reader_later > 1000);
  CHECK(reader_later <= 2000);
  CHECK(permit_later > 1000);
  CHECK(permit_later <= 2000);
}

TEST_CASE("the release of the reader that lives longest wakes another daemon's waiting writer when "
          "the others end sooner (simulator seed 130230)",
          "[scripts][shared]") {
  const std::string marker = "redlockd:fence:waiting:r";
  // Readers of 4 s (reader_a) and 1 s (reader_b); d2's writer is refused by them and sleeps on
  // reader_a's time, about 4 s.
  const auto readers_and_writer = [&](const master& m) {
    shared_lock(m, reader_a, 4000);
    shared_lock(m, reader_b, 1000);
    return writer_waits(m, marker);
  };
  master m;
  const auto refused = readers_and_writer(m);
  CHECK(field(refused, 0) == 0);
  CHECK(field(refused, 1) > 3000);
  // reader_a leaves: reader_b ends in about 1 s, 3 s before the writer's try. It is woken.
  CHECK(release_reader(m, marker, reader_a).integer == 1);
  CHECK(m.run({"INFO", "commandstats"}).str.find("cmdstat_publish:calls=1") != std::string::npos);
  // The other way round, the shorter reader's release changes nothing for the writer.
  master n;
  readers_and_writer(n);
  CHECK(release_reader(n, marker, reader_b).integer == 1);
  CHECK(n.run({"INFO", "commandstats"}).str.find("cmdstat_publish") == std::string::npos);
}

TEST_CASE("a writer that yields to an older head while readers hold the lock tries when the "
          "readers are gone, not when that head's entry ends, and a reader when that entry ends "
          "(simulator seeds 30023, 30120)",
          "[scripts][shared]") {
  master m;
  const std::string marker = "redlockd:fence:waiting:r";
  // (Times far apart: a busy CI machine may take a while between two commands.)
  shared_lock(m, reader_a, 3000);
  // d1's older head (ticket 5) is marked for 20 s: it tried through its own daemon and was
  // granted, and the grant kept its entry for its next waiter, after d2's head.
  m.run({"SET", marker, "d1d1d1d1d1d1d1d1 5 " + std::to_string(m.now_ms() + 20'000) + ";", "PX",
         "20000"});
  const auto yielded = writer_waits(m, marker); // d2's writer, ticket 8: it yields to d1
  CHECK(field(yielded, 0) == 0);
  CHECK(field(yielded, 1) > 0);
  CHECK(field(yielded, 1) <= 3000); // the reader's time, not d1's entry's (20 s)
  // A reader that yields is not kept out by readers: it does not sleep on the readers' time (it
  // slept 1.9 s past its turn: simulator seed 30120), and looks again after the slack (the
  // older head's grant, which it could join, wakes nobody).
  const auto reader =
      m.eval(script::shared_acquire, {"r", fence, max_ttl, marker},
             {reader_b, "1000", "9", "9000", "d3d3d3d3d3d3d3d3", "9", "200", "0", ""});
  CHECK(field(reader, 0) == 0);
  CHECK(field(reader, 1) <= 200);
  // Without readers the older head's entry is the writer's hint too, as before.
  m.run({"DEL", "r readers", "r"}); // (the readers and their guard)
  const auto free = writer_waits(m, marker);
  CHECK(field(free, 0) == 0);
  CHECK(field(free, 1) > 15'000);
}

TEST_CASE("a writer that yields to an older head while readers hold the lock for longer tries "
          "about when that head tries, not when the readers are gone (simulator seed 160061)",
          "[scripts][shared]") {
  master m;
  const std::string marker = "redlockd:fence:waiting:r";
  // Readers hold r for 20 s: while the writer yields it leaves no intent, and new readers (the
  // older head among them) keep the readers' time going for as long as they come.
  shared_lock(m, reader_a, 20'000);
  // d1's older head (ticket 5) tries within about 3 s.
  m.run({"SET", marker, "d1d1d1d1d1d1d1d1 5 " + std::to_string(m.now_ms() + 3000) + ";", "PX",
         "3000"});
  const auto yielded = writer_waits(m, marker); // d2's writer, ticket 8: it yields to d1
  CHECK(field(yielded, 0) == 0);
  CHECK(field(yielded, 1) > 0);
  CHECK(field(yielded, 1) <= 3000); // d1's try, then its own try leaves an intent
}

TEST_CASE("a head that yields to an older head's entry tries about when that head tries, not a "
          "slack later, and near the entry's end at its end (simulator seed 30038)",
          "[scripts][shared]") {
  const std::string marker = "redlockd:fence:waiting:r";
  // d1's head (ticket 5) is marked until `left` ms from now: it tries about a slack (200 ms)
  // before that. d2's writer (ticket 8) yields to it on a free lock.
  const auto yields_to_entry_of = [&](long long left) {
    master m;
    m.run({"SET", marker, "d1d1d1d1d1d1d1d1 5 " + std::to_string(m.now_ms() + left) + ";", "PX",
           std::to_string(left)});
    const auto refused = writer_waits(m, marker);
    CHECK(field(refused, 0) == 0);
    return field(refused, 1);
  };
  // (Bounds far apart: a busy CI machine may take a while between two commands.)
  const long long far = yields_to_entry_of(20'000);
  CHECK(far <= 19'800); // the older head's try, not its entry's end: slacks add up on a chain
  CHECK(far > 18'000);
  // Within two slacks of the end it waits for the end (350 ms, not 150): no try while the older
  // one's is under way.
  const long long near = yields_to_entry_of(350);
  CHECK(near > 200);
  CHECK(near <= 350);
}

TEST_CASE("readers expire by the master's clock (R1)", "[scripts][shared]") {
  master m;
  shared_lock(m, reader_a, 60); // its own score: now + 60 by the master's TIME
  CHECK(field(multi_lock(m, set_a, {"r"}, 1000), 0) == 0); // a live reader blocks a member
  std::this_thread::sleep_for(150ms);
  // Past its score the reader no longer counts, even though the set's TTL may not have run out.
  CHECK(field(multi_lock(m, set_a, {"r"}, 1000), 0) == 1);
  CHECK(m.run({"DEL", "r"}).integer == 1);
  // The next shared grant purges the expired member (and its label).
  shared_lock(m, reader_b, 1000);
  CHECK(m.run({"ZSCORE", "r readers", reader_a}).type == redis_reply::kind::nil);
}

TEST_CASE("a live reader whose guard this master lost hears gone (-1) from its extension and "
          "its release, for the daemon to judge the loss",
          "[scripts][shared]") {
  // A master lost the lock key alone (an operator's DEL, an eviction) while its readers set
  // stayed: an exclusive SET NX gets in there. The reader's renewal or release answered 1 and
  // the extension put the guard back, so no daemon was ever told of the loss (simulator
  // --faults key-loss; an engine gap until this script change).
  master m;
  REQUIRE(field(shared_lock(m, reader_a, 30000), 0) == 1);
  REQUIRE(field(shared_lock(m, reader_b, 20000), 0) == 1);
  m.run({"DEL", "r"});
  const std::string until = m.run({"ZSCORE", "r readers", reader_a}).str;
  CHECK(field(m.eval(script::shared_extend, {"r", max_ttl}, {reader_a, "40000"}), 0) == -1);
  // Not extended, but guarded again: the daemons that were not told must be refused here.
  CHECK(m.run({"ZSCORE", "r readers", reader_a}).str == until);
  CHECK(m.get(max_ttl) == "30000");
  CHECK(m.get("r") == "redlockd:readers");
  m.run({"DEL", "r"});
  CHECK(release_reader(m, "redlockd:fence:waiting:r", reader_b).integer == -1);
  // The release still ends its hold and guards the readers left.
  CHECK(m.run({"ZSCORE", "r readers", reader_b}).type == redis_reply::kind::nil);
  CHECK(m.get("r") == "redlockd:readers");
  // Guarded again, the reader left is answered as before.
  CHECK(field(m.eval(script::shared_extend, {"r", max_ttl}, {reader_a, "40000"}), 0) == 1);
  // Beside an exclusive holder that got in, the release answers gone as the extension does.
  m.run({"SET", "r", "writer", "PX", "5000"});
  CHECK(release_reader(m, "redlockd:fence:waiting:r", reader_a).integer == -1);
  CHECK(m.get("r") == "writer");
  // The last reader, unguarded, still wakes another daemon's waiting writer as it leaves.
  const std::string marker = "redlockd:fence:waiting:w";
  master w;
  shared_lock(w, reader_a, 4000, "", "w");
  REQUIRE(field(w.eval(script::acquire_wait, {"w", fence, max_ttl, marker},
                       {"writer-1", "5000", "8", "2500", "d2d2d2d2d2d2d2d2", "8", "200", "0"}),
                0) == 0);
  REQUIRE(w.get(marker) != "(nil)");
  w.run({"DEL", "w"});
  const long long before = publishes(w);
  CHECK(w.eval(script::shared_release, {"w", marker},
               {reader_a, "d1d1d1d1d1d1d1d1 200 redlockd:fence:wake"})
            .integer == -1);
  CHECK(publishes(w) == before + 1);
  // A reader whose time has passed is released as before, guard or not.
  m.run({"ZADD", "t readers", std::to_string(m.now_ms() - 10), reader_b});
  m.run({"PEXPIRE", "t readers", "5000"});
  CHECK(m.eval(script::shared_release, {"t", "redlockd:fence:waiting:t"}, {reader_b, ""}).integer ==
        1);
}

TEST_CASE("shared release undoes by identity and extension never re-creates (R3, R4)",
          "[scripts][shared]") {
  master m;
  shared_lock(m, reader_a, 5000, "x");
  shared_lock(m, reader_b, 5000);
  CHECK(m.eval(script::shared_release, {"r"}, {reader_a}).integer == 1);
  CHECK(m.eval(script::shared_release, {"r"}, {reader_a}).integer == -1); // idempotent
  CHECK(m.run({"HEXISTS", "r labels", reader_a}).integer == 0);
  CHECK(m.run({"ZCARD", "r readers"}).integer == 1);
  // An extension of a released reader answers gone and adds nothing back.
  CHECK(field(m.eval(script::shared_extend, {"r", max_ttl}, {reader_a, "9000"}), 0) == -1);
  CHECK(m.run({"ZCARD", "r readers"}).integer == 1);
  CHECK(m.get(max_ttl) == "5000"); // a refused extension raises nothing
  CHECK(m.eval(script::shared_release, {"r"}, {reader_b}).integer == 1);
  CHECK(m.run({"EXISTS", "r readers", "r labels"}).integer == 0); // the last one takes the keys
  // The release of a reader that never landed here is harmless.
  CHECK(m.eval(script::shared_release, {"r"}, {reader_a}).integer == -1);
}

TEST_CASE("an expired reader cannot be extended back to life", "[scripts][shared]") {
  master m;
  shared_lock(m, reader_a, 60);
  shared_lock(m, reader_b, 5000);
  std::this_thread::sleep_for(150ms);
  CHECK(field(m.eval(script::shared_extend, {"r", max_ttl}, {reader_a, "5000"}), 0) == -1);
  CHECK(field(m.eval(script::shared_extend, {"r", max_ttl}, {reader_b, "7000"}), 0) == 1);
  CHECK(m.get(max_ttl) == "7000");
}

TEST_CASE("permits are slots: n holders at most, each slot in the owner", "[scripts][permit]") {
  master m;
  const auto a = permit(m, permit_a, 5000, 2, 1);
  CHECK(field(a, 0) == 1);
  CHECK(field(a, 5) == 1); // the first slot it tried
  CHECK(m.get("s permit:1") == "00002001aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
  const auto b = permit(m, permit_b, 3000, 2, 1, "job:9");
  CHECK(field(b, 5) == 0); // slot 1 taken: the next in turn
  CHECK(m.get("s permit:0") == "00002000bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb job:9");
  const auto c = permit(m, permit_c, 1000, 2);
  CHECK(field(c, 0) == 0);
  CHECK(field(c, 1) > 2000); // the shortest TTL among the held slots
  CHECK(field(c, 1) <= 3000);
  CHECK(m.get("s permits") == "2");
  CHECK(m.pttl("s permits") > 4000); // as long as the longest permit
  CHECK(m.get("s") == "(nil)");      // the semaphore s and the lock s never share a key
}

TEST_CASE("a permit with another n is refused while permits are held", "[scripts][permit]") {
  master m;
  permit(m, permit_a, 300, 2);
  const auto other = permit(m, permit_b, 1000, 3);
  CHECK(field(other, 0) == 2);
  CHECK(field(other, 1) == 2);
  CHECK(m.run({"EXISTS", "s permit:1", "s permit:2"}).integer == 0);
  std::this_thread::sleep_for(450ms); // every permit of n = 2 has expired, and its count with it
  CHECK(field(permit(m, permit_b, 1000, 3), 0) == 1);
  CHECK(m.get("s permits") == "3");
}

TEST_CASE("permit release and extension go by the owner's slot", "[scripts][permit]") {
  master m;
  permit(m, permit_a, 5000, 3);
  permit(m, permit_b, 5000, 3);
  const std::string a0 = "00002000aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  const std::string b1 = "00002001bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
  CHECK(field(m.eval(script::permit_extend, {"s permits", max_ttl}, {b1, "9000"}), 0) == 1);
  CHECK(m.pttl("s permit:1") > 8000);
  CHECK(m.pttl("s permits") > 8000);
  // The wrong slot: another owner holds slot 0 for a's random part with slot 1.
  const std::string a1 = "00002001aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  CHECK(field(m.eval(script::permit_extend, {"s permits", max_ttl}, {a1, "9000"}), 0) == 0);
  CHECK(permit_release(m, a1).integer == 0);
  CHECK(permit_release(m, a0).integer == 1);
  CHECK(permit_release(m, a0).integer == -1);
  CHECK(field(m.eval(script::permit_extend, {"s permits", max_ttl}, {a0, "9000"}), 0) == -1);
  CHECK(m.run({"EXISTS", "s permit:0"}).integer == 0); // never re-created (R4)
}

TEST_CASE("a failed permit attempt is undone on whatever slot it took", "[scripts][permit]") {
  master m;
  permit(m, permit_a, 5000, 4, 2);
  permit(m, permit_b, 5000, 4, 2);
  // The daemon knows the attempt's owner (slot 000) but not which slot this master chose.
  CHECK(permit_release(m, permit_a, "4").integer == 1);
  CHECK(m.run({"EXISTS", "s permit:2"}).integer == 0);
  CHECK(m.get("s permit:3") == "00002003bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb");
  CHECK(permit_release(m, permit_a, "4").integer == 0); // idempotent
}

TEST_CASE("several resources are taken all or nothing", "[scripts][multi]") {
  master m;
  REQUIRE(m.fleet.set_nx_px(0, "b", "someone", 4000));
  auto refused = multi_lock(m, set_a, {"a", "b", "c"}, 1000);
  CHECK(field(refused, 0) == 0);
  CHECK(field(refused, 1) > 3000);
  CHECK(m.run({"EXISTS", "a", "c"}).integer == 0); // nothing of a refused set stays
  CHECK(m.get(fence) == "0");
  const auto granted = multi_lock(m, set_a, {"c", "a", "d"}, 2000, "batch");
  CHECK(field(granted, 0) == 1);
  for (const char* key : {"a", "c", "d"})
    CHECK(m.get(key) == set_a + " batch");
  CHECK(m.get(max_ttl) == "2000");
  // Overlapping sets exclude each other.
  CHECK(field(multi_lock(m, set_b, {"d", "e"}, 1000), 0) == 0);
  CHECK(m.run({"EXISTS", "e"}).integer == 0);
}

TEST_CASE("a set's release and extension report a member that is gone or taken",
          "[scripts][multi]") {
  master m;
  multi_lock(m, set_a, {"a", "b"}, 5000);
  m.run({"DEL", "b"});
  // Extension: a is extended, b is gone (never re-created), and the record is raised.
  const auto extended = m.eval(script::multi_extend, {max_ttl, "a", "b"}, {set_a, "8000"});
  CHECK(field(extended, 0) == -1);
  CHECK(m.pttl("a") > 7000);
  CHECK(m.run({"EXISTS", "b"}).integer == 0);
  CHECK(m.get(max_ttl) == "8000");
  REQUIRE(m.fleet.set_nx_px(0, "b", "someone", 4000));
  CHECK(m.eval(script::multi_release, {"a", "b"}, {set_a}).integer == 0);
  CHECK(m.run({"EXISTS", "a"}).integer == 0); // its own member is released anyway
  CHECK(m.get("b") == "someone");             // never another owner's
  CHECK(m.eval(script::multi_release, {"a"}, {set_a}).integer == -1);
}

TEST_CASE("no kind grants on a master without a fence register: it lost its data", "[scripts]") {
  // Every master a daemon lets vote holds the register; one without it lost its data (a
  // FLUSHALL while connected), and a grant must neither count nor re-create the register.
  master m;
  m.run({"DEL", fence});
  const auto lost = [](const redis_reply& reply) { return field(reply, 0) == -2; };
  CHECK(lost(shared_lock(m, reader_a, 5000)));
  CHECK(lost(permit(m, permit_a, 5000, 2)));
  CHECK(lost(multi_lock(m, set_a, {"x", "y"}, 5000)));
  CHECK(lost(m.eval(script::acquire, {"r", fence}, {"owner", "5000", "7"})));
  CHECK(m.eval(script::fence_bump, {fence}, {"9"}).integer == -2);
  CHECK(m.run({"DBSIZE"}).integer == 0); // nothing granted, no register created
}

TEST_CASE("acquire decides as acquire_wait's grant does, in every state of the keys it reads",
          "[scripts]") {
  // acquire.lua writes the exclusive grant (prelude.lua's grant) out without a function, for its
  // cost; acquire_wait runs grant itself. With no wait mark and nobody behind, the two must give
  // the same answer and leave the same lock key and registers, in every combination of: fence
  // register, longest-TTL record, lock key and reader set. (acquire_wait's own additions, a
  // refused writer's intent and its wait mark, are its own and not compared.)
  master m;
  const std::vector<std::string> fences{"", "5", "9", "70", "123"};
  const std::vector<std::string> longest{"", "400", "5000", "9000", "60000"};
  const std::vector<std::string> proposals{"7", "12"};
  struct outcome {
    long long status = 0, hint = 0, key_pttl = 0;
    std::string previous, key, fence, max_ttl;
  };
  const auto attempt = [&](bool wait, const std::string& f, const std::string& l, bool held,
                           int readers, const std::string& proposal) {
    m.run({"FLUSHALL"});
    if (!f.empty())
      m.run({"SET", fence, f});
    if (!l.empty())
      m.run({"SET", max_ttl, l});
    if (held)
      m.run({"SET", "r", "someone", "PX", "3000"});
    if (readers > 0) { // 1: a live reader (and its guard), 2: only a reader whose time passed
      const long long now = m.now_ms();
      m.run({"ZADD", "r readers", std::to_string(readers == 1 ? now + 4000 : now - 5), reader_a});
      m.run({"PEXPIRE", "r readers", "8000"});
      if (readers == 1 && !held)
        m.run({"SET", "r", "redlockd:readers", "PX", "4000"});
    }
    const redis_reply reply =
        wait ? m.eval(script::acquire_wait, {"r", fence, max_ttl, "redlockd:fence:waiting:r"},
                      {"writer", "5000", proposal, "2500", "d1d1d1d1d1d1d1d1", "8", "200", "0"})
             : m.eval(script::acquire, {"r", fence}, {"writer", "5000", proposal});
    outcome o;
    o.status = field(reply, 0);
    o.hint = o.status == 1 ? 0 : field(reply, 1);
    o.previous = o.status == 1 ? reply.elements.at(1).str : "";
    o.key = m.get("r");
    o.key_pttl = m.pttl("r");
    o.fence = m.get(fence);
    o.max_ttl = m.get(max_ttl);
    return o;
  };
  int cases = 0;
  for (const auto& f : fences)
    for (const auto& l : longest)
      for (const bool held : {false, true})
        for (const int readers : {0, 1, 2})
          for (const auto& proposal : proposals) {
            INFO("fence '" << f << "', longest '" << l << "', held " << held << ", readers "
                           << readers << ", proposal " << proposal);
            const outcome plain = attempt(false, f, l, held, readers, proposal);
            const outcome waiting = attempt(true, f, l, held, readers, proposal);
            CHECK(plain.status == waiting.status);
            CHECK(std::abs(plain.hint - waiting.hint) <= 100); // times left, read apart
            CHECK(plain.previous == waiting.previous);
            CHECK(plain.key == waiting.key);
            CHECK(std::abs(plain.key_pttl - waiting.key_pttl) <= 100);
            CHECK(plain.fence == waiting.fence);
            CHECK(plain.max_ttl == waiting.max_ttl);
            ++cases;
          }
  CHECK(cases == 300);
}
