// The wait-marker scripts (src/lua, as the daemon embeds them) run by a real master: the
// daemons' head waiters go in ticket order, entries live about until the next try, a granted
// lock's release wakes other daemons and gives their entries only the slack, a failed attempt's
// release wakes nobody.
#include "redlockd/resp/scripts.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "test_env.hpp"

using namespace redlockd::test;
using redlockd::script;
using redlockd::script_source;

namespace {

const std::string daemon_a = "aaaaaaaaaaaaaaaa";
const std::string daemon_b = "bbbbbbbbbbbbbbbb";
const std::string marker = wait_marker("k");

redis_reply eval(const redis_fleet& fleet, script s, std::vector<std::string> keys,
                 const std::vector<std::string>& args) {
  std::vector<std::string> command = {"EVAL", std::string(script_source(s)),
                                      std::to_string(keys.size())};
  command.insert(command.end(), keys.begin(), keys.end());
  command.insert(command.end(), args.begin(), args.end());
  return fleet.command(0, command);
}

// A waiter's attempt: acquire_wait with a 10 s TTL, 8 s left to wait, a slack of 200 ms, and
// `behind` ms left to the wait of the daemon's next waiter ("0": none).
redis_reply attempt(const redis_fleet& fleet, const std::string& daemon, const std::string& ticket,
                    const std::string& owner, const std::string& behind = "0") {
  return eval(fleet, script::acquire_wait, {"k", default_fence_key, max_ttl_key(), marker},
              {owner, "10000", ticket, "8000", daemon, ticket, "200", behind});
}

redis_reply release(const redis_fleet& fleet, const std::string& owner, const std::string& daemon,
                    bool granted) {
  return eval(fleet, script::release, {"k", marker},
              {owner, granted ? daemon + " 200 redlockd:fence:wake" : ""});
}

// A fence register, as a daemon seeds every master before it votes.
void seed_fence(const redis_fleet& fleet) {
  REQUIRE(fleet.run(0, "SET", default_fence_key, "0").str == "OK");
}

std::string entries(const redis_fleet& fleet) {
  return fleet.get(0, marker).value_or("");
}

} // namespace

TEST_CASE("wait marks: the daemons' heads go in ticket order, a grant takes the entry out",
          "[integration][wake][fairness]") {
  redis_fleet fleet(1);
  seed_fence(fleet);
  REQUIRE(fleet.set_nx_px(0, "k", "holder", 5000));
  // Refused by the holder: each marks until about its next try (the holder's TTL, 1 %, the slack).
  redis_reply a = attempt(fleet, daemon_a, "20", "owner-a");
  REQUIRE(a.elements.size() == 5);
  CHECK(a.elements[0].integer == 0);
  CHECK(a.elements[1].integer > 4900);
  CHECK(a.elements[4].str == "0"); // nobody else waits
  redis_reply b = attempt(fleet, daemon_b, "10", "owner-b");
  CHECK(b.elements[4].str == "20"); // a waits with ticket 20: b's daemon learns it
  CHECK(entries(fleet).find(daemon_a + " 20 ") != std::string::npos);
  CHECK(entries(fleet).find(daemon_b + " 10 ") != std::string::npos);
  const long long marked = fleet.pttl(0, marker);
  CHECK(marked > 5000);
  CHECK(marked <= 5000 + 50 + 200);
  // The holder's key goes (it expired, say): b's head is older, a's is refused though the lock
  // is free, and told when b's entry ends.
  fleet.run(0, "DEL", "k");
  a = attempt(fleet, daemon_a, "20", "owner-a");
  CHECK(a.elements[0].integer == 0);
  CHECK(a.elements[1].integer > 4900);
  CHECK(a.elements[4].str == "10");
  CHECK_FALSE(fleet.get(0, "k"));
  b = attempt(fleet, daemon_b, "10", "owner-b");
  CHECK(b.elements[0].integer == 1);
  CHECK(fleet.get(0, "k") == "owner-b");
  CHECK(entries(fleet).find(daemon_b) == std::string::npos);
  CHECK(entries(fleet).find(daemon_a + " 20 ") != std::string::npos);
  // Equal tickets: the smaller daemon id first.
  fleet.run(0, "DEL", "k");
  b = attempt(fleet, daemon_b, "20", "owner-b");
  CHECK(b.elements[0].integer == 0);
  a = attempt(fleet, daemon_a, "20", "owner-a");
  CHECK(a.elements[0].integer == 1);
}

