// The wire protocol end to end: the real daemon over TCP in front of five real masters.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

const std::string version = REDLOCKD_VERSION;
const std::string owner_a(40, 'a');

// Asserts that `reply` is "ERR <code> <message>" with a non-empty message.
void check_error(const std::string& reply, const std::string& code) {
  INFO("reply: " << reply);
  REQUIRE(starts_with(reply, "ERR " + code + " "));
  CHECK(reply.size() > 5 + code.size());
  CHECK(reply.find('\r') == std::string::npos);
}

} // namespace

TEST_CASE("PING, HELLO and INFO answer per the contract", "[integration]") {
  fleet_and_daemon env;
  auto c = env.client();

  CHECK(c.request("PING") == "PONG");
  CHECK(c.request("PING hello") == "PONG hello");
  CHECK(c.request("HELLO") == "OK redlockd " + version + " proto=1.1 nodes=5 quorum=3");

  const auto reply = c.request("INFO");
  REQUIRE(starts_with(reply, "OK {"));
  for (const auto& address : env.fleet.addresses()) {
    CHECK(reply.find(address) != std::string::npos);
  }
  const auto info = nlohmann::json::parse(reply.substr(3));
  CHECK(info.at("version") == version);
  CHECK(info.at("quorum") == 3);
  CHECK(info.at("uptime_s").get<std::int64_t>() >= 0);
  CHECK(info.at("clients").get<std::int64_t>() >= 1);
  CHECK(info.contains("fence_high_water"));
  REQUIRE(info.at("nodes").size() == 5);
  std::vector<std::string> addresses;
  for (const auto& n : info.at("nodes")) {
    addresses.push_back(n.at("address").get<std::string>());
    CHECK(n.at("state") == "ok");
    CHECK(n.at("rtt_us").get<std::int64_t>() >= 0);
    CHECK(n.at("quarantined_ms").get<std::int64_t>() == 0);
  }
  auto expected = env.fleet.addresses();
  std::sort(addresses.begin(), addresses.end());
  std::sort(expected.begin(), expected.end());
  CHECK(addresses == expected);
  for (const char* counter :
       {"acquired", "busy", "noquorum", "released", "extended", "notheld", "lost"}) {
    CAPTURE(counter);
    CHECK(info.at("counters").at(counter) == 0);
  }
}

TEST_CASE("INFO counters count the outcomes", "[integration]") {
  fleet_and_daemon env;
  auto c = env.client();

  const auto grant = parse_lock_ok(c.request("LOCK r 10000"));
  REQUIRE(grant);
  CHECK(starts_with(c.request("LOCK r 10000"), "BUSY "));
  CHECK(starts_with(c.request("EXTEND r " + grant->owner + " 20000"), "OK "));
  CHECK(c.request("UNLOCK r " + owner_a) == "NOTHELD");
  CHECK(c.request("UNLOCK r " + grant->owner) == "OK");

  const auto info = env.daemon.info();
  const auto& counters = info.at("counters");
  CHECK(counters.at("acquired") == 1);
  CHECK(counters.at("busy") == 1);
  CHECK(counters.at("extended") == 1);
  CHECK(counters.at("notheld") == 1);
  CHECK(counters.at("released") == 1);
  CHECK(counters.at("noquorum") == 0);
  CHECK(counters.at("lost") == 0);
  CHECK(info.at("fence_high_water").get<std::uint64_t>() >= grant->fence);
}

