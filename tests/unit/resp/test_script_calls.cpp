// Each script call's bytes, and each reply decoded into its struct from real RESP bytes.
#include "redlockd/resp/resp.hpp"
#include "redlockd/resp/script_calls.hpp"
#include "redlockd/resp/scripts.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace redlockd;

namespace {

// A decoded reply with the reply it was decoded from: an error's text points into it.
struct decoded {
  reply_ptr raw;
  script_reply value;
};

decoded decode_with_raw(request_kind kind, std::string_view bytes) {
  reply_reader reader;
  reader.feed(bytes);
  reply_ptr reply;
  REQUIRE(reader.next(reply) == reply_reader::status::reply);
  script_reply value = decode_script_reply(kind, *reply);
  return {std::move(reply), value};
}

script_reply decode(request_kind kind, std::string_view bytes) {
  script_reply value = decode_with_raw(kind, bytes).value;
  REQUIRE_FALSE(std::holds_alternative<error_reply>(value)); // its text would dangle here
  return value;
}

const std::string time_fields = "$10\r\n1700000000\r\n$6\r\n123456\r\n";

} // namespace

TEST_CASE("script calls carry their keys and arguments, by SHA or by source", "[script_calls]") {
  const register_keys keys("redlockd:fence");
  CHECK(keys.max_ttl == "redlockd:fence:max_ttl");
  std::string by_sha;
  append_acquire(by_sha, script_by::sha, "lock:r", keys, "o1", 5000, 42);
  std::string expected;
  append_command(expected, {"EVALSHA", script_sha(script::acquire), "2", "lock:r", "redlockd:fence",
                            "o1", "5000", "42"}); // (the script makes the record's key)
  CHECK(by_sha == expected);

  CHECK(keys.wake == "redlockd:fence:wake");
  std::string marker;
  CHECK(wait_marker(marker, keys, "lock:r") == "redlockd:fence:waiting:lock:r");
  std::string by_source;
  append_release(by_source, script_by::source, "lock:r", "o1", marker,
                 release_wake(keys, "d1", true, 200));
  expected.clear();
  append_command(expected, {"EVAL", script_source(script::release), "2", "lock:r",
                            "redlockd:fence:waiting:lock:r", "o1", "d1 200 redlockd:fence:wake"});
  CHECK(by_source == expected);
  std::string attempt; // the release of an attempt that was never granted wakes nobody
  append_release(attempt, script_by::sha, "lock:r", "o1", marker,
                 release_wake(keys, "d1", false, 200));
  CHECK(attempt.ends_with("$2\r\no1\r\n$0\r\n\r\n"));

  std::string unmark;
  append_unmark(unmark, script_by::sha, marker, "lock:r", "d1", keys.wake);
  expected.clear();
  append_command(expected,
                 {"EVALSHA", script_sha(script::unmark), "2", "redlockd:fence:waiting:lock:r",
                  "lock:r", "d1", "redlockd:fence:wake"});
  CHECK(unmark == expected);

  std::string waiting;
  append_acquire_wait(waiting, script_by::sha, "lock:r", keys, "o1", 5000, 42,
                      {marker, 0, "d1", 17, 200});
  expected.clear();
  append_command(expected,
                 {"EVALSHA", script_sha(script::acquire_wait), "4", "lock:r", "redlockd:fence",
                  "redlockd:fence:max_ttl", "redlockd:fence:waiting:lock:r", "o1", "5000", "42",
                  "1", "d1", "17", "200", "0"});
  CHECK(waiting == expected); // a wait of 0 ms left still marks for 1 ms (PX 0 is an error)

  std::string extend;
  append_extend(extend, script_by::sha, "lock:r", keys, "o1", 7000);
  expected.clear();
  append_command(expected, {"EVALSHA", script_sha(script::extend), "2", "lock:r",
                            "redlockd:fence:max_ttl", "o1", "7000"});
  CHECK(extend == expected);

  std::string seed;
  append_seed(seed, keys, "redlockd:fence:quarantine:d1", 18446744073709551615ull, 30000);
  expected.clear();
  append_command(expected, {"EVAL", script_source(script::seed), "3", "redlockd:fence",
                            "redlockd:fence:max_ttl", "redlockd:fence:quarantine:d1",
                            "18446744073709551615", "30000", "seed", "0"});
  CHECK(seed == expected);
  std::string mark;
  append_quarantine_mark(mark, keys, "redlockd:fence:quarantine:d1", 70000, false);
  expected.clear();
  append_command(expected, {"EVAL", script_source(script::seed), "3", "redlockd:fence",
                            "redlockd:fence:max_ttl", "redlockd:fence:quarantine:d1", "0", "0",
                            "mark", "70000"});
  CHECK(mark == expected);
  mark.clear();
  append_quarantine_mark(mark, keys, "redlockd:fence:quarantine:d1", 70000, true);
  expected.clear();
  append_command(expected, {"EVAL", script_source(script::seed), "3", "redlockd:fence",
                            "redlockd:fence:max_ttl", "redlockd:fence:quarantine:d1", "0", "0",
                            "remark", "70000"});
  CHECK(mark == expected);

  std::string read;
  append_register_read(read, keys);
  CHECK(read == "*3\r\n$4\r\nMGET\r\n$14\r\nredlockd:fence\r\n$22\r\nredlockd:fence:max_ttl\r\n");
}

