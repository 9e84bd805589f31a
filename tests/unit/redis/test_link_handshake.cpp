// The Redis link's handshake: the bytes it sends on connect and what each reply means, fed as
// real RESP through the repository's reply reader.
#include "redlockd/config/config.hpp"
#include "redlockd/redis/link_handshake.hpp"
#include "redlockd/resp/resp.hpp"
#include "redlockd/resp/scripts.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace redlockd;

namespace {

using kind = handshake_event::kind;

reply_ptr parse(std::string_view bytes) {
  reply_reader reader;
  reader.feed(bytes);
  reply_ptr reply;
  REQUIRE(reader.next(reply) == reply_reader::status::reply);
  return reply;
}

// "$<n>\r\n<text>\r\n", appended piece by piece (GCC 12's false -Wrestrict, bug 105329).
std::string bulk(std::string_view text) {
  std::string out = "$";
  out += std::to_string(text.size());
  out += "\r\n";
  out += text;
  out += "\r\n";
  return out;
}

std::string all_bytes(const std::vector<link_request>& requests) {
  std::string bytes;
  for (const auto& request : requests)
    bytes += request.command;
  return bytes;
}

std::string script_loads_bytes() {
  std::string bytes;
  for (std::size_t i = 0; i < script_count; ++i)
    append_command(bytes, {"SCRIPT", "LOAD", script_source(static_cast<script>(i))});
  return bytes;
}

const std::string info_server = bulk("# Server\r\nredis_version:7.0.15\r\nrun_id:"
                                     "4f1b2c3d\r\nuptime_in_seconds:7\r\nuptime_in_days:0\r\n");

// Decodes the replies of a whole handshake after AUTH; returns the events in order.
std::vector<handshake_event> answer_all(link_handshake& handshake, std::string_view fence,
                                        std::string_view memory) {
  std::vector<handshake_event> events;
  for (std::uint32_t i = 0; i < script_count; ++i)
    events.push_back(handshake.decode({request_kind::load_script, i, 0},
                                      *parse(bulk(script_sha(static_cast<script>(i))))));
  events.push_back(handshake.decode({request_kind::read_fence, 0, 0}, *parse(fence)));
  events.push_back(handshake.decode({request_kind::read_max_ttl, 0, 0}, *parse(bulk("30000"))));
  events.push_back(handshake.decode({request_kind::info_server, 0, 0}, *parse(info_server)));
  events.push_back(handshake.decode({request_kind::info_memory, 0, 0}, *parse(memory)));
  return events;
}

} // namespace

TEST_CASE("handshake: without a password it loads the scripts, reads the registers, asks INFO",
          "[handshake]") {
  config cfg;
  cfg.fence_key = "f";
  link_handshake handshake(cfg);
  const auto requests = handshake.begin();
  REQUIRE(requests.size() == script_count + 4);
  const std::string expected = script_loads_bytes() + "*2\r\n$3\r\nGET\r\n$1\r\nf\r\n" +
                               "*2\r\n$3\r\nGET\r\n$9\r\nf:max_ttl\r\n" +
                               "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n" +
                               "*3\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n$11\r\npersistence\r\n";
  CHECK(all_bytes(requests) == expected);
  for (std::uint32_t i = 0; i < script_count; ++i) {
    CHECK(requests[i].tag.kind == request_kind::load_script);
    CHECK(requests[i].tag.op == i);
  }
  CHECK(requests[script_count].tag.kind == request_kind::read_fence);
  CHECK(requests[script_count + 1].tag.kind == request_kind::read_max_ttl);
  CHECK(requests[script_count + 2].tag.kind == request_kind::info_server);
  CHECK(requests[script_count + 3].tag.kind == request_kind::info_memory);
  CHECK(handshake.replies_left() == script_count + 4);
}

TEST_CASE("handshake: AUTH goes first, with the username when one is set", "[handshake]") {
  config cfg;
  cfg.redis_password = "pw";
  link_handshake handshake(cfg);
  auto requests = handshake.begin();
  REQUIRE(requests.size() == script_count + 5);
  CHECK(requests[0].tag.kind == request_kind::auth);
  CHECK(requests[0].command == "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n");
  CHECK(handshake.replies_left() == script_count + 5);

  cfg.redis_username = "locks";
  requests = handshake.begin();
  CHECK(requests[0].command == "*3\r\n$4\r\nAUTH\r\n$5\r\nlocks\r\n$2\r\npw\r\n");
}

TEST_CASE("handshake: the replies give the master's facts, then its storage, then completion",
          "[handshake]") {
  config cfg;
  cfg.redis_password = "pw";
  link_handshake handshake(cfg);
  handshake.begin();
  const auto auth = handshake.decode({request_kind::auth, 0, 0}, *parse("+OK\r\n"));
  CHECK(auth.what == kind::auth_accepted);
  CHECK_FALSE(auth.complete);

  const auto events =
      answer_all(handshake, bulk("42"), bulk("maxmemory_policy:noeviction\r\naof_enabled:1\r\n"));
  REQUIRE(events.size() == script_count + 4);
  for (std::size_t i = 0; i + 1 < events.size(); ++i)
    CHECK_FALSE(events[i].complete);
  for (std::size_t i = 0; i < script_count + 2; ++i)
    CHECK(events[i].what == kind::accepted);
  const auto& identified = events[script_count + 2];
  REQUIRE(identified.what == kind::identified);
  CHECK(identified.facts.fence == std::optional<std::uint64_t>(42));
  CHECK(identified.facts.max_ttl_ms == 30000);
  CHECK(identified.facts.run_id == "4f1b2c3d");
  CHECK(identified.facts.uptime_ms == 7000);
  const auto& storage = events.back();
  REQUIRE(storage.what == kind::storage);
  CHECK(storage.storage.aof_enabled);
  CHECK_FALSE(storage.storage.evicts_keys());
  CHECK(storage.complete);
  CHECK(handshake.replies_left() == 0);
}