TEST_CASE("every parser error code over TCP - the connection stays usable", "[integration]") {
  fleet_and_daemon env;
  auto c = env.client();
  const std::string long_resource(257, 'r');

  struct bad_request {
    std::string line;
    std::string code;
  };
  const std::vector<bad_request> cases = {
      // SYNTAX: missing or extra arguments, unknown or repeated options.
      {"LOCK", "SYNTAX"},
      {"LOCK r", "SYNTAX"},
      {"UNLOCK", "SYNTAX"},
      {"UNLOCK r", "SYNTAX"},
      {"UNLOCK r " + owner_a + " extra", "SYNTAX"},
      {"EXTEND r " + owner_a, "SYNTAX"},
      {"EXTEND r " + owner_a + " 100 extra", "SYNTAX"},
      {"PING a b", "SYNTAX"},
      {"LOCK r 100 FOO", "SYNTAX"},
      {"LOCK r 100 WAIT", "SYNTAX"},
      {"LOCK r 100 WAIT 500 WAIT 500", "SYNTAX"},
      {"LOCK r 100 KEEP KEEP", "SYNTAX"},
      {"LOCK r 100 KEEP NOW", "SYNTAX"},
      {"LOCK r 100 WAIT soon", "BAD_TTL"},
      // UNKNOWN_COMMAND
      {"FROB", "UNKNOWN_COMMAND"},
      {"GET r", "UNKNOWN_COMMAND"},
      {"SET r v NX PX 100", "UNKNOWN_COMMAND"},
      {"LOCKX r 100", "UNKNOWN_COMMAND"},
      // BAD_RESOURCE: too long, control bytes, non-ASCII, DEL.
      {"LOCK " + long_resource + " 100", "BAD_RESOURCE"},
      {"LOCK a\x01"
       "b 100",
       "BAD_RESOURCE"},
      {"LOCK a\tb 100", "BAD_RESOURCE"},
      {"LOCK a\x7f"
       "b 100",
       "BAD_RESOURCE"},
      {"LOCK caf\xc3\xa9 100", "BAD_RESOURCE"},
      {"UNLOCK " + long_resource + " " + owner_a, "BAD_RESOURCE"},
      {"EXTEND " + long_resource + " " + owner_a + " 100", "BAD_RESOURCE"},
      // BAD_TTL: out of [10, 3600000], signs, exponents, fractions, overflow, words.
      {"LOCK r 0", "BAD_TTL"},
      {"LOCK r 9", "BAD_TTL"},
      {"LOCK r 3600001", "BAD_TTL"},
      {"LOCK r -100", "BAD_TTL"},
      {"LOCK r +100", "BAD_TTL"},
      {"LOCK r 1e3", "BAD_TTL"},
      {"LOCK r 100.5", "BAD_TTL"},
      {"LOCK r 0x64", "BAD_TTL"},
      {"LOCK r 18446744073709551616", "BAD_TTL"},
      {"LOCK r 99999999999999999999999999", "BAD_TTL"},
      {"LOCK r abc", "BAD_TTL"},
      {"EXTEND r " + owner_a + " 0", "BAD_TTL"},
      {"EXTEND r " + owner_a + " 3600001", "BAD_TTL"},
      {"EXTEND r " + owner_a + " -1", "BAD_TTL"},
      // BAD_OWNER: length, case, non-hex.
      {"UNLOCK r abc", "BAD_OWNER"},
      {"UNLOCK r " + std::string(39, 'a'), "BAD_OWNER"},
      {"UNLOCK r " + std::string(41, 'a'), "BAD_OWNER"},
      {"UNLOCK r " + std::string(40, 'A'), "BAD_OWNER"},
      {"UNLOCK r " + std::string(39, 'a') + "g", "BAD_OWNER"},
      {"EXTEND r " + std::string(40, 'z') + " 100", "BAD_OWNER"},
  };
  for (const auto& bad : cases) {
    CAPTURE(bad.line);
    check_error(c.request(bad.line), bad.code);
    CHECK(c.request("PING still-here") == "PONG still-here");
  }

  // Nothing was locked by any of them.
  CHECK(lock_keys(env.fleet).empty());
  const auto info = env.daemon.info();
  CHECK(info.at("counters").at("acquired") == 0);

  // The limits themselves are accepted (10 ms is too short to assert a grant: only no ERR).
  const auto at_min = c.request("LOCK min 10");
  CHECK_FALSE(starts_with(at_min, "ERR"));
  const auto at_max = parse_lock_ok(c.request("LOCK max 3600000"));
  REQUIRE(at_max);
  CHECK(c.request("UNLOCK max " + at_max->owner) == "OK");
}

