// The chaos suite's checkers and fenced register on hand-made histories: each must flag the
// violation it exists for, and stay quiet on a correct history.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "../../chaos/fenced_register.hpp"
#include "../../chaos/history.hpp"

using namespace redlockd::chaos;

namespace {

constexpr std::int64_t ms = 1'000'000;

operation lock_ok(const std::string& process, const std::string& owner, std::uint64_t fence,
                  std::int64_t invoke_ms, std::int64_t ok_ms, std::int64_t validity_ms) {
  operation op;
  op.process = process;
  op.kind = "lock";
  op.resource = "r0";
  op.invoke_ns = invoke_ms * ms;
  op.complete_ns = ok_ms * ms;
  op.outcome = "ok";
  op.owner = owner;
  op.fence = fence;
  op.validity_ms = validity_ms;
  return op;
}

operation unlock(const std::string& process, const std::string& owner, std::int64_t invoke_ms) {
  operation op;
  op.process = process;
  op.kind = "unlock";
  op.resource = "r0";
  op.invoke_ns = invoke_ms * ms;
  op.complete_ns = (invoke_ms + 1) * ms;
  op.outcome = "ok";
  op.owner = owner;
  return op;
}

} // namespace

TEST_CASE("the overlap checker flags two holders inside one validity window", "[chaos]") {
  const std::vector<operation> double_grant{lock_ok("c0", "a", 1, 0, 5, 5000),
                                            lock_ok("c1", "b", 2, 100, 1000, 5000)};
  const auto result = check_validity_overlap(double_grant);
  CHECK(result.violations == 1);
  REQUIRE(result.examples.size() == 1);
  CHECK(result.examples[0].find("c1") != std::string::npos);
}

TEST_CASE("the overlap checker accepts a hand-over after UNLOCK and a lease that ran out",
          "[chaos]") {
  const std::vector<operation> history{
      lock_ok("c0", "a", 1, 0, 5, 5000), unlock("c0", "a", 900),
      lock_ok("c1", "b", 2, 100, 1000, 5000),   // waited, granted after the unlock
      lock_ok("c2", "c", 3, 5200, 5300, 5000)}; // after c1's window [1000, 5100]
  CHECK(check_validity_overlap(history).violations == 0);
}

TEST_CASE("the fence checker flags a smaller fence after a completed grant", "[chaos]") {
  const std::vector<operation> history{lock_ok("c0", "a", 7, 0, 5, 50),
                                       lock_ok("c1", "b", 6, 100, 105, 50)};
  CHECK(check_fence_order(history).violations == 1);
  // Concurrent grants (neither completed before the other was invoked) may come in any order.
  const std::vector<operation> concurrent{lock_ok("c0", "a", 7, 0, 50, 10),
                                          lock_ok("c1", "b", 6, 10, 60, 10)};
  CHECK(check_fence_order(concurrent).violations == 0);
  const std::vector<operation> duplicate{lock_ok("c0", "a", 7, 0, 5, 10),
                                         lock_ok("c1", "b", 7, 0, 6, 10)};
  CHECK(check_fence_order(duplicate).violations >= 1);
}

TEST_CASE("the lost-write checker flags an acknowledged element missing from the register",
          "[chaos]") {
  operation write;
  write.process = "c0";
  write.kind = "write";
  write.resource = "r0";
  write.outcome = "ok";
  write.element = "c0-1";
  register_state state;
  state.sets["r0"] = {"c1-1"};
  CHECK(check_lost_writes({write}, state).violations == 1);
  state.sets["r0"].insert("c0-1");
  CHECK(check_lost_writes({write}, state).violations == 0);
}

TEST_CASE("the fenced register refuses a write older than a newer holder's read", "[chaos]") {
  fenced_register store;
  CHECK(store.apply("READ r0 5 c0") == "OK -");
  CHECK(store.apply("READ r0 6 c1") == "OK -"); // a newer holder read in between
  CHECK(store.apply("WRITE r0 5 c0-1") == "STALE 6");
  CHECK(store.apply("WRITE r0 6 c1-1") == "OK");
  CHECK(store.apply("READ r0 5 c0") == "STALE 6");
  const auto state = store.snapshot();
  CHECK(state.sets.at("r0") == std::set<std::string>{"c1-1"});
  CHECK(state.writes_rejected == 1);
  CHECK(store.last_reader("r0")->first == "c1");
}

TEST_CASE("writes after the lease ended are counted as stale", "[chaos]") {
  operation write;
  write.process = "c0";
  write.kind = "write";
  write.resource = "r0";
  write.fence = 1;
  write.invoke_ns = 6000 * ms; // the lease [5, 5000] had ended: a paused holder
  write.outcome = "fail";
  const auto counts = count_stale_writes({lock_ok("c0", "a", 1, 0, 5, 5000), write});
  CHECK(counts.stale == 1);
  CHECK(counts.rejected == 1);
}

