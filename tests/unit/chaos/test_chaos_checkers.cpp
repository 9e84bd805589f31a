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

// ---- the lock family: C1-RW, C1-k, C1-multi, fences across kinds, the readers' register rules

namespace {

operation shared_ok(const std::string& process, const std::string& owner, std::uint64_t fence,
                    std::int64_t invoke_ms, std::int64_t ok_ms, std::int64_t validity_ms) {
  auto op = lock_ok(process, owner, fence, invoke_ms, ok_ms, validity_ms);
  op.mode = "shared";
  return op;
}

operation permit_ok(const std::string& process, const std::string& owner, int slot,
                    std::uint64_t fence, std::int64_t invoke_ms, std::int64_t ok_ms,
                    std::int64_t validity_ms) {
  auto op = lock_ok(process, owner, fence, invoke_ms, ok_ms, validity_ms);
  op.mode = "permit";
  op.resource = "s0";
  op.permits = 2;
  op.slot = slot;
  return op;
}

operation set_ok(const std::string& process, const std::string& owner,
                 const std::vector<std::string>& members, std::uint64_t fence,
                 std::int64_t invoke_ms, std::int64_t ok_ms, std::int64_t validity_ms) {
  auto op = lock_ok(process, owner, fence, invoke_ms, ok_ms, validity_ms);
  op.mode = "set";
  op.members = members;
  op.resource.clear();
  for (const auto& m : members)
    op.resource += (op.resource.empty() ? "" : "+") + m;
  return op;
}

operation on(operation op, const std::string& resource) {
  op.resource = resource;
  return op;
}

} // namespace

TEST_CASE("C1-RW lets shared windows overlap and flags an exclusive one inside them", "[chaos]") {
  const std::vector<operation> readers{shared_ok("c0", "a", 1, 0, 5, 5000),
                                       shared_ok("c1", "b", 2, 100, 105, 5000)};
  CHECK(check_shared_overlap(readers).violations == 0);
  CHECK(check_validity_overlap(readers).violations == 0);

  // A writer granted while a reader's window runs.
  const std::vector<operation> writer_in{shared_ok("c0", "a", 1, 0, 5, 5000),
                                         lock_ok("c1", "b", 2, 100, 1000, 5000)};
  const auto result = check_shared_overlap(writer_in);
  CHECK(result.violations == 1);
  REQUIRE(result.examples.size() == 1);
  CHECK(result.examples[0].find("shared c0") != std::string::npos);
  // A reader granted while a writer's window runs.
  const std::vector<operation> reader_in{lock_ok("c0", "a", 1, 0, 5, 5000),
                                         shared_ok("c1", "b", 2, 100, 1000, 5000)};
  CHECK(check_shared_overlap(reader_in).violations == 1);
  // A set holding the resource is an exclusive holder of it.
  const std::vector<operation> set_in{shared_ok("c0", "a", 1, 0, 5, 5000),
                                      set_ok("c1", "b", {"r1", "r0"}, 2, 100, 1000, 5000)};
  CHECK(check_shared_overlap(set_in).violations == 1);
  // A writer after the readers unlocked, and one on another resource, are fine.
  const std::vector<operation> after{shared_ok("c0", "a", 1, 0, 5, 5000), unlock("c0", "a", 900),
                                     on(lock_ok("c2", "c", 3, 100, 200, 5000), "r1"),
                                     lock_ok("c1", "b", 2, 100, 1000, 5000)};
  CHECK(check_shared_overlap(after).violations == 0);
  // Two exclusive windows overlapping are C1's, reported once.
  const std::vector<operation> writers{lock_ok("c0", "a", 1, 0, 5, 5000),
                                       lock_ok("c1", "b", 2, 100, 1000, 5000)};
  CHECK(check_shared_overlap(writers).violations == 0);
  CHECK(check_validity_overlap(writers).violations == 1);
}

