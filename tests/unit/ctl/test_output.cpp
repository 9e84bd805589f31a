// What redlockctl prints for replies: text and JSON, readable INFO, and failure exit codes.
#include "redlockd/ctl/line_connection.hpp"
#include "redlockd/ctl/output.hpp"
#include "redlockd/ctl/run_command.hpp"

#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

using namespace redlockd::ctl;

namespace {

std::string printed(const std::string& command, const std::string& reply, bool json) {
  std::ostringstream out;
  print_reply(out, command, "jobs", reply, json);
  return out.str();
}

} // namespace

TEST_CASE("successful replies as text", "[output]") {
  CHECK(printed("lock", "OK o1 42 29990", false) == "o1 42 29990\n");
  CHECK(printed("extend", "OK 29990", false) == "29990\n");
  CHECK(printed("unlock", "OK", false).empty());
  CHECK(printed("status", "OK HELD 1500", false) == "held 1500\n");
  CHECK(printed("status", "OK FREE", false) == "free\n");
  CHECK(printed("ping", "PONG", false) == "PONG\n");
}

TEST_CASE("successful replies as JSON, with checked numbers", "[output]") {
  CHECK(printed("lock", "OK o1 42 29990", true) ==
        R"({"fence":42,"owner":"o1","resource":"jobs","validity_ms":29990})"
        "\n");
  CHECK(printed("extend", "OK 29990", true) == R"({"resource":"jobs","validity_ms":29990})"
                                               "\n");
  CHECK(printed("status", "OK HELD 1500", true) ==
        R"({"pttl_ms":1500,"resource":"jobs","state":"held"})"
        "\n");
  CHECK(printed("info", R"(OK {"quorum":3})", true) == "{\"quorum\":3}\n");
  CHECK(printed("unlock", "OK", true) == R"({"released":true,"resource":"jobs"})"
                                         "\n");
  CHECK(printed("ping", "PONG", true) == R"({"reply":"PONG"})"
                                         "\n");
  CHECK_THROWS_AS(printed("lock", "OK o1 x 29990", true), connection_error);
  CHECK_THROWS_AS(printed("status", "OK HELD", false), connection_error);
  CHECK_THROWS_AS(printed("status", "OK GONE", true), connection_error);
}

TEST_CASE("STATUS's fields of the lock family, in any order", "[output]") {
  CHECK(printed("status", "OK HELD 29850 readers=2", false) == "held 29850 readers=2\n");
  CHECK(printed("status", "OK FREE permits=1/3", false) == "free permits=1/3\n");
  CHECK(printed("status", "OK HELD 10 permits=2/2 label=h:1 readers=1", false) ==
        "held 10 permits=2/2 label=h:1 readers=1\n");
  CHECK(printed("status", "OK HELD 10 permits=2/2 label=h:1 readers=1", true) ==
        R"({"label":"h:1","permits":2,"permits_used":2,"pttl_ms":10,"readers":1,)"
        R"("resource":"jobs","state":"held"})"
        "\n");
  CHECK(printed("status", "OK FREE permits=0/4", true) ==
        R"({"permits":4,"permits_used":0,"resource":"jobs","state":"free"})"
        "\n");
  CHECK(printed("status", "OK HELD 10 label=x", true) ==
        R"({"label":"x","pttl_ms":10,"resource":"jobs","state":"held"})"
        "\n");
  CHECK(printed("status", "OK HELD 10 future=1", true) ==
        R"({"pttl_ms":10,"resource":"jobs","state":"held"})"
        "\n");
  CHECK_THROWS_AS(printed("status", "OK HELD 10 readers", false), connection_error);
  CHECK_THROWS_AS(printed("status", "OK FREE readers=x", true), connection_error);
  CHECK_THROWS_AS(printed("status", "OK FREE permits=3", true), connection_error);
}

TEST_CASE("a set's JSON names every resource", "[output]") {
  const std::vector<std::string> set = {"a", "b"};
  std::ostringstream lock, unlock, extend, one;
  print_reply(lock, "lock", "a", "OK o1 42 4948", true, set);
  CHECK(lock.str() == R"({"fence":42,"owner":"o1","resource":"a","resources":["a","b"],)"
                      R"("validity_ms":4948})"
                      "\n");
  print_reply(unlock, "unlock", "a", "OK", true, set);
  CHECK(unlock.str() == R"({"released":true,"resource":"a","resources":["a","b"]})"
                        "\n");
  print_reply(extend, "extend", "a", "OK 10", true, set);
  CHECK(extend.str() == R"({"resource":"a","resources":["a","b"],"validity_ms":10})"
                        "\n");
  print_reply(one, "lock", "a", "OK o1 42 4948", true, {"a"});
  CHECK(one.str() == R"({"fence":42,"owner":"o1","resource":"a","validity_ms":4948})"
                     "\n");
}

TEST_CASE("INFO made readable, fields not sent left out", "[output]") {
  std::ostringstream out;
  print_info(out, R"({"version":"1.0","uptime_s":7,"quorum":3,)"
                  R"("nodes":[{"address":"a:1","state":"ok","rtt_us":120},)"
                  R"({"address":"b:2","state":"quarantined:clock","rtt_us":-1,)"
                  R"("quarantined_ms":900}],"clients":2,"counters":{"lost":1}})");
  CHECK(out.str() == "redlockd 1.0\n"
                     "up 7 s, quorum 3\n"
                     "nodes:\n"
                     "  a:1  ok  rtt 120 us\n"
                     "  b:2  quarantined:clock  quarantined 900 ms more\n"
                     "clients 2\n"
                     "counters: lost=1\n");
  std::ostringstream not_json;
  print_info(not_json, "[1,2]");
  CHECK(not_json.str() == "[1,2]\n");
}

TEST_CASE("a reply that is not a success maps to its exit code", "[output]") {
  CHECK(is_success_reply("OK"));
  CHECK(is_success_reply("OK o 1 2"));
  CHECK(is_success_reply("PONG"));
  CHECK_FALSE(is_success_reply("OKAY"));
  CHECK_FALSE(is_success_reply("BUSY"));
  std::ostringstream err;
  CHECK(report_failure(err, "BUSY") == exit_code::busy);
  CHECK(report_failure(err, "NOQUORUM 2/5") == exit_code::no_quorum);
  CHECK(report_failure(err, "NOTHELD") == exit_code::not_held);
  CHECK(report_failure(err, "ERR bad ttl") == exit_code::refused);
  CHECK(err.str() == "redlockctl: BUSY\nredlockctl: NOQUORUM 2/5\nredlockctl: NOTHELD\n"
                     "redlockctl: ERR bad ttl\n");
  std::ostringstream noauth;
  CHECK(report_failure(noauth, "ERR NOAUTH") == exit_code::auth_failed);
  CHECK(noauth.str().find("give --secret-file or set REDLOCKD_CLIENT_SECRET") != std::string::npos);
}
