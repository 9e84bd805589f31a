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