TEST_CASE("a line longer than max_line_bytes gets LINE_TOO_LONG, then the connection is closed",
          "[integration]") {
  fleet_and_daemon env;

  SECTION("4097 bytes without LF") {
    auto c = env.client();
    c.send(std::string(4097, 'A'));
    check_error(c.read_line(), "LINE_TOO_LONG");
    CHECK(c.closed_by_peer(3s));
  }
  SECTION("a long LOCK line with its LF") {
    auto c = env.client();
    c.send("LOCK " + std::string(5000, 'x') + " 1000\n");
    check_error(c.read_line(), "LINE_TOO_LONG");
    CHECK(c.closed_by_peer(3s));
  }
  SECTION("after good requests on the same connection") {
    auto c = env.client();
    CHECK(c.request("PING 1") == "PONG 1");
    c.send(std::string(10000, 'B'));
    check_error(c.read_line(), "LINE_TOO_LONG");
    CHECK(c.closed_by_peer(3s));
  }
  SECTION("exactly max_line_bytes is accepted") {
    auto c = env.client();
    const std::string word(4096 - 5, 'w');
    CHECK(c.request("PING " + word) == "PONG " + word);
    CHECK(c.request("PING") == "PONG");
  }

  CHECK(lock_keys(env.fleet).empty());
  auto fresh = env.client();
  CHECK(fresh.request("PING") == "PONG");
}

TEST_CASE("a smaller max_line_bytes from the config is enforced", "[integration]") {
  fleet_and_daemon env(nlohmann::json{{"max_line_bytes", 64}});
  auto c = env.client();
  const std::string word(64 - 5, 'w');
  CHECK(c.request("PING " + word) == "PONG " + word);
  c.send("PING " + word + "w\n");
  check_error(c.read_line(), "LINE_TOO_LONG");
  CHECK(c.closed_by_peer(3s));
}

TEST_CASE("CRLF, empty lines, extra spaces and lowercase verbs", "[integration]") {
  fleet_and_daemon env;
  auto c = env.client();

  c.send("PING a\r\n");
  CHECK(c.read_line() == "PONG a");

  // Empty lines get no reply at all: the next reply is the PING's.
  c.send("\n\n\r\n\nPING b\n");
  CHECK(c.read_line() == "PONG b");

  CHECK(c.request("ping c") == "PONG c");
  CHECK(c.request("Ping d") == "PONG d");
  CHECK(starts_with(c.request("hello"), "OK redlockd " + version + " "));
  CHECK(starts_with(c.request("info"), "OK {"));

  const auto grant = parse_lock_ok(c.request("lock   res    5000"));
  REQUIRE(grant);
  CHECK(nodes_holding(env.fleet, "res", grant->owner).size() >= 3);
  c.send("eXtEnD res " + grant->owner + " 6000\r\n");
  CHECK(starts_with(c.read_line(), "OK "));
  c.send("unlock  res  " + grant->owner + "\r\n");
  CHECK(c.read_line() == "OK");
  CHECK(lock_keys(env.fleet).empty());

  // Nothing is pending: no stray reply for the empty lines.
  CHECK(c.request("PING end") == "PONG end");
  CHECK(c.pending().empty());
}