TEST_CASE("wait marks: only a granted lock's release wakes another daemon, whose entry then "
          "counts for the slack only",
          "[integration][wake][fairness]") {
  redis_fleet fleet(1);
  seed_fence(fleet);
  REQUIRE(fleet.set_nx_px(0, "k", "holder", 5000));
  attempt(fleet, daemon_b, "10", "owner-b"); // b waits
  const auto published = [&] { return command_calls(fleet, 0, "publish"); };
  // A failed attempt's release wakes nobody and leaves b's entry as it was.
  fleet.run(0, "DEL", "k");
  REQUIRE(fleet.set_nx_px(0, "k", "attempt", 5000));
  CHECK(release(fleet, "attempt", daemon_a, false).integer == 1);
  CHECK(published() == 0);
  CHECK(fleet.pttl(0, marker) > 4000);
  // b's own release publishes nothing: its daemon wakes its waiters itself.
  REQUIRE(fleet.set_nx_px(0, "k", "holder", 5000));
  CHECK(release(fleet, "holder", daemon_b, true).integer == 1);
  CHECK(published() == 0);
  // Another daemon's release of a granted lock wakes b, and b's entry counts for 200 ms more.
  REQUIRE(fleet.set_nx_px(0, "k", "holder", 5000));
  CHECK(release(fleet, "holder", daemon_a, true).integer == 1);
  CHECK(published() == 1);
  CHECK(fleet.pttl(0, marker) <= 200);
  // A release that finds the key gone or taken over publishes nothing.
  CHECK(release(fleet, "holder", daemon_a, true).integer == -1);
  REQUIRE(fleet.set_nx_px(0, "k", "someone", 5000));
  CHECK(release(fleet, "holder", daemon_a, true).integer == 0);
  CHECK(published() == 1);
}

TEST_CASE("wait marks: unmark takes one daemon's entry out, the marker goes with its last",
          "[integration][wake][fairness]") {
  redis_fleet fleet(1);
  seed_fence(fleet);
  REQUIRE(fleet.set_nx_px(0, "k", "holder", 5000));
  attempt(fleet, daemon_a, "20", "owner-a");
  attempt(fleet, daemon_b, "10", "owner-b");
  CHECK(eval(fleet, script::unmark, {marker, "k"}, {daemon_b}).integer == 1);
  CHECK(entries(fleet).find(daemon_b) == std::string::npos);
  CHECK(entries(fleet).find(daemon_a) != std::string::npos);
  CHECK(eval(fleet, script::unmark, {marker, "k"}, {daemon_a}).integer == 1);
  CHECK(fleet.pttl(0, marker) == -2);
  CHECK(eval(fleet, script::unmark, {marker, "k"}, {daemon_a}).integer == 0);
}

TEST_CASE("wait marks: a hand-over yields to another daemon's older head, releasing and waking",
          "[integration][handover][fairness]") {
  redis_fleet fleet(1);
  seed_fence(fleet);
  REQUIRE(fleet.set_nx_px(0, "k", "holder", 5000));
  attempt(fleet, daemon_b, "10", "owner-b"); // b's head waits with ticket 10
  const auto hand_over = [&](const std::string& ticket) {
    return eval(fleet, script::hand_over, {"k", default_fence_key, max_ttl_key(), marker},
                {"owner-a", "10000", "30", "8000", daemon_a, ticket, "200", "holder",
                 "redlockd:fence:wake", "0"});
  };
  // a's waiter has ticket 20: b goes first. The holder's key is released, b is woken.
  redis_reply h = hand_over("20");
  REQUIRE(h.elements.size() == 6);
  CHECK(h.elements[0].integer == 0); // the waiter is refused
  CHECK(h.elements[4].integer == 1); // the releaser's key was deleted
  CHECK(h.elements[5].str == "10");  // b's ticket
  CHECK_FALSE(fleet.get(0, "k"));
  CHECK(command_calls(fleet, 0, "publish") == 1);
  CHECK(entries(fleet).find(daemon_a + " 20 ") != std::string::npos); // a waits now
  // With ticket 5, a's waiter is older than b's: handed over.
  REQUIRE(fleet.set_nx_px(0, "k", "holder", 5000));
  h = hand_over("5");
  CHECK(h.elements[0].integer == 1);
  CHECK(h.elements[4].integer == 1);
  CHECK(fleet.get(0, "k") == "owner-a");
  CHECK(entries(fleet).find(daemon_a) == std::string::npos);
  // b sleeps until about the old holder's end, before the new holder's: nobody is woken.
  CHECK(command_calls(fleet, 0, "publish") == 1);
  // A master that lost its data (FLUSHALL): nothing granted, no fence key created.
  fleet.run(0, "FLUSHALL");
  h = hand_over("5");
  CHECK(h.elements[0].integer == -2);
  CHECK(h.elements[4].integer == -1);
  CHECK(fleet.keys(0).empty());
}

