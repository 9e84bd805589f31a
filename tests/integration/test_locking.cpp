// Locking semantics end to end, checked on the Redis masters themselves.
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

// Another valid owner: the same one with its first hex digit changed.
std::string other_owner(const std::string& owner) {
  std::string other = owner;
  other[0] = other[0] == '0' ? '1' : '0';
  return other;
}

} // namespace

TEST_CASE("LOCK, BUSY, UNLOCK and NOTHELD, as seen on the masters", "[integration]") {
  fleet_and_daemon env;
  auto c = env.client();

  const auto reply = c.request("LOCK res 10000");
  CAPTURE(reply);
  const auto grant = parse_lock_ok(reply);
  REQUIRE(grant);
  CHECK(is_owner(grant->owner));
  CHECK(grant->fence > 0);
  CHECK(grant->validity_ms > 0);
  CHECK(grant->validity_ms <= 10000 - 102); // ttl - drift, drift = ttl * 0.01 + 2

  // The reply came at quorum; the other masters grant it too, a little later.
  CHECK(nodes_holding(env.fleet, "res", grant->owner).size() >= 3);
  REQUIRE(eventually([&] { return nodes_holding(env.fleet, "res", grant->owner).size() == 5; }));
  const auto holders = nodes_holding(env.fleet, "res", grant->owner);
  for (const auto i : holders) {
    CAPTURE(i);
    const auto pttl = env.fleet.pttl(i, "res");
    CHECK(pttl > 0);
    CHECK(pttl <= 10000);
  }

  // A second LOCK of the same resource is refused with a retry hint within the TTL.
  const auto busy = c.request("LOCK res 10000");
  CAPTURE(busy);
  REQUIRE(starts_with(busy, "BUSY "));
  const auto retry = word_int(busy, 1);
  REQUIRE(retry);
  CHECK(*retry > 0);
  CHECK(*retry <= 10000);
  CHECK(split_words(busy).size() == 2);
  // The holder's keys are untouched, and the refused attempt left no key of its own.
  CHECK(nodes_holding(env.fleet, "res", grant->owner) == holders);
  CHECK(lock_keys(env.fleet).size() == holders.size());

  // From another connection too.
  auto c2 = env.client();
  CHECK(starts_with(c2.request("LOCK res 5000"), "BUSY "));

  // UNLOCK with a valid owner that does not hold it: NOTHELD, keys unchanged.
  CHECK(c.request("UNLOCK res " + other_owner(grant->owner)) == "NOTHELD");
  CHECK(nodes_holding(env.fleet, "res", grant->owner) == holders);
  // UNLOCK of another resource with the right owner: NOTHELD.
  CHECK(c.request("UNLOCK other " + grant->owner) == "NOTHELD");
  CHECK(nodes_holding(env.fleet, "res", grant->owner) == holders);

  // The right owner, from another connection: OK, and the keys are gone everywhere.
  CHECK(c2.request("UNLOCK res " + grant->owner) == "OK");
  for (std::size_t i = 0; i < env.fleet.size(); ++i) {
    CAPTURE(i);
    CHECK_FALSE(env.fleet.get(i, "res"));
  }
  CHECK(c.request("UNLOCK res " + grant->owner) == "NOTHELD");

  // Free again: a new owner and a larger fence.
  const auto again = parse_lock_ok(c.request("LOCK res 10000"));
  REQUIRE(again);
  CHECK(again->owner != grant->owner);
  CHECK(again->fence > grant->fence);
}

TEST_CASE("independent resources do not exclude each other", "[integration]") {
  fleet_and_daemon env;
  auto c = env.client();
  const auto a = parse_lock_ok(c.request("LOCK a 10000"));
  const auto b = parse_lock_ok(c.request("LOCK b 10000"));
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->owner != b->owner);
  CHECK(a->fence != b->fence);
  CHECK(c.request("UNLOCK a " + b->owner) == "NOTHELD");
  CHECK(c.request("UNLOCK a " + a->owner) == "OK");
  CHECK(nodes_holding(env.fleet, "b", b->owner).size() >= 3);
}