namespace {

operation op_of(const std::string& kind, const std::string& process, const std::string& owner,
                std::int64_t invoke_ms, std::int64_t complete_ms) {
  operation op;
  op.process = process;
  op.kind = kind;
  op.resource = "r0";
  op.invoke_ns = invoke_ms * ms;
  op.complete_ns = complete_ms * ms;
  op.outcome = "ok";
  op.owner = owner;
  return op;
}

operation keep_ok(const std::string& process, const std::string& owner, std::uint64_t fence,
                  std::int64_t invoke_ms, std::int64_t ok_ms, std::int64_t ttl_ms) {
  auto op = lock_ok(process, owner, fence, invoke_ms, ok_ms, ttl_ms - 50);
  op.keep = true;
  op.ttl_ms = ttl_ms;
  return op;
}

} // namespace

TEST_CASE("an EXTEND ok widens the lease's window", "[chaos]") {
  auto extend = op_of("extend", "c0", "a", 4000, 4001);
  extend.validity_ms = 5000; // [.., 9000]
  const std::vector<operation> history{lock_ok("c0", "a", 1, 0, 5, 5000), extend,
                                       lock_ok("c1", "b", 2, 6000, 6005, 5000)};
  CHECK(check_validity_overlap(history).violations == 1);
  // A failed EXTEND does not.
  auto refused = extend;
  refused.outcome = "fail";
  const std::vector<operation> history2{lock_ok("c0", "a", 1, 0, 5, 5000), refused,
                                        lock_ok("c1", "b", 2, 6000, 6005, 5000)};
  CHECK(check_validity_overlap(history2).violations == 0);
}

TEST_CASE("a KEEP lock's window follows its PONGs and ends at LOST", "[chaos]") {
  // TTL 4000: each PONG makes it sure for ttl/4 = 1000 ms after the PING's invoke.
  const auto grant = keep_ok("c0", "a", 1, 0, 5, 4000);
  const std::vector<operation> renewed{grant, op_of("ping", "c0", "a", 6000, 6001),
                                       lock_ok("c1", "b", 2, 6500, 6600, 4000)};
  CHECK(check_validity_overlap(renewed).violations == 1);
  // The LOST push at 6200 ends it before the other grant.
  const std::vector<operation> lost{grant, op_of("ping", "c0", "a", 6000, 6001),
                                    op_of("lost", "c0", "a", 6200, 6200),
                                    lock_ok("c1", "b", 2, 6500, 6600, 4000)};
  CHECK(check_validity_overlap(lost).violations == 0);
  // Without PONGs only the first validity counts.
  const std::vector<operation> silent{grant, lock_ok("c1", "b", 2, 6500, 6600, 4000)};
  CHECK(check_validity_overlap(silent).violations == 0);
}

TEST_CASE("a grant within ttl/2 of the kill of a daemon holding a KEEP lock is flagged",
          "[chaos]") {
  auto held = keep_ok("c0", "a", 1, 0, 5, 4000);
  held.daemon = 0;
  auto intruder = lock_ok("c1", "b", 2, 10500, 10600, 4000);
  intruder.daemon = 1;
  // Killed at 10000: its key lasts until at least 10000 + 2/3 ttl.
  const std::vector<std::pair<int, std::int64_t>> kills{{0, 10000 * ms}};
  CHECK(check_keep_survives_kill({held, intruder}, kills).violations == 1);
  auto later = intruder;
  later.complete_ns = 12100 * ms; // after ttl/2
  CHECK(check_keep_survives_kill({held, later}, kills).violations == 0);
  // Unlocked before the kill: nothing to protect.
  CHECK(check_keep_survives_kill({held, unlock("c0", "a", 9000), intruder}, kills).violations == 0);
}

TEST_CASE("a history line that does not parse fails the read", "[chaos]") {
  const auto dir = std::filesystem::temp_directory_path() / "redlockd-chaos-unit-history";
  std::filesystem::create_directories(dir);
  const auto file = dir / "c0.history";
  {
    std::ofstream out(file);
    out << to_json(lock_ok("c0", "a", 1, 0, 5, 5000)).dump() << "\n";
    out << "{\"p\":\"c0\",\"f\":\"lo\n";
  }
  CHECK_THROWS_AS(read_history(file), std::runtime_error);
  {
    std::ofstream out(file);
    out << to_json(lock_ok("c0", "a", 1, 0, 5, 5000)).dump() << "\n";
  }
  CHECK(read_history(file).size() == 1);
  std::filesystem::remove_all(dir);
}