TEST_CASE(
    "wait marks: a grant with a waiter behind keeps the daemon's entry for it, and a hand-over "
    "to a TTL shorter than another daemon's sleep wakes that daemon",
    "[integration][handover][wake]") {
  redis_fleet fleet(1);
  seed_fence(fleet);
  // a's head is granted the free lock while a's next waiter still waits 3 s: a's entry stays,
  // ticketed with the grant's proposal (after every head waiting now), until about the lock's
  // end, capped by that waiter's wait.
  redis_reply a = eval(fleet, script::acquire_wait, {"k", default_fence_key, max_ttl_key(), marker},
                       {"owner-a", "10000", "40", "8000", daemon_a, "20", "200", "3000"});
  CHECK(a.elements[0].integer == 1);
  CHECK(entries(fleet).find(daemon_a + " 40 ") != std::string::npos);
  CHECK(fleet.pttl(0, marker) > 2900);
  CHECK(fleet.pttl(0, marker) <= 3000);
  // So a release through daemon b wakes a's next waiter.
  CHECK(release(fleet, "owner-a", daemon_b, true).integer == 1);
  CHECK(command_calls(fleet, 0, "publish") == 1);
  CHECK(eval(fleet, script::unmark, {marker, "k"}, {daemon_a}).integer == 1);

  // The kept entry comes after every head marked at the grant, even one whose ticket is above
  // the grant's proposal (tickets come from each daemon's own view of the fence): b's head
  // (ticket 60, refused by a holder) stays first, and takes the lock once it is free. With the
  // proposal (40) as the kept ticket, b's head yielded to an entry whose waiter was not trying
  // (simulator seed 70595).
  REQUIRE(fleet.set_nx_px(0, "k", "holder", 5000));
  CHECK(attempt(fleet, daemon_b, "60", "owner-b0").elements[0].integer == 0);
  REQUIRE(fleet.run(0, "DEL", "k").integer == 1);
  a = eval(fleet, script::acquire_wait, {"k", default_fence_key, max_ttl_key(), marker},
           {"owner-a1", "10000", "40", "8000", daemon_a, "20", "200", "3000"});
  CHECK(a.elements[0].integer == 1);
  CHECK(entries(fleet).find(daemon_a + " 61 ") != std::string::npos);
  REQUIRE(fleet.run(0, "DEL", "k").integer == 1);
  CHECK(attempt(fleet, daemon_b, "60", "owner-b1").elements[0].integer == 1);
  REQUIRE(fleet.run(0, "DEL", "k").integer == 1);
  CHECK(eval(fleet, script::unmark, {marker, "k"}, {daemon_a}).integer == 1);
  CHECK(fleet.get(0, marker) == std::nullopt);

  // b's head is refused by a holder with 5 s left and sleeps about that long. The holder's
  // UNLOCK hands the lock to a's older waiter with a 1 s TTL: b would sleep 4 s past a free
  // lock, so it is woken (refused again, it then sleeps the new holder's TTL).
  REQUIRE(fleet.set_nx_px(0, "k", "holder", 5000));
  attempt(fleet, daemon_b, "10", "owner-b");
  const redis_reply h =
      eval(fleet, script::hand_over, {"k", default_fence_key, max_ttl_key(), marker},
           {"owner-a2", "1000", "50", "8000", daemon_a, "5", "200", "holder", "redlockd:fence:wake",
            "0"});
  CHECK(h.elements[0].integer == 1);
  CHECK(fleet.get(0, "k") == "owner-a2");
  CHECK(command_calls(fleet, 0, "publish") == 2);
  CHECK(fleet.pttl(0, marker) <= 200); // b's entry: the slack to try once woken
}