TEST_CASE("the release makes no helper on its path without a wait mark", "[script_calls]") {
  // Every UNLOCK runs release.lua; a master makes a script's functions anew whenever the run
  // reaches their definitions (8k instructions of its 41.5k, bench/script_cost.py). So the text
  // returns when it finds no wait mark, before the helpers (its '--#helpers' line).
  const std::string text(script_source(script::release));
  const auto returns = text.find("if not m then return 1 end");
  REQUIRE(returns != std::string::npos);
  CHECK(text.find("local function") > returns);
  CHECK(text.find("marks()") > returns);
}

TEST_CASE("acquire replies decode into granted, refused and malformed", "[script_calls]") {
  auto granted = std::get<acquire_reply>(
      decode(request_kind::acquire, "*4\r\n:1\r\n$2\r\n41\r\n" + time_fields));
  CHECK(granted.complete);
  CHECK(granted.status == 1);
  CHECK(granted.fence == 41u);
  REQUIRE(granted.time);
  CHECK(granted.time->seconds == 1700000000u);
  CHECK(granted.time->micros == 123456u);

  auto refused =
      std::get<acquire_reply>(decode(request_kind::acquire, "*4\r\n:0\r\n:2500\r\n" + time_fields));
  CHECK(refused.status == 0);
  CHECK(refused.holder_pttl == 2500);
  CHECK_FALSE(refused.fence);

  // A granted reply whose fence is not a counter: no fence, still complete.
  auto bad_fence = std::get<acquire_reply>(
      decode(request_kind::acquire, "*4\r\n:1\r\n$3\r\nabc\r\n" + time_fields));
  CHECK(bad_fence.complete);
  CHECK_FALSE(bad_fence.fence);

  // Three fields: not a vote, but its first field still tells a late reply's result.
  auto short_reply =
      std::get<acquire_reply>(decode(request_kind::acquire, "*3\r\n:1\r\n$1\r\n1\r\n$1\r\n1\r\n"));
  CHECK_FALSE(short_reply.complete);
  CHECK(short_reply.status == 1);

  // An unparsable TIME is no sample.
  auto no_time = std::get<acquire_reply>(
      decode(request_kind::acquire, "*4\r\n:1\r\n$1\r\n7\r\n$1\r\nx\r\n$1\r\n0\r\n"));
  CHECK_FALSE(no_time.time);
}

TEST_CASE("release, extend, fence bump and register replies decode", "[script_calls]") {
  CHECK(std::get<release_reply>(decode(request_kind::release, ":-1\r\n")).result == -1);
  CHECK(std::get<release_reply>(decode(request_kind::cleanup, ":1\r\n")).result == 1);
  CHECK_FALSE(std::get<release_reply>(decode(request_kind::release, "+OK\r\n")).result);

  auto extended =
      std::get<extend_reply>(decode(request_kind::extend, "*3\r\n:0\r\n" + time_fields));
  CHECK(extended.complete);
  CHECK(extended.result == 0);
  CHECK(extended.time);

  CHECK(std::get<fence_bump_reply>(decode(request_kind::fence_bump, "$2\r\n99\r\n")).previous ==
        99u);
  CHECK_FALSE(
      std::get<fence_bump_reply>(decode(request_kind::fence_bump, "$2\r\n-1\r\n")).previous);
  // A master that lost its register answers -2: no previous value, never a counter of 0.
  const auto lost = std::get<fence_bump_reply>(decode(request_kind::fence_bump, ":-2\r\n"));
  CHECK(lost.lost_data);
  CHECK_FALSE(lost.previous);
  CHECK_FALSE(std::get<fence_bump_reply>(decode(request_kind::fence_bump, ":7\r\n")).previous);

  auto registers =
      std::get<register_reply>(decode(request_kind::fleet_read, "*2\r\n$2\r\n12\r\n$-1\r\n"));
  CHECK(registers.ok);
  CHECK(registers.fence == 12u);
  CHECK(registers.max_ttl_ms == 0u); // a missing record reads as 0
  CHECK(registers.has_fence);
  CHECK_FALSE(std::get<register_reply>(decode(request_kind::fleet_read, "*2\r\n$-1\r\n$-1\r\n"))
                  .has_fence); // a new fleet's master, or one that lost its data
  CHECK_FALSE(std::get<register_reply>(decode(request_kind::fleet_read, "*1\r\n$2\r\n12\r\n")).ok);

  CHECK(std::get<seed_reply>(decode(request_kind::seed, ":1\r\n")).result == 1);
  CHECK(std::get<seed_reply>(decode(request_kind::quarantine_mark, ":0\r\n")).result == 0);
  CHECK(std::get<pttl_reply>(decode(request_kind::status, ":1500\r\n")).ms == 1500);
  CHECK(std::get<pttl_reply>(decode(request_kind::status, ":-2\r\n")).ms == -2);
}

TEST_CASE("error replies decode the same for every call, NOSCRIPT told apart", "[script_calls]") {
  const auto noscript = decode_with_raw(request_kind::acquire, "-NOSCRIPT No matching script\r\n");
  REQUIRE(std::holds_alternative<error_reply>(noscript.value));
  CHECK(std::get<error_reply>(noscript.value).noscript());
  CHECK(std::get<error_reply>(noscript.value).text == "NOSCRIPT No matching script");
  const auto other = decode_with_raw(request_kind::seed, "-ERR wrong number of arguments\r\n");
  REQUIRE(std::holds_alternative<error_reply>(other.value));
  CHECK_FALSE(std::get<error_reply>(other.value).noscript());
}