TEST_CASE("EXTEND raises the TTL on the masters - a wrong owner cannot", "[integration]") {
  fleet_and_daemon env;
  auto c = env.client();
  const auto grant = parse_lock_ok(c.request("LOCK res 1000"));
  REQUIRE(grant);

  const auto reply = c.request("EXTEND res " + grant->owner + " 60000");
  CAPTURE(reply);
  REQUIRE(starts_with(reply, "OK "));
  REQUIRE(split_words(reply).size() == 2);
  const auto validity = word_int(reply, 1);
  REQUIRE(validity);
  CHECK(*validity > 0);
  CHECK(*validity <= 60000 - 602);

  const auto holders = nodes_holding(env.fleet, "res", grant->owner);
  CHECK(holders.size() >= 3);
  for (const auto i : holders) {
    CAPTURE(i);
    const auto pttl = env.fleet.pttl(i, "res");
    CHECK(pttl > 1000);
    CHECK(pttl <= 60000);
  }

  // A wrong owner gets NOTHELD and the TTL is not raised.
  CHECK(c.request("EXTEND res " + other_owner(grant->owner) + " 120000") == "NOTHELD");
  for (const auto i : holders) {
    CAPTURE(i);
    CHECK(env.fleet.pttl(i, "res") <= 60000);
    CHECK(env.fleet.get(i, "res") == grant->owner);
  }
  // EXTEND of a resource nobody holds.
  CHECK(c.request("EXTEND nobody " + grant->owner + " 1000") == "NOTHELD");
  CHECK_FALSE(env.fleet.get(0, "nobody"));

  // EXTEND can also shorten; then after UNLOCK it is NOTHELD.
  CHECK(starts_with(c.request("EXTEND res " + grant->owner + " 5000"), "OK "));
  for (const auto i : nodes_holding(env.fleet, "res", grant->owner)) {
    CHECK(env.fleet.pttl(i, "res") <= 5000);
  }
  CHECK(c.request("UNLOCK res " + grant->owner) == "OK");
  CHECK(c.request("EXTEND res " + grant->owner + " 5000") == "NOTHELD");
  CHECK(lock_keys(env.fleet).empty());
}

TEST_CASE("the TTL frees the lock", "[integration]") {
  fleet_and_daemon env;
  auto c = env.client();
  // Long enough for the BUSY below to come before it ends on any machine, short for a test.
  const auto grant = parse_lock_ok(c.request("LOCK res 2000"));
  REQUIRE(grant);
  CHECK(grant->validity_ms <= 2000 - 22); // ttl - drift, drift = ttl * 0.01 + 2
  REQUIRE(eventually([&] { return nodes_holding(env.fleet, "res", grant->owner).size() == 5; }));
  const long long expired_before = expired_keys(env.fleet);
  const auto busy = c.request("LOCK res 10000");
  CAPTURE(busy);
  REQUIRE(starts_with(busy, "BUSY "));
  const auto retry = word_int(busy, 1);
  REQUIRE(retry);
  CHECK(*retry <= 2000);

  // The masters expire the keys themselves: nobody deleted them.
  REQUIRE(eventually([&] { return expired_keys(env.fleet) - expired_before >= 5; }));
  CHECK(lock_keys(env.fleet).empty());

  const auto next = parse_lock_ok(c.request("LOCK res 10000"));
  REQUIRE(next);
  CHECK(next->owner != grant->owner);
  CHECK(next->fence > grant->fence);
  // The expired owner can neither release nor extend the new holder's lock.
  CHECK(c.request("UNLOCK res " + grant->owner) == "NOTHELD");
  CHECK(c.request("EXTEND res " + grant->owner + " 10000") == "NOTHELD");
  CHECK(nodes_holding(env.fleet, "res", next->owner).size() >= 3);
}

TEST_CASE("every lock key carries a TTL - only the fence key does not", "[integration]") {
  fleet_and_daemon env;
  auto c = env.client();
  std::vector<lock_grant> grants;
  for (int i = 0; i < 10; ++i) {
    const auto grant = parse_lock_ok(
        c.request("LOCK r" + std::to_string(i) + " " + std::to_string(1000 * (i + 1))));
    REQUIRE(grant);
    grants.push_back(*grant);
  }
  CHECK(starts_with(c.request("LOCK r3 1000"), "BUSY "));
  CHECK(starts_with(c.request("EXTEND r1 " + grants[1].owner + " 30000"), "OK "));
  CHECK(c.request("UNLOCK r2 " + grants[2].owner) == "OK");
  CHECK(c.request("UNLOCK r4 " + other_owner(grants[4].owner)) == "NOTHELD");

  std::size_t fence_keys = 0;
  std::size_t lock_keys_seen = 0;
  for (std::size_t i = 0; i < env.fleet.size(); ++i) {
    for (const auto& key : env.fleet.keys(i)) {
      CAPTURE(i, key);
      const auto pttl = env.fleet.pttl(i, key);
      if (key == default_fence_key || key == max_ttl_key()) {
        // The daemon's two metadata keys, the only ones without a TTL.
        ++fence_keys;
        CHECK(pttl == -1);
      } else {
        ++lock_keys_seen;
        CHECK(pttl > 0);
        CHECK(pttl <= 30000);
        CHECK(key != "r2");
      }
    }
  }
  CHECK(fence_keys >= 3);
  CHECK(lock_keys_seen >= 9 * 3);
}