TEST_CASE("wait marks: a hand-over where only its daemon's entry is marked keeps it as the full "
          "step does: the grant's ticket, about the new hold's time, the next waiter's cap",
          "[integration][handover][fairness]") {
  redis_fleet fleet(1);
  seed_fence(fleet);
  REQUIRE(fleet.run(0, "SET", max_ttl_key(), "10000").str == "OK");
  const auto hand_over = [&](const std::string& from, const std::string& to,
                             const std::string& ticket, const std::string& ttl,
                             const std::string& behind) {
    return eval(
        fleet, script::hand_over, {"k", default_fence_key, max_ttl_key(), marker},
        {to, ttl, "90", "8000", daemon_a, ticket, "200", from, "redlockd:fence:wake", behind});
  };
  // a's head was refused by a holder with 300 ms left: its entry lasts about 500 ms.
  REQUIRE(fleet.set_nx_px(0, "k", "holder", 300));
  CHECK(attempt(fleet, daemon_a, "20", "owner-a0", "6000").elements[0].integer == 0);
  REQUIRE(entries(fleet).rfind(daemon_a + " 20 ", 0) == 0);
  CHECK(fleet.pttl(0, marker) <= 510);
  // The holder hands over to a's head with a 10 s TTL, a next waiter queued for 6 s more: the
  // entry takes the grant's proposal as its ticket (the daemon's copy: kept_entry_ticket) and
  // lasts for the next waiter's 6 s, so that a release through another daemon wakes it.
  redis_reply h = hand_over("holder", "owner-a1", "20", "10000", "6000");
  REQUIRE(h.elements.size() == 6);
  CHECK(h.elements[0].integer == 1);
  CHECK(h.elements[4].integer == 1);
  CHECK(h.elements[5].str == "0");
  CHECK(fleet.get(0, "k") == "owner-a1");
  CHECK(entries(fleet).rfind(daemon_a + " 90 ", 0) == 0);
  CHECK(fleet.pttl(0, marker) > 5900);
  CHECK(fleet.pttl(0, marker) <= 6000);
  CHECK(release(fleet, "owner-a1", daemon_b, true).integer == 1);
  CHECK(command_calls(fleet, 0, "publish") == 1);
  // A hand-over to a 1 s TTL: about that long (TTL + 1 % + slack), not the next waiter's wait:
  // a daemon that goes away holds nobody back past it.
  REQUIRE(fleet.set_nx_px(0, "k", "owner-a2", 5000));
  h = hand_over("owner-a2", "owner-a3", "90", "1000", "6000");
  CHECK(h.elements[0].integer == 1);
  CHECK(fleet.pttl(0, marker) > 1100);
  CHECK(fleet.pttl(0, marker) <= 1210);
  // b's head comes (ticket 95): refused (owner-a3 holds k), it marks its entry.
  CHECK(attempt(fleet, daemon_b, "95", "owner-b").elements[0].integer == 0);
  // The next hand-over sees b's entry: a's waiter (ticket 90) is older and is granted, and a's
  // entry is kept after b's ticket, so the hand-over after it yields to b.
  h = hand_over("owner-a3", "owner-a4", "90", "10000", "6000");
  CHECK(h.elements[0].integer == 1);
  CHECK(h.elements[5].str == "95");
  CHECK(entries(fleet).find(daemon_a + " 96 ") != std::string::npos);
  h = hand_over("owner-a4", "owner-a5", "96", "10000", "6000");
  CHECK(h.elements[0].integer == 0);
  CHECK_FALSE(fleet.get(0, "k"));
  CHECK(command_calls(fleet, 0, "publish") == 2);
}

TEST_CASE("wait marks: a daemon's unmark wakes the heads that yielded their turn to its entry",
          "[integration][wake]") {
  // A head that yields to an older head sleeps on that head's entry (for a semaphore, on the
  // longest permit); when the older head's daemon gives up, its unmark wakes it. Without the
  // wake-up, a permit waiter slept past a free slot (simulator seed 72699).
  redis_fleet fleet(1);
  seed_fence(fleet);
  REQUIRE(fleet.set_nx_px(0, "k", "holder", 5000));
  CHECK(attempt(fleet, daemon_a, "10", "owner-a").elements[0].integer == 0);
  CHECK(attempt(fleet, daemon_b, "20", "owner-b").elements[0].integer == 0);
  CHECK(eval(fleet, script::unmark, {marker, "k"}, {daemon_a, "redlockd:fence:wake"}).integer == 1);
  CHECK(command_calls(fleet, 0, "publish") == 1);
  // b's unmark wakes nobody: a's entry is gone, and nobody yielded to b's.
  CHECK(eval(fleet, script::unmark, {marker, "k"}, {daemon_b, "redlockd:fence:wake"}).integer == 1);
  CHECK(command_calls(fleet, 0, "publish") == 1);
  // Nor does an unmark whose entry came after the others' (they did not yield to it).
  CHECK(attempt(fleet, daemon_a, "10", "owner-a2").elements[0].integer == 0);
  CHECK(attempt(fleet, daemon_b, "20", "owner-b2").elements[0].integer == 0);
  CHECK(eval(fleet, script::unmark, {marker, "k"}, {daemon_b, "redlockd:fence:wake"}).integer == 1);
  CHECK(command_calls(fleet, 0, "publish") == 1);
}
