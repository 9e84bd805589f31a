// Hand-over's pure parts: when an UNLOCK hands over, a master's answer to the hand_over script
// (decoded from real RESP bytes), and the releaser's verdict from a round's votes.
#include "redlockd/lock/handover.hpp"
#include "redlockd/resp/resp.hpp"
#include "redlockd/resp/script_calls.hpp"
#include "redlockd/resp/scripts.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace redlockd;

namespace {

const std::string time_fields = "$10\r\n1700000000\r\n$1\r\n0\r\n";

hand_over_reply decoded(std::string_view bytes) {
  reply_reader reader;
  reader.feed(bytes);
  reply_ptr reply;
  REQUIRE(reader.next(reply) == reply_reader::status::reply);
  const script_reply value = decode_script_reply(request_kind::hand_over, *reply);
  REQUIRE(std::holds_alternative<hand_over_reply>(value));
  return std::get<hand_over_reply>(value);
}

vote_tally tally_of(std::initializer_list<vote> votes) {
  vote_tally tally(votes.size());
  std::size_t node = 0;
  for (const vote v : votes)
    tally.record(node++, v);
  return tally;
}

constexpr vote Y = vote::yes;
constexpr vote N = vote::no;
constexpr vote F = vote::failed;
constexpr vote P = vote::pending;

} // namespace

TEST_CASE("an UNLOCK hands over only its own lease to a waiting head of an undelayed resource",
          "[handover]") {
  CHECK(hand_over_applies({true, true, false}));
  CHECK_FALSE(hand_over_applies({false, true, false})); // the owner is not the lease here
  CHECK_FALSE(hand_over_applies({true, false, false})); // no head, or its attempt is in flight
  CHECK_FALSE(hand_over_applies({true, true, true}));   // lock-delayed
}

TEST_CASE("the hand_over call carries acquire's arguments and the releasing owner", "[handover]") {
  const register_keys keys("redlockd:fence");
  std::string out;
  append_hand_over(out, script_by::sha, "k", keys, "new-owner", 3000, 42, "old-owner");
  CHECK(out == "*10\r\n$7\r\nEVALSHA\r\n$40\r\n" + std::string(script_sha(script::hand_over)) +
                   "\r\n$1\r\n3\r\n$1\r\nk\r\n$14\r\nredlockd:fence\r\n$22\r\nredlockd:fence:"
                   "max_ttl\r\n$9\r\nnew-owner\r\n$4\r\n3000\r\n$2\r\n42\r\n$9\r\nold-owner\r\n");
  out.clear();
  append_hand_over(out, script_by::source, "k", keys, "new-owner", 3000, 42, "old-owner");
  CHECK(out.find(std::string(script_source(script::hand_over))) != std::string::npos);
}

TEST_CASE("a hand-over answer: replaced, set where absent, refused, malformed", "[handover]") {
  fence_register fences;
  fence_round round(10);
  std::uint64_t retry_ms = 0;

  // The releaser's key was there: the new owner has it, and the releaser's key is gone.
  auto v = count_hand_over(decoded("*5\r\n:1\r\n$1\r\n7\r\n" + time_fields + ":1\r\n"), fences,
                           round, retry_ms, 900);
  CHECK(v.waiter.cast == vote::yes);
  CHECK(v.found);
  CHECK(v.answered);
  CHECK(fences.high_water() == 7);

  // The key was gone: set as an acquisition sets it; the releaser's key was not found.
  v = count_hand_over(decoded("*5\r\n:1\r\n$1\r\n8\r\n" + time_fields + ":-1\r\n"), fences, round,
                      retry_ms, 900);
  CHECK(v.waiter.cast == vote::yes);
  CHECK_FALSE(v.found);

  // Another owner holds it: refused with its TTL as the retry hint.
  v = count_hand_over(decoded("*5\r\n:0\r\n:4500\r\n" + time_fields + ":0\r\n"), fences, round,
                      retry_ms, 900);
  CHECK(v.waiter.cast == vote::no);
  CHECK_FALSE(v.found);
  CHECK(v.answered);
  CHECK(retry_ms == 4500);

  // Replaced too late to leave validity: no grant for the waiter, but the release happened.
  v = count_hand_over(decoded("*5\r\n:1\r\n$1\r\n7\r\n" + time_fields + ":1\r\n"), fences, round,
                      retry_ms, 0);
  CHECK(v.waiter.cast == vote::failed);
  CHECK(v.found);

  // The counter the master had seen is at or above the proposal: a fencing conflict.
  v = count_hand_over(decoded("*5\r\n:1\r\n$2\r\n10\r\n" + time_fields + ":1\r\n"), fences, round,
                      retry_ms, 900);
  CHECK(round.conflict());

  // Four fields (an acquire's answer) are not a hand-over's.
  v = count_hand_over(decoded("*4\r\n:1\r\n$1\r\n7\r\n" + time_fields), fences, round, retry_ms,
                      900);
  CHECK(v.waiter.cast == vote::failed);
  CHECK_FALSE(v.answered);
  CHECK_FALSE(v.found);
}

TEST_CASE("the releaser's verdict: its key found on a quorum, or no longer possible",
          "[handover]") {
  // Found on three of five: released, whatever the others say.
  CHECK(judge_hand_over_release(0b00111, tally_of({Y, Y, Y, P, P})) == hand_over_release::released);
  // The waiter has a quorum, but the releaser's key was found on two only so far: the two
  // masters still to answer decide.
  CHECK(judge_hand_over_release(0b00011, tally_of({Y, Y, Y, P, P})) == hand_over_release::pending);
  CHECK(judge_hand_over_release(0b00011, tally_of({Y, Y, Y, N, P})) == hand_over_release::pending);
  CHECK(judge_hand_over_release(0b00011, tally_of({Y, Y, Y, N, F})) == hand_over_release::notheld);
  // Refused on a majority: the key was not the releaser's.
  CHECK(judge_hand_over_release(0, tally_of({N, N, N, P, P})) == hand_over_release::notheld);
}

TEST_CASE("the releaser's side of a round records what each master answered", "[handover]") {
  hand_over_state h;
  h.record(0, {{vote::yes}, true, true});
  h.record(2, {{vote::no}, true, false});
  h.record(4, {{vote::failed}, false, false});
  CHECK(h.found == 0b00001);
  CHECK(h.answered == 0b00101);
}