TEST_CASE("C1-k flags a third permit of two and two holders of one slot", "[chaos]") {
  // Slots 0 and 1 held at once: n = 2 is reached, not passed.
  const std::vector<operation> two{permit_ok("c0", "a", 0, 1, 0, 5, 5000),
                                   permit_ok("c1", "b", 1, 2, 100, 105, 5000)};
  CHECK(check_permit_bound(two).violations == 0);

  // A third while both are valid (T-c1): more than n, and its slot is taken.
  auto three = two;
  three.push_back(permit_ok("c2", "c", 0, 3, 1000, 1005, 5000));
  const auto result = check_permit_bound(three);
  CHECK(result.violations == 2);
  bool counted = false;
  for (const auto& e : result.examples)
    counted = counted || e.find("3 permits of 2") != std::string::npos;
  CHECK(counted);

  // One slot, two holders, within n: still a violation (each slot is a mutex).
  const std::vector<operation> same_slot{permit_ok("c0", "a", 1, 1, 0, 5, 5000),
                                         permit_ok("c1", "b", 1, 2, 100, 1000, 5000)};
  CHECK(check_permit_bound(same_slot).violations == 1);

  // The slot handed on after an UNLOCK, and a lease that ran out: fine.
  const std::vector<operation> in_turn{
      permit_ok("c0", "a", 0, 1, 0, 5, 5000), on(unlock("c0", "a", 900), "s0"),
      permit_ok("c1", "b", 0, 2, 100, 1000, 5000), permit_ok("c2", "c", 0, 3, 5200, 5300, 5000)};
  CHECK(check_permit_bound(in_turn).violations == 0);

  // A slot the semaphore does not have.
  CHECK(check_permit_bound({permit_ok("c0", "a", 2, 1, 0, 5, 5000)}).violations == 1);

  // A semaphore and a lock of the same name are different things.
  const std::vector<operation> namesakes{on(permit_ok("c0", "a", 0, 1, 0, 5, 5000), "r0"),
                                         lock_ok("c1", "b", 2, 100, 105, 5000)};
  CHECK(check_permit_bound(namesakes).violations == 0);
  CHECK(check_validity_overlap(namesakes).violations == 0);
  CHECK(check_shared_overlap(namesakes).violations == 0);
}

TEST_CASE("C1-multi counts a set's window for each member it holds", "[chaos]") {
  // A plain lock of a member inside the set's window.
  const std::vector<operation> lock_in{set_ok("c0", "a", {"r2", "r0"}, 1, 0, 5, 5000),
                                       lock_ok("c1", "b", 2, 100, 1000, 5000)};
  const auto result = check_set_overlap(lock_in);
  CHECK(result.violations == 1);
  REQUIRE(result.examples.size() == 1);
  CHECK(result.examples[0].find("set r2+r0") != std::string::npos);
  CHECK(check_validity_overlap(lock_in).violations == 0); // not C1's: reported once
  // Two sets sharing one member (named in other orders).
  const std::vector<operation> sets{set_ok("c0", "a", {"r0", "r1"}, 1, 0, 5, 5000),
                                    set_ok("c1", "b", {"r2", "r1"}, 2, 100, 1000, 5000)};
  CHECK(check_set_overlap(sets).violations == 1);
  // Disjoint sets and a lock of a resource no set holds overlap freely.
  const std::vector<operation> disjoint{set_ok("c0", "a", {"r0", "r1"}, 1, 0, 5, 5000),
                                        set_ok("c1", "b", {"r2", "r3"}, 2, 100, 1000, 5000),
                                        on(lock_ok("c2", "c", 3, 100, 1000, 5000), "r4")};
  CHECK(check_set_overlap(disjoint).violations == 0);
  // MUNLOCK ends the set's window on every member.
  const std::vector<operation> released{set_ok("c0", "a", {"r0", "r1"}, 1, 0, 5, 5000),
                                        on(unlock("c0", "a", 900), "r0+r1"),
                                        on(lock_ok("c1", "b", 2, 100, 1000, 5000), "r1")};
  CHECK(check_set_overlap(released).violations == 0);
}

TEST_CASE("fences increase across kinds", "[chaos]") {
  const std::vector<operation> history{set_ok("c0", "a", {"r0", "r1"}, 7, 0, 5, 50),
                                       permit_ok("c1", "b", 0, 6, 100, 105, 50)};
  CHECK(check_fence_order(history).violations == 1);
  const std::vector<operation> rising{shared_ok("c0", "a", 5, 0, 5, 50),
                                      permit_ok("c1", "b", 0, 6, 100, 105, 50),
                                      set_ok("c2", "c", {"r0", "r1"}, 7, 200, 205, 50)};
  CHECK(check_fence_order(rising).violations == 0);
}

