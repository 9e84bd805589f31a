// LIST and BREAK: the pure decisions (the rounds run against real masters in
// tests/integration/test_operating_locks.cpp).
#include "redlockd/lock/lock_operator.hpp"

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

using namespace redlockd;
using namespace std::chrono_literals;

namespace {

using answers = std::vector<std::optional<std::int64_t>>;
const std::optional<std::int64_t> silent;

break_verdict decide(const answers& a) {
  return decide_break(std::span<const std::optional<std::int64_t>>(a.data(), a.size()));
}

node_listing scanned(std::vector<listed_hold> holds, bool complete = true) {
  return {true, complete, std::move(holds)};
}

listing merge(const std::vector<node_listing>& nodes, std::uint32_t count = 100) {
  return merge_listings(nodes, "app:", count, 0us, 0.0);
}

} // namespace

TEST_CASE("LIST's pattern escapes glob characters of the prefix", "[unit][operate]") {
  CHECK(list_pattern("", "") == "*");
  CHECK(list_pattern("app:", "jobs/") == "app:jobs/*");
  CHECK(list_pattern("a*", "b?[c]\\") == "a\\*b\\?\\[c\\]\\\\*");
}

TEST_CASE("BREAK is OK where any master ended a hold, NOTHELD only with a quorum",
          "[unit][operate]") {
  CHECK(decide({1, 1, 1, 0, 0}).outcome == break_verdict::kind::ended);
  CHECK(decide({1, silent, silent, silent, silent}).outcome == break_verdict::kind::ended);
  CHECK(decide({0, 0, 0, silent, silent}).outcome == break_verdict::kind::not_held);
  const break_verdict few = decide({0, 0, silent, silent, silent});
  CHECK(few.outcome == break_verdict::kind::noquorum);
  CHECK(few.answered == 2);
  CHECK(few.needed == 3);
}

TEST_CASE("LIST keeps keys held on a quorum, sorted, with their labels", "[unit][operate]") {
  const listed_hold a{"app:a", 9000, "web:1"};
  const listed_hold a_short{"app:a", 4000, "web:1"};
  const listed_hold b{"app:b", 5000, ""};
  const listed_hold c{"app:c", 7000, "x"};
  const std::vector<node_listing> nodes = {scanned({c, b, a}), scanned({a, c}),
                                           scanned({a_short, c, b}), scanned({}), node_listing{}};
  const listing out = merge(nodes);
  REQUIRE(out.quorum);
  CHECK_FALSE(out.truncated);
  REQUIRE(out.locks.size() == 2); // app:b is on 2 of 5 masters only
  CHECK(out.locks[0].resource == "a");
  CHECK(out.locks[0].kind == "exclusive");
  // STATUS's rule: the (N-Q+1)-th largest PTTL, a silent master counting as nothing known.
  CHECK(out.locks[0].ttl_ms == 4000 - 2); // less the 2 ms drift allowance
  CHECK(out.locks[0].labels == std::vector<std::string>{"web:1"});
  CHECK(out.locks[1].resource == "c");

  const listing first = merge(nodes, 1);
  REQUIRE(first.locks.size() == 1);
  CHECK(first.truncated);
}

TEST_CASE("LIST needs a quorum of masters, and says when a scan stopped short", "[unit][operate]") {
  const listed_hold a{"app:a", 9000, ""};
  const listing few = merge({scanned({a}), scanned({a}), {}, {}, {}});
  CHECK_FALSE(few.quorum);
  CHECK(few.answered == 2);
  CHECK(few.needed == 3);
  const listing partial = merge({scanned({a}), scanned({a}), scanned({a}, false), {}, {}});
  CHECK(partial.quorum);
  CHECK(partial.truncated);
  CHECK(partial.locks.size() == 1);
  CHECK(format_listing(partial) ==
        "OK {\"locks\":[{\"holders\":1,\"kind\":\"exclusive\",\"labels\":[],"
        "\"resource\":\"a\",\"ttl_ms\":8998}],\"truncated\":true}\n");
}

TEST_CASE("LIST names each kind: shared holders and semaphores by their side keys",
          "[unit][operate]") {
  const std::vector<listed_hold> holds = {{"app:doc readers", 9000, "", 3},
                                          {"app:pool permits", 5000, "w-1", 2},
                                          {"app:x", 7000, "", 1}};
  const std::vector<listed_hold> fewer = {
      {"app:doc readers", 8000, "", 2}, {"app:pool permits", 4000, "", 1}, {"app:x", 7000, "", 1}};
  const listing result =
      merge({scanned(holds), scanned(holds), scanned(fewer), scanned(fewer), scanned(fewer)});
  REQUIRE(result.locks.size() == 3);
  CHECK(result.locks[0].resource == "doc");
  CHECK(result.locks[0].kind == "shared");
  // Counted as STATUS counts: the (N-Q+1)-th largest, held on enough masters to refuse a LOCK.
  CHECK(result.locks[0].holders == 2);
  CHECK(result.locks[1].resource == "pool");
  CHECK(result.locks[1].kind == "permit");
  CHECK(result.locks[1].holders == 1);
  CHECK(result.locks[1].labels == std::vector<std::string>{"w-1"});
  CHECK(result.locks[2].kind == "exclusive");
  CHECK(format_listing(result).find(R"("holders":2,"kind":"shared")") != std::string::npos);
}