TEST_CASE("handshake: a missing fence key and an evicting, non-AOF master", "[handshake]") {
  config cfg;
  link_handshake handshake(cfg);
  handshake.begin();
  const auto events =
      answer_all(handshake, "$-1\r\n", bulk("maxmemory_policy:allkeys-lru\r\naof_enabled:0\r\n"));
  CHECK(events[script_count + 2].facts.fence == std::nullopt);
  CHECK(events.back().storage.maxmemory_policy == "allkeys-lru");
  CHECK(events.back().storage.evicts_keys());
  CHECK_FALSE(events.back().storage.aof_enabled);
  CHECK(events.back().complete);
}

TEST_CASE("handshake: a refused AUTH is reported with the password scrubbed", "[handshake]") {
  config cfg;
  cfg.redis_password = "s3cret";
  link_handshake handshake(cfg);
  handshake.begin();
  const auto event = handshake.decode({request_kind::auth, 0, 0},
                                      *parse("-WRONGPASS bad s3cret and s3cret again\r\n"));
  CHECK(event.what == kind::auth_refused);
  CHECK(event.detail == "WRONGPASS bad *** and *** again");
  CHECK_FALSE(event.complete);
  CHECK(handshake.replies_left() == script_count + 5);
}

TEST_CASE("handshake: a wrong script SHA or a load error refuses the scripts", "[handshake]") {
  config cfg;
  link_handshake handshake(cfg);
  handshake.begin();
  const auto wrong = handshake.decode({request_kind::load_script, 1, 0},
                                      *parse(bulk(script_sha(script::acquire))));
  CHECK(wrong.what == kind::script_refused);
  CHECK(wrong.detail == script_sha(script::acquire));
  const auto error =
      handshake.decode({request_kind::load_script, 0, 0}, *parse("-ERR Error compiling\r\n"));
  CHECK(error.what == kind::script_refused);
  CHECK(error.detail == "ERR Error compiling");
  CHECK(handshake.replies_left() == script_count + 4);
}

TEST_CASE("handshake: a fence register that is not a counter is unreadable", "[handshake]") {
  config cfg;
  link_handshake handshake(cfg);
  handshake.begin();
  CHECK(handshake.decode({request_kind::read_fence, 0, 0}, *parse(bulk("abc"))).what ==
        kind::fence_unreadable);
  const auto wrongtype = handshake.decode({request_kind::read_max_ttl, 0, 0},
                                          *parse("-WRONGTYPE Operation against a key\r\n"));
  CHECK(wrongtype.what == kind::fence_unreadable);
  CHECK(wrongtype.detail == "WRONGTYPE Operation against a key");
}

TEST_CASE("handshake: a script reload reports its last script and is not counted", "[handshake]") {
  const auto requests = link_handshake::script_reloads();
  REQUIRE(requests.size() == script_count);
  CHECK(all_bytes(requests) == script_loads_bytes());
  config cfg;
  link_handshake handshake(cfg);
  handshake.begin();
  for (std::uint32_t i = 0; i < script_count; ++i) {
    CHECK(requests[i].tag.kind == request_kind::reload_script);
    const auto event =
        handshake.decode(requests[i].tag, *parse(bulk(script_sha(static_cast<script>(i)))));
    CHECK(event.what == (i + 1 == script_count ? kind::scripts_reloaded : kind::accepted));
    CHECK_FALSE(event.complete);
  }
  CHECK(handshake.replies_left() == script_count + 4);
}

TEST_CASE("handshake: decoded kinds are the link's own, not the engine's", "[handshake]") {
  for (auto k : {request_kind::auth, request_kind::load_script, request_kind::read_fence,
                 request_kind::read_max_ttl, request_kind::info_server, request_kind::info_memory,
                 request_kind::reload_script})
    CHECK(link_handshake::handles(k));
  for (auto k : {request_kind::acquire, request_kind::release, request_kind::status,
                 request_kind::fleet_read, request_kind::ping})
    CHECK_FALSE(link_handshake::handles(k));
}

TEST_CASE("handshake: TIME replies and INFO fields", "[handshake]") {
  const auto time = decode_time(*parse("*2\r\n$10\r\n1700000000\r\n$6\r\n123456\r\n"));
  REQUIRE(time);
  CHECK(time->seconds == 1700000000);
  CHECK(time->micros == 123456);
  CHECK_FALSE(decode_time(*parse("*1\r\n$1\r\n1\r\n")));
  CHECK_FALSE(decode_time(*parse("*2\r\n$1\r\nx\r\n$1\r\n1\r\n")));
  CHECK_FALSE(decode_time(*parse("-ERR no\r\n")));

  const std::string_view info = "# Server\r\nrun_id_x:no\r\nrun_id:abc\r\nlast:1";
  CHECK(info_field(info, "run_id") == "abc");
  CHECK(info_field(info, "last") == "1");
  CHECK(info_field(info, "missing").empty());
}
