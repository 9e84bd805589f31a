// The chaos suite's checkers and fenced register on hand-made histories: each must flag the
// violation it exists for, and stay quiet on a correct history.
#include <catch2/catch.hpp>

#include "../chaos/fenced_register.hpp"
#include "../chaos/history.hpp"

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