TEST_CASE("a grant within ttl/2 of a daemon's kill is judged by the kinds it conflicts with",
          "[chaos]") {
  auto held = shared_ok("c0", "a", 1, 0, 5, 3950);
  held.keep = true;
  held.ttl_ms = 4000;
  const std::vector<std::pair<int, std::int64_t>> kills{{0, 10000 * ms}};
  auto reader = shared_ok("c1", "b", 2, 10500, 10600, 4000);
  reader.daemon = 1;
  CHECK(check_keep_survives_kill({held, reader}, kills).violations == 0);
  auto set = set_ok("c1", "b", {"r1", "r0"}, 2, 10500, 10600, 4000);
  set.daemon = 1;
  CHECK(check_keep_survives_kill({held, set}, kills).violations == 1);
}

TEST_CASE("the fenced register applies the read-write rules to shared readers", "[chaos]") {
  fenced_register store;
  CHECK(store.apply("WRITE r0 5 w5") == "OK"); // max_all = max_w = 5
  // Readers with 7 and 6 both read: readers never refuse one another.
  CHECK(store.apply("SREAD r0 7 c1") == "OK w5");
  CHECK(store.apply("SREAD r0 6 c2") == "OK w5");
  // A writer older than a reader that read is refused; a newer one is accepted.
  CHECK(store.apply("WRITE r0 6 w5,w6") == "STALE 7");
  CHECK(store.apply("READ r0 6 c3") == "STALE 7");
  CHECK(store.apply("WRITE r0 8 w5,w8") == "OK"); // max_w = 8
  // Now a reader older than that writer is stale.
  CHECK(store.apply("SREAD r0 7 c1") == "STALE 8");
  CHECK(store.apply("SREAD r0 9 c4") == "OK w5,w8");
  // An exclusive holder's READ raises max_w as its WRITE does.
  CHECK(store.apply("READ r0 10 c5") == "OK w5,w8");
  CHECK(store.apply("SREAD r0 9 c4") == "STALE 10");
  const auto state = store.snapshot();
  CHECK(state.writes_rejected == 1);
  CHECK(state.reads_rejected == 1);
  CHECK(state.shared_reads_rejected == 2);
}

TEST_CASE("a history line keeps the kind of its lock", "[chaos]") {
  auto op = set_ok("c0", "00003000abc", {"r2", "r0", "r1"}, 9, 0, 5, 4000);
  const auto back = operation_from_json(nlohmann::json::parse(to_json(op).dump()));
  CHECK(back.mode == "set");
  CHECK(back.members == std::vector<std::string>{"r2", "r0", "r1"});
  const auto permit = operation_from_json(to_json(permit_ok("c1", "b", 1, 3, 0, 5, 40)));
  CHECK(permit.mode == "permit");
  CHECK(permit.slot == 1);
  CHECK(permit.permits == 2);
}

TEST_CASE("C4-RW flags a writer refused after a long WAIT with no other writer", "[chaos]") {
  auto busy = [](const std::string& process, std::int64_t invoke_ms, std::int64_t done_ms) {
    auto op = lock_ok(process, "", 0, invoke_ms, done_ms, 0);
    op.outcome = "fail";
    op.reply = "BUSY 800";
    return op;
  };
  const auto reader = shared_ok("c1", "a", 1, 0, 5, 5000);
  // Refused after 3 s behind readers only: starved.
  const auto starved = check_writer_waits({reader, busy("c0", 100, 3100)}, 2500);
  CHECK(starved.violations == 1);
  CHECK(starved.checked == 1);
  // Refused after a short WAIT, or granted: no verdict against it.
  const auto fine = check_writer_waits(
      {reader, busy("c0", 100, 1100), lock_ok("c0", "w", 2, 1200, 2400, 5000)}, 2500);
  CHECK(fine.violations == 0);
  CHECK(fine.checked == 2);
  // Another writer or a set held the resource meanwhile: excused.
  CHECK(check_writer_waits({lock_ok("c2", "b", 2, 0, 5, 5000), busy("c0", 100, 3100)}, 2500)
            .violations == 0);
  CHECK(check_writer_waits({set_ok("c2", "b", {"r1", "r0"}, 2, 0, 5, 5000), busy("c0", 100, 3100)},
                           2500)
            .violations == 0);
  // A permit of a semaphore named like the resource holds nothing of it.
  CHECK(check_writer_waits(
            {on(permit_ok("c2", "b", 0, 2, 0, 5, 5000), "r0"), busy("c0", 100, 3100)}, 2500)
            .violations == 1);
}
