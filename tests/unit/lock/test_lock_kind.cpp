// The lock family's table and owner tags (lock_kind.hpp).
#include "redlockd/lock/lock_kind.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <string>

using namespace redlockd;

namespace {

owner_id owner_of(std::string_view text) {
  owner_id out{};
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = text[i];
  return out;
}

const owner_id random_bits = owner_of("9f1c2e0b7a6d4c3b2a19f8e7d6c5b4a392817065");

} // namespace

TEST_CASE("every kind has a row, named, with its own scripts", "[kinds]") {
  std::set<std::string_view> names;
  std::set<script> scripts;
  for (std::size_t i = 0; i < lock_kind_count; ++i) {
    const lock_kind_traits& row = traits_of(static_cast<lock_kind>(i));
    CHECK(row.kind == static_cast<lock_kind>(i));
    names.insert(row.name);
    scripts.insert({row.acquire, row.release, row.extend});
  }
  CHECK(names == std::set<std::string_view>{"exclusive", "shared", "permit", "multi"});
  CHECK(scripts.size() == 3 * lock_kind_count);
  CHECK(traits_of(lock_kind::permit).votes == vote_rule::same_slot);
  CHECK(traits_of(lock_kind::exclusive).votes == vote_rule::any_grant);
  CHECK(traits_of(lock_kind::shared).waiters_may_share);
  CHECK_FALSE(traits_of(lock_kind::exclusive).waiters_may_share);
}

TEST_CASE("owners say their kind and a permit's slot", "[kinds]") {
  CHECK(tag_owner(random_bits, lock_kind::exclusive) == random_bits);
  const owner_id shared = tag_owner(random_bits, lock_kind::shared);
  CHECK(view(shared) == "00001000" + std::string(view(random_bits).substr(8)));
  CHECK(kind_of_owner(view(shared)) == lock_kind::shared);
  CHECK(slot_of_owner(view(shared)) == 0);
  const owner_id permit = tag_owner(random_bits, lock_kind::permit, 0x3ff);
  CHECK(view(permit).substr(0, 8) == "000023ff");
  CHECK(kind_of_owner(view(permit)) == lock_kind::permit);
  CHECK(slot_of_owner(view(permit)) == 1023);
  CHECK(kind_of_owner(view(tag_owner(random_bits, lock_kind::multi))) == lock_kind::multi);
  CHECK(kind_of_owner(view(random_bits)) == lock_kind::exclusive);
  CHECK_FALSE(is_tagged(view(random_bits)));
  CHECK(is_tagged(view(shared)));
  // A tag naming no kind reads as exclusive: the exclusive scripts then compare the whole owner.
  CHECK(kind_of_owner("00000000aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa") == lock_kind::exclusive);
  CHECK(kind_of_owner("00009000aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa") == lock_kind::exclusive);
  // The script's slot arithmetic (lib/permit.lua with_slot) writes the same digits.
  CHECK(view(tag_owner(random_bits, lock_kind::permit, 2)).substr(0, 8) == "00002002");
}

TEST_CASE("the rows say how each kind waits, hands over and decides", "[kinds]") {
  // Only the exclusive lock hands over in one script; every kind leaves wait marks.
  for (std::size_t i = 0; i < lock_kind_count; ++i) {
    const lock_kind_traits& row = traits_of(static_cast<lock_kind>(i));
    CHECK(row.hands_over == (row.kind == lock_kind::exclusive));
    CHECK(row.leaves_marks);
    CHECK(row.acquire_request ==
          (row.kind == lock_kind::permit ? request_kind::acquire_slot : request_kind::acquire));
  }
  CHECK(traits_of(lock_kind::permit).waiters_may_share);
  CHECK_FALSE(traits_of(lock_kind::multi).waiters_may_share);
}

TEST_CASE("a set's name is its member keys joined by a byte no resource has", "[kinds]") {
  CHECK(members_of("a") == std::vector<std::string_view>{"a"});
  CHECK(members_of("p:a\np:b\np:c") == std::vector<std::string_view>{"p:a", "p:b", "p:c"});
}

TEST_CASE("each row writes its calls with the keys and arguments its script reads", "[kinds]") {
  const register_keys keys("redlockd:fence");
  std::string out;
  std::string scratch;
  const owner_id owner = tag_owner(random_bits, lock_kind::permit);
  acquire_call call{view(owner), "", 5000, 42, 1, nullptr};
  traits_of(lock_kind::permit)
      .write_acquire(out, script_by::sha, {lock_kind::permit, "s permits", 3}, keys, call, scratch);
  // EVALSHA sha 3 <'s permits'> fence max_ttl owner ttl proposal n first label
  CHECK(out.find("$9\r\ns permits\r\n") != std::string::npos);
  CHECK(out.find("$1\r\n3\r\n$1\r\n1\r\n$0\r\n\r\n") != std::string::npos);
  out.clear();
  wait_mark mark{"ignored", 900, "d1d1d1d1d1d1d1d1", 42, 200, 0};
  call.mark = &mark;
  traits_of(lock_kind::multi)
      .write_acquire(out, script_by::sha, {lock_kind::multi, "a\nb", 0}, keys, call, scratch);
  // KEYS: fence, max-TTL, a, b; then the wait's five, the label and the marks' prefix.
  CHECK(out.starts_with("*17\r\n$7\r\nEVALSHA\r\n"));
  CHECK(out.find("$1\r\n4\r\n$14\r\nredlockd:fence") != std::string::npos);
  CHECK(out.ends_with("$23\r\nredlockd:fence:waiting:\r\n"));
}