TEST_CASE("key_prefix and fence_key from the config name the Redis keys", "[integration]") {
  fleet_and_daemon env(nlohmann::json{{"key_prefix", "app1:"}, {"fence_key", "app1:fence"}});
  auto c = env.client();
  const auto grant = parse_lock_ok(c.request("LOCK res 10000"));
  REQUIRE(grant);
  CHECK(nodes_holding(env.fleet, "app1:res", grant->owner).size() >= 3);
  std::size_t fence_keys = 0;
  for (std::size_t i = 0; i < env.fleet.size(); ++i) {
    CAPTURE(i);
    CHECK_FALSE(env.fleet.get(i, "res"));
    CHECK(env.fleet.pttl(i, default_fence_key) == -2);
    const auto fence = env.fleet.get(i, "app1:fence");
    if (fence) {
      ++fence_keys;
      CHECK(env.fleet.pttl(i, "app1:fence") == -1);
    }
  }
  CHECK(fence_keys >= 3);

  // A key held by hand under the prefixed name excludes the daemon; the bare name does not.
  for (std::size_t i = 0; i < 3; ++i) {
    REQUIRE(env.fleet.set_nx_px(i, "app1:other", "someone", 10000));
    REQUIRE(env.fleet.set_nx_px(i, "bare", "someone", 10000));
  }
  CHECK(starts_with(c.request("LOCK other 10000"), "BUSY "));
  CHECK(parse_lock_ok(c.request("LOCK bare 10000")));
  CHECK(c.request("UNLOCK res " + grant->owner) == "OK");
  CHECK(env.fleet.keys(0, "app1:res").empty());
}

TEST_CASE("a 256-byte resource of every printable byte maps to the same Redis key",
          "[integration]") {
  fleet_and_daemon env;
  auto c = env.client();
  std::string resource;
  for (int k = 0; resource.size() < 256; ++k) {
    resource.push_back(static_cast<char>(0x21 + k % (0x7e - 0x21 + 1)));
  }
  const auto grant = parse_lock_ok(c.request("LOCK " + resource + " 10000"));
  REQUIRE(grant);
  CHECK(nodes_holding(env.fleet, resource, grant->owner).size() >= 3);
  CHECK(starts_with(c.request("LOCK " + resource + " 10000"), "BUSY "));
  CHECK(c.request("UNLOCK " + resource + " " + grant->owner) == "OK");
  CHECK(lock_keys(env.fleet).empty());
}

TEST_CASE("locks exclude, and are excluded by, plain Redis clients on the same keys",
          "[integration]") {
  fleet_and_daemon env;
  auto c = env.client();

  // Someone else holds "res" on 3 of 5 masters with SET NX PX.
  for (std::size_t i = 0; i < 3; ++i) {
    REQUIRE(env.fleet.set_nx_px(i, "res", "intruder", 10000));
  }
  const auto busy = c.request("LOCK res 5000");
  CAPTURE(busy);
  REQUIRE(starts_with(busy, "BUSY "));
  const auto retry = word_int(busy, 1);
  REQUIRE(retry);
  CHECK(*retry > 0);
  CHECK(*retry <= 10000);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(env.fleet.get(i, "res") == "intruder");
  }
  for (std::size_t i = 3; i < 5; ++i) {
    CAPTURE(i);
    CHECK_FALSE(env.fleet.get(i, "res")); // the failed attempt was released
  }

  // The other way round: the daemon's lock makes SET NX fail on every master holding it.
  const auto grant = parse_lock_ok(c.request("LOCK mine 10000"));
  REQUIRE(grant);
  const auto holders = nodes_holding(env.fleet, "mine", grant->owner);
  CHECK(holders.size() >= 3);
  for (const auto i : holders) {
    CHECK_FALSE(env.fleet.set_nx_px(i, "mine", "intruder", 10000));
  }
}
