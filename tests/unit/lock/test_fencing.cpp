#include "redlockd/lock/fencing.hpp"
#include "redlockd/resp/resp.hpp"
#include "redlockd/resp/scripts.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <string>

using namespace redlockd;

TEST_CASE("proposals are unique and above everything observed", "[fencing]") {
  fence_register hw;
  CHECK(hw.propose() == 1);
  CHECK(hw.propose() == 2);
  hw.observe(100);
  CHECK(hw.high_water() == 100);
  hw.observe(50); // a lower counter never lowers the mark
  CHECK(hw.propose() == 101);
  CHECK(hw.high_water() == 101);
}

TEST_CASE("a proposal is at least its floor, and never wraps", "[fencing]") {
  fence_register hw;
  CHECK(hw.propose(5000) == 5000);
  CHECK(hw.propose(5000) == 5001); // unique within the same floor
  CHECK(hw.propose(10) == 5002);   // a floor behind the mark is no step back
  hw.observe(fence_register::max_token - 1);
  CHECK(hw.propose() == fence_register::max_token);
  CHECK(hw.propose() == fence_register::max_token); // the rounds then conflict: no wrap to 0
}

TEST_CASE("a round without conflict keeps its proposal", "[fencing]") {
  fence_round round(10);
  CHECK(round.accept(0));
  CHECK(round.accept(9));
  CHECK(round.accept(3));
  CHECK_FALSE(round.conflict());
  CHECK(round.max_previous() == 9);
}

TEST_CASE("a node that saw the proposal or more is a conflict", "[fencing]") {
  fence_round equal(10);
  CHECK_FALSE(equal.accept(10));
  CHECK(equal.conflict());

  fence_round above(10);
  CHECK(above.accept(2));
  CHECK_FALSE(above.accept(42));
  CHECK(above.accept(5));
  CHECK(above.conflict());
  CHECK(above.max_previous() == 42);
}

TEST_CASE("counters parse as plain uint64 decimals", "[fencing]") {
  std::uint64_t value = 7;
  CHECK(parse_counter("", 0, value));
  CHECK(value == 0);
  CHECK(parse_counter("18446744073709551615", 20, value));
  CHECK(value == 18446744073709551615ull);
  CHECK_FALSE(parse_counter("18446744073709551616", 20, value));
  CHECK_FALSE(parse_counter("-1", 2, value));
  CHECK_FALSE(parse_counter("12a", 3, value));
  CHECK_FALSE(parse_counter("1.5", 3, value));
}

TEST_CASE("scripts are named by the SHA1 of their source", "[fencing]") {
  std::set<std::string> shas;
  for (std::size_t i = 0; i < script_count; ++i) {
    const std::string_view sha = script_sha(static_cast<script>(i));
    CHECK(sha.size() == 40);
    CHECK(sha.find_first_not_of("0123456789abcdef") == std::string_view::npos);
    shas.insert(std::string(sha));
  }
  CHECK(shas.size() == script_count);
  // Each is named by the SHA1 of its text as sent (what SCRIPT LOAD answers; every connection
  // also checks every script against it), and the SHA1 is the standard one (FIPS 180 examples).
  for (std::size_t i = 0; i < script_count; ++i)
    CHECK(script_sha(static_cast<script>(i)) == sha1_hex(script_source(static_cast<script>(i))));
  CHECK(sha1_hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
  CHECK(sha1_hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  CHECK(sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
}