TEST_CASE("binary garbage and NUL bytes do not crash the daemon", "[integration]") {
  fleet_and_daemon env;
  std::mt19937 rng(20240601); // fixed seed: reproducible
  std::uniform_int_distribution<int> byte(0, 255);

  for (int round = 0; round < 20; ++round) {
    CAPTURE(round);
    std::string garbage;
    const std::size_t size = 1 + static_cast<std::size_t>(rng() % 3000);
    for (std::size_t k = 0; k < size; ++k) {
      garbage.push_back(static_cast<char>(byte(rng)));
      if (rng() % 50 == 0) {
        garbage.push_back('\n');
      }
    }
    auto c = env.client();
    try {
      c.send(garbage);
      c.send("\n");
      c.shutdown_write();
      // Drain whatever the daemon answers until it closes or goes quiet.
      while (c.try_read_line(500ms)) {
      }
    } catch (const std::exception&) {
      // the daemon may close the connection on us (e.g. LINE_TOO_LONG): fine
    }
  }

  {
    auto c = env.client();
    c.send(std::string("PING a\0b\n", 9));
    CHECK(c.try_read_line(2s)); // some reply, whatever it is
    // PROTOCOL.md: a NUL is part of the token it sits in, so "r\0x" is an invalid resource.
    c.send(std::string("LOCK r\0x 100\n", 13));
    const auto bad_resource = c.try_read_line(2s);
    REQUIRE(bad_resource);
    CHECK(starts_with(*bad_resource, "ERR BAD_RESOURCE "));
    // A line of NULs is not an empty line: its verb is four NULs, no command.
    c.send(std::string("\0\0\0\0\n", 5));
    c.send("PING after\n");
    const auto unknown = c.try_read_line(2s);
    REQUIRE(unknown);
    CHECK(starts_with(*unknown, "ERR UNKNOWN_COMMAND "));
    CHECK(c.try_read_line(2s) == std::optional<std::string>("PONG after"));
  }
  {
    // A client that resets its connection in the middle of a request.
    auto c = env.client();
    c.send("LOCK half-sent 1000");
    c.reset();
  }

  REQUIRE(env.daemon.running());
  auto fresh = env.client();
  CHECK(fresh.request("PING") == "PONG");
  CHECK(lock_keys(env.fleet).empty());
}

TEST_CASE("QUIT answers OK and closes - later requests are not answered", "[integration]") {
  fleet_and_daemon env;
  {
    auto c = env.client();
    CHECK(c.request("QUIT") == "OK");
    CHECK(c.closed_by_peer(3s));
  }
  {
    auto c = env.client();
    c.send("PING 1\nquit\nPING 2\nLOCK after-quit 10000\n");
    CHECK(c.read_line() == "PONG 1");
    CHECK(c.read_line() == "OK");
    CHECK(c.closed_by_peer(3s));
  }
  // A plain lease survives its connection; nothing was locked after QUIT.
  CHECK(lock_keys(env.fleet).empty());
  auto fresh = env.client();
  CHECK(fresh.request("PING") == "PONG");
}

TEST_CASE("200 pipelined requests are answered in request order", "[integration]") {
  fleet_and_daemon env;
  auto c = env.client();

  std::string batch;
  for (int i = 0; i < 200; ++i) {
    if (i % 10 == 0) {
      batch += "LOCK res" + std::to_string(i) + " 30000\n";
    } else {
      batch += "PING " + std::to_string(i) + "\n";
    }
  }
  c.send(batch); // one write

  std::vector<std::pair<std::string, lock_grant>> grants;
  std::set<std::uint64_t> fences;
  for (int i = 0; i < 200; ++i) {
    CAPTURE(i);
    const auto reply = c.read_line();
    CAPTURE(reply);
    if (i % 10 == 0) {
      const auto grant = parse_lock_ok(reply);
      REQUIRE(grant);
      grants.emplace_back("res" + std::to_string(i), *grant);
      fences.insert(grant->fence);
    } else {
      REQUIRE(reply == "PONG " + std::to_string(i));
    }
  }
  CHECK(fences.size() == grants.size()); // every fence distinct
  for (const auto& [resource, grant] : grants) {
    CAPTURE(resource);
    CHECK(nodes_holding(env.fleet, resource, grant.owner).size() >= 3);
  }

  // Release them all, pipelined too, interleaved with PINGs and a NOTHELD.
  batch.clear();
  for (const auto& [resource, grant] : grants) {
    batch += "UNLOCK " + resource + " " + grant.owner + "\nPING " + resource + "\n";
  }
  batch += "UNLOCK res0 " + owner_a + "\n";
  c.send(batch);
  for (const auto& [resource, grant] : grants) {
    CAPTURE(resource);
    CHECK(c.read_line() == "OK");
    CHECK(c.read_line() == "PONG " + resource);
  }
  CHECK(c.read_line() == "NOTHELD");
  CHECK(lock_keys(env.fleet).empty());
}
