// Hand-over's pure parts: when an UNLOCK hands over, and a master's answer to the hand_over
// script (decoded from real RESP bytes) read as the waiter's and the releaser's votes.
#include "redlockd/lock/decisions.hpp"
#include "redlockd/lock/handover.hpp"
#include "redlockd/resp/resp.hpp"
#include "redlockd/resp/script_calls.hpp"
#include "redlockd/resp/scripts.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace redlockd;

namespace {

const std::string time_fields = "$10\r\n1700000000\r\n$1\r\n0\r\n";
const std::string no_rival = "$1\r\n0\r\n"; // no other daemon's head waits there

hand_over_reply decoded(std::string_view bytes) {
  reply_reader reader;
  reader.feed(bytes);
  reply_ptr reply;
  REQUIRE(reader.next(reply) == reply_reader::status::reply);
  const script_reply value = decode_script_reply(request_kind::hand_over, *reply);
  REQUIRE(std::holds_alternative<hand_over_reply>(value));
  return std::get<hand_over_reply>(value);
}

} // namespace

TEST_CASE("an UNLOCK hands over only its own lease to a waiting head of an undelayed resource",
          "[handover]") {
  CHECK(hand_over_applies({true, true, true, false}));
  CHECK_FALSE(hand_over_applies({false, true, true, false})); // the owner is not the lease here
  CHECK_FALSE(hand_over_applies({true, false, true, false})); // no head, or its attempt is out
  CHECK_FALSE(hand_over_applies({true, true, false, false})); // the head's WAIT ran out
  CHECK_FALSE(hand_over_applies({true, true, true, true}));   // lock-delayed
}

TEST_CASE("the hand_over call carries acquire_wait's arguments, the releasing owner, the wake "
          "channel and the next waiter's wait",
          "[handover]") {
  const register_keys keys("redlockd:fence");
  std::string out;
  append_hand_over(out, script_by::sha, "k", keys, "new-owner", 3000, 42,
                   {"redlockd:fence:waiting:k", 900, "d1", 17, 200, 700}, "old-owner");
  std::string expected;
  append_command(expected,
                 {"EVALSHA", script_sha(script::hand_over), "4", "k", "redlockd:fence",
                  "redlockd:fence:max_ttl", "redlockd:fence:waiting:k", "new-owner", "3000", "42",
                  "900", "d1", "17", "200", "old-owner", "redlockd:fence:wake", "700"});
  CHECK(out == expected);
  out.clear();
  append_hand_over(out, script_by::source, "k", keys, "new-owner", 3000, 42,
                   {"redlockd:fence:waiting:k", 900, "d1", 17, 200}, "old-owner");
  CHECK(out.find(std::string(script_source(script::hand_over))) != std::string::npos);
}

TEST_CASE("a hand-over answer: the waiter's vote as an acquire's, the releaser's as a release's",
          "[handover]") {
  fence_register fences;
  fence_round round(10);
  std::uint64_t retry_ms = 0;
  bool gone = false;

  // The releaser's key was there: deleted, and the new owner's set in its place.
  hand_over_reply h = decoded("*6\r\n:1\r\n$1\r\n7\r\n" + time_fields + ":1\r\n" + no_rival);
  CHECK(count_acquire(h.grant, fences, round, retry_ms, 900).cast == vote::yes);
  CHECK(count_release(h.release, gone) == vote::yes);
  CHECK_FALSE(gone);
  CHECK(fences.high_water() == 7);

  // The key was gone: set as an acquisition sets it; the releaser's key is gone there.
  h = decoded("*6\r\n:1\r\n$1\r\n8\r\n" + time_fields + ":-1\r\n" + no_rival);
  CHECK(count_acquire(h.grant, fences, round, retry_ms, 900).cast == vote::yes);
  CHECK(count_release(h.release, gone) == vote::no);
  CHECK(gone);

  // Another owner holds it: refused with its TTL as the retry hint; not the releaser's either.
  h = decoded("*6\r\n:0\r\n:4500\r\n" + time_fields + ":0\r\n" + no_rival);
  CHECK(count_acquire(h.grant, fences, round, retry_ms, 900).cast == vote::no);
  CHECK(count_release(h.release, gone) == vote::no);
  CHECK_FALSE(gone);
  CHECK(retry_ms == 4500);

  // The master lost its data (neither the key nor the fence key): nothing granted, nor refused.
  h = decoded("*6\r\n:-1\r\n:0\r\n" + time_fields + ":-1\r\n" + no_rival);
  CHECK(count_acquire(h.grant, fences, round, retry_ms, 900).cast == vote::failed);
  CHECK(count_release(h.release, gone) == vote::no);
  CHECK(gone);

  // Replaced too late to leave validity: no grant for the waiter, but the release happened.
  h = decoded("*6\r\n:1\r\n$1\r\n7\r\n" + time_fields + ":1\r\n" + no_rival);
  CHECK(count_acquire(h.grant, fences, round, retry_ms, 0).cast == vote::failed);
  CHECK(count_release(h.release, gone) == vote::yes);

  // The counter the master had seen is at or above the proposal: a fencing conflict.
  h = decoded("*6\r\n:1\r\n$2\r\n10\r\n" + time_fields + ":1\r\n" + no_rival);
  count_acquire(h.grant, fences, round, retry_ms, 900);
  CHECK(round.conflict());

  // Another daemon's head waits there with an earlier ticket: refused, and its ticket observed.
  h = decoded("*6\r\n:0\r\n:150\r\n" + time_fields + ":1\r\n$2\r\n60\r\n");
  CHECK(count_acquire(h.grant, fences, round, retry_ms, 900).cast == vote::no);
  CHECK(count_release(h.release, gone) == vote::yes);
  CHECK(fences.high_water() == 60);

  // Four fields (an acquire's answer) are not a hand-over's.
  h = decoded("*4\r\n:1\r\n$1\r\n7\r\n" + time_fields);
  CHECK(count_acquire(h.grant, fences, round, retry_ms, 900).cast == vote::failed);
  CHECK(count_release(h.release, gone) == vote::failed);
}
