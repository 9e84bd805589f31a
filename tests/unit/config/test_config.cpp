// Config parsing and validation: every key, its type, its range and the exact messages.
#include "redlockd/config/config.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

using namespace redlockd;

namespace {

std::string config_message(std::string_view text) {
  try {
    parse_config(text);
  } catch (const config_error& e) {
    return e.what();
  }
  FAIL("accepted: " << text);
  return {};
}

std::string validate_message(const config& cfg) {
  try {
    validate(cfg);
  } catch (const config_error& e) {
    return e.what();
  }
  FAIL("validate accepted the config");
  return {};
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

// A one-key document.
std::string doc(const std::string& key, const std::string& json_value) {
  return "{\"" + key + "\": " + json_value + "}";
}

} // namespace

TEST_CASE("an empty object gives the defaults", "[config]") {
  const config cfg = parse_config("{}");
  const config defaults;
  CHECK(cfg.listen == endpoint{"127.0.0.1", 7400});
  REQUIRE(cfg.nodes.size() == 5);
  CHECK(cfg.nodes == defaults.nodes);
  CHECK(cfg.nodes[0] == endpoint{"127.0.0.1", 7001});
  CHECK(cfg.key_prefix.empty());
  CHECK(cfg.fence_key == "redlockd:fence");
  CHECK(cfg.clock_drift_factor == Approx(0.01));
  CHECK(cfg.node_timeout_ms == 50);
  CHECK(cfg.min_ttl_ms == 10);
  CHECK(cfg.max_ttl_ms == 3'600'000);
  CHECK(cfg.max_line_bytes == 4096);
  CHECK(cfg.lock_delay_ms == 0);
  CHECK(cfg.log_level == "info");
  CHECK_NOTHROW(validate(defaults));
}

TEST_CASE("every key is read", "[config]") {
  const config cfg = parse_config(R"({
    "listen": "0.0.0.0:7500",
    "nodes": ["10.0.0.1:6379", "10.0.0.2:6379", "[::1]:6380"],
    "key_prefix": "app:",
    "fence_key": "app:fence",
    "clock_drift_factor": 0.05,
    "node_timeout_ms": 200,
    "min_ttl_ms": 100,
    "max_ttl_ms": 60000,
    "max_line_bytes": 1024,
    "lock_delay_ms": 500,
    "log_level": "debug"
  })");
  CHECK(cfg.listen == endpoint{"0.0.0.0", 7500});
  REQUIRE(cfg.nodes.size() == 3);
  CHECK(cfg.nodes[0] == endpoint{"10.0.0.1", 6379});
  CHECK(cfg.nodes[1] == endpoint{"10.0.0.2", 6379});
  CHECK(cfg.nodes[2] == endpoint{"::1", 6380});
  CHECK(cfg.key_prefix == "app:");
  CHECK(cfg.fence_key == "app:fence");
  CHECK(cfg.clock_drift_factor == Approx(0.05));
  CHECK(cfg.node_timeout_ms == 200);
  CHECK(cfg.min_ttl_ms == 100);
  CHECK(cfg.max_ttl_ms == 60000);
  CHECK(cfg.max_line_bytes == 1024);
  CHECK(cfg.lock_delay_ms == 500);
  CHECK(cfg.log_level == "debug");
}

TEST_CASE("malformed JSON and non-objects are refused", "[config]") {
  CHECK(starts_with(config_message(R"({ "listen": )"), "invalid JSON: "));
  CHECK(starts_with(config_message(""), "invalid JSON: "));
  CHECK(starts_with(config_message("{'listen': 'x'}"), "invalid JSON: "));
  CHECK(starts_with(config_message("{} {}"), "invalid JSON: "));
  CHECK(starts_with(config_message("{\"a\": 1,}"), "invalid JSON: "));
  for (const std::string& top : std::vector<std::string>{"[]", "42", "\"text\"", "null", "true"}) {
    CAPTURE(top);
    CHECK_THROWS_AS(parse_config(top), config_error);
  }
}

TEST_CASE("JSON the parser cannot represent is invalid JSON, not a crash", "[config]") {
  // nlohmann throws out_of_range (not parse_error) for this one.
  CHECK(starts_with(config_message(doc("clock_drift_factor", "1e400")), "invalid JSON: "));
  CHECK(starts_with(config_message("{\"listen\": \"\xff\"}"), "invalid JSON: "));
}

TEST_CASE("messages stay on one line whatever the input holds", "[config]") {
  const auto unknown = config_message(doc("a\\u0001b\\nc", "1"));
  CHECK(unknown == "unknown key 'a?b?c'");
  const auto node = config_message(doc("nodes", R"(["a\nb:1"])"));
  CHECK(node == "nodes[0]: bad host in 'a?b:1'");
  const auto long_key = config_message(doc(std::string(500, 'k'), "1"));
  CHECK(long_key.size() < 200);
  CHECK(long_key.find('\n') == std::string::npos);
}

TEST_CASE("shutdown_timeout_ms is an integer in [0, 600000]", "[config]") {
  CHECK(parse_config(doc("shutdown_timeout_ms", "0")).shutdown_timeout_ms == 0);
  CHECK(parse_config(doc("shutdown_timeout_ms", "600000")).shutdown_timeout_ms == 600'000);
  for (const std::string& bad : std::vector<std::string>{"600001", "-1", "1.5", "\"5s\""}) {
    CAPTURE(bad);
    CHECK(starts_with(config_message(doc("shutdown_timeout_ms", bad)), "shutdown_timeout_ms: "));
  }
}

TEST_CASE("unknown keys are refused by name", "[config]") {
  CHECK(config_message(doc("nodez", "[]")) == "unknown key 'nodez'");
  CHECK(config_message(doc("comment", "\"hi\"")) == "unknown key 'comment'");
  CHECK(config_message(doc("_note", "1")) == "unknown key '_note'");
  CHECK(config_message(doc("Listen", "\"127.0.0.1:1\"")) == "unknown key 'Listen'");
}

TEST_CASE("listen must be an endpoint string", "[config]") {
  CHECK(parse_config(doc("listen", "\"[::]:7400\"")).listen == endpoint{"::", 7400});
  CHECK(config_message(doc("listen", "7400")) == "listen: must be a string");
  CHECK(config_message(doc("listen", "\"127.0.0.1:0\"")) == "listen: bad port in '127.0.0.1:0'");
  CHECK(starts_with(config_message(doc("listen", "\"localhost\"")), "listen: "));
}

TEST_CASE("listen_unix is off by default, else an absolute path of at most 107 bytes", "[config]") {
  const config defaults = parse_config("{}");
  CHECK(defaults.listen_unix.empty());
  CHECK(defaults.listen_unix_mode == 0660);
  CHECK(parse_config(doc("listen_unix", "\"/run/redlockd.sock\"")).listen_unix ==
        "/run/redlockd.sock");
  CHECK(parse_config(doc("listen_unix", "\"\"")).listen_unix.empty());
  const std::string message = "listen_unix: must be empty or an absolute path of at most 107 bytes";
  CHECK(config_message(doc("listen_unix", "\"run/redlockd.sock\"")) == message);
  CHECK(config_message(doc("listen_unix", "\"/" + std::string(107, 'a') + "\"")) == message);
  CHECK(parse_config(doc("listen_unix", "\"/" + std::string(106, 'a') + "\"")).listen_unix.size() ==
        107);
  CHECK(config_message(doc("listen_unix", "7")) == "listen_unix: must be a string");
}

TEST_CASE("listen_unix_mode is octal permission bits written as a string", "[config]") {
  CHECK(parse_config(doc("listen_unix_mode", "\"0600\"")).listen_unix_mode == 0600);
  CHECK(parse_config(doc("listen_unix_mode", "\"666\"")).listen_unix_mode == 0666);
  CHECK(parse_config(doc("listen_unix_mode", "\"0777\"")).listen_unix_mode == 0777);
  const std::string message =
      "listen_unix_mode: must be octal permission bits such as \"0660\" (at most \"0777\")";
  for (const char* bad : {"\"0800\"", "\"1777\"", "\"\"", "\"06600\"", "\"rw\"", "\"-1\""})
    CHECK(config_message(doc("listen_unix_mode", bad)) == message);
  CHECK(config_message(doc("listen_unix_mode", "432")) == "listen_unix_mode: must be a string");
  config cfg;
  cfg.listen_unix_mode = 01000;
  CHECK(validate_message(cfg) ==
        "listen_unix_mode: must be octal permission bits of at most \"0777\"");
}

TEST_CASE("nodes must be a non-empty, short, duplicate-free array of endpoints", "[config]") {
  CHECK(parse_config(doc("nodes", R"(["a:1"])")).nodes == std::vector<endpoint>{{"a", 1}});

  CHECK(starts_with(config_message(doc("nodes", "[]")), "nodes: "));
  CHECK(starts_with(config_message(doc("nodes", "\"127.0.0.1:7001\"")), "nodes: "));
  CHECK(starts_with(config_message(doc("nodes", "{}")), "nodes: "));
  CHECK(
      config_message(doc("nodes", R"(["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:99999"])")) ==
      "nodes[2]: bad port in '127.0.0.1:99999'");
  CHECK(config_message(doc("nodes", R"(["127.0.0.1:7001", 7002])")) ==
        "nodes[1]: must be a string");
  CHECK(starts_with(config_message(doc("nodes", R"(["a:1", "not-an-address"])")), "nodes[1]: "));
  CHECK(starts_with(config_message(doc("nodes", R"(["a:1", "b:2", "a:1"])")), "nodes"));

  std::string sixteen = "[";
  for (int i = 1; i <= 16; ++i)
    sixteen += (i > 1 ? ",\"h:" : "\"h:") + std::to_string(i) + "\"";
  CHECK(parse_config(doc("nodes", sixteen + "]")).nodes.size() == 16);
  CHECK(starts_with(config_message(doc("nodes", sixteen + ",\"h:17\"]")), "nodes"));
}

TEST_CASE("client_keepalive_s is an integer in [0, 3600], 60 by default", "[config]") {
  CHECK(parse_config("{}").client_keepalive_s == 60);
  CHECK(parse_config(doc("client_keepalive_s", "0")).client_keepalive_s == 0);
  CHECK(parse_config(doc("client_keepalive_s", "3600")).client_keepalive_s == 3600);
  CHECK(config_message(doc("client_keepalive_s", "3601")) ==
        "client_keepalive_s: must be an integer between 0 and 3600");
  CHECK(config_message(doc("client_keepalive_s", "\"60\"")) ==
        "client_keepalive_s: must be an integer between 0 and 3600");
}

TEST_CASE("a host holding a bracket is refused - it would not print back as it parsed",
          "[config]") {
  // Found by tests/fuzz/fuzz_config: "[[a]:80" gave host "[a", printed as "[a:80".
  CHECK(config_message(doc("listen", R"("[[a]:80")")) == "listen: bad host in '[[a]:80'");
  CHECK(config_message(doc("nodes", R"(["a]:1"])")) == "nodes[0]: bad host in 'a]:1'");
  CHECK(parse_endpoint("[fe80::1]:7001") == endpoint{"fe80::1", 7001});
  CHECK(parse_endpoint(parse_endpoint("[::1]:7001").to_string()) == endpoint{"::1", 7001});
}

TEST_CASE("key_prefix is at most 256 printable bytes, possibly empty", "[config]") {
  CHECK(parse_config(doc("key_prefix", "\"\"")).key_prefix.empty());
  CHECK(parse_config(doc("key_prefix", "\"" + std::string(256, 'p') + "\"")).key_prefix.size() ==
        256);
  CHECK(config_message(doc("key_prefix", "1")) == "key_prefix: must be a string");
  for (const std::string& bad :
       std::vector<std::string>{"\"" + std::string(257, 'p') + "\"", std::string("\"a b\""),
                                std::string("\"a\\tb\""), std::string("\"caf\\u00e9\"")}) {
    CAPTURE(bad);
    CHECK(starts_with(config_message(doc("key_prefix", bad)), "key_prefix: "));
  }
}

TEST_CASE("fence_key is 1..256 printable bytes", "[config]") {
  CHECK(parse_config(doc("fence_key", "\"f\"")).fence_key == "f");
  CHECK(parse_config(doc("fence_key", "\"" + std::string(256, 'f') + "\"")).fence_key.size() ==
        256);
  CHECK(config_message(doc("fence_key", "null")) == "fence_key: must be a string");
  for (const std::string& bad : {std::string("\"\""), "\"" + std::string(257, 'f') + "\"",
                                 std::string("\"a b\""), std::string("\"a\\nb\"")}) {
    CAPTURE(bad);
    CHECK(starts_with(config_message(doc("fence_key", bad)), "fence_key: "));
  }
}

TEST_CASE("clock_drift_factor is a number in [0, 0.1]", "[config]") {
  CHECK(parse_config(doc("clock_drift_factor", "0")).clock_drift_factor == 0.0);
  CHECK(parse_config(doc("clock_drift_factor", "0.1")).clock_drift_factor == Approx(0.1));
  CHECK(parse_config(doc("clock_drift_factor", "0.0")).clock_drift_factor == 0.0);
  for (const std::string& bad :
       std::vector<std::string>{"-0.01", "0.11", "1", "1e9", "\"0.01\"", "true", "null"}) {
    CAPTURE(bad);
    CHECK(starts_with(config_message(doc("clock_drift_factor", bad)), "clock_drift_factor: "));
  }
}

TEST_CASE("node_timeout_ms is an integer in [1, 10000]", "[config]") {
  CHECK(parse_config(doc("node_timeout_ms", "1")).node_timeout_ms == 1);
  CHECK(parse_config(doc("node_timeout_ms", "10000")).node_timeout_ms == 10000);
  for (const std::string& bad :
       std::vector<std::string>{"0", "10001", "-5", "1.5", "4294967297", "1e2"}) {
    CAPTURE(bad);
    CHECK(config_message(doc("node_timeout_ms", bad)) ==
          "node_timeout_ms: must be an integer between 1 and 10000");
  }
  CHECK(starts_with(config_message(doc("node_timeout_ms", "\"fast\"")), "node_timeout_ms: "));
  CHECK(starts_with(config_message(doc("node_timeout_ms", "[50]")), "node_timeout_ms: "));
}

TEST_CASE("min_ttl_ms and max_ttl_ms bound each other", "[config]") {
  auto cfg = parse_config(R"({"min_ttl_ms": 1, "max_ttl_ms": 86400000})");
  CHECK(cfg.min_ttl_ms == 1);
  CHECK(cfg.max_ttl_ms == 86'400'000);
  cfg = parse_config(R"({"min_ttl_ms": 500, "max_ttl_ms": 500})");
  CHECK(cfg.min_ttl_ms == 500);
  CHECK(cfg.max_ttl_ms == 500);

  for (const std::string& bad :
       std::vector<std::string>{"0", "-1", "2.5", "\"10\"", "18446744073709551616"}) {
    CAPTURE(bad);
    CHECK(starts_with(config_message(doc("min_ttl_ms", bad)), "min_ttl_ms: "));
  }
  for (const std::string& bad :
       std::vector<std::string>{"86400001", "-1", "2.5", "\"10\"", "true"}) {
    CAPTURE(bad);
    CHECK(starts_with(config_message(doc("max_ttl_ms", bad)), "max_ttl_ms: "));
  }
  // Default max is 3600000: a larger min alone is inconsistent.
  CHECK(starts_with(config_message(doc("min_ttl_ms", "3600001")), "m"));
  CHECK(starts_with(config_message(R"({"min_ttl_ms": 501, "max_ttl_ms": 500})"), "max_ttl_ms: "));
  CHECK(starts_with(config_message(doc("max_ttl_ms", "9")), "max_ttl_ms: "));
}

TEST_CASE("max_line_bytes is an integer in [64, 1048576]", "[config]") {
  CHECK(parse_config(doc("max_line_bytes", "64")).max_line_bytes == 64);
  CHECK(parse_config(doc("max_line_bytes", "1048576")).max_line_bytes == 1'048'576);
  for (const std::string& bad :
       std::vector<std::string>{"63", "1048577", "-4096", "4096.5", "\"4096\""}) {
    CAPTURE(bad);
    CHECK(starts_with(config_message(doc("max_line_bytes", bad)), "max_line_bytes: "));
  }
  CHECK(config_message(doc("max_line_bytes", "63")) ==
        "max_line_bytes: must be an integer between 64 and 1048576");
}

TEST_CASE("lock_delay_ms is a non-negative integer", "[config]") {
  CHECK(parse_config(doc("lock_delay_ms", "0")).lock_delay_ms == 0);
  CHECK(parse_config(doc("lock_delay_ms", "1000")).lock_delay_ms == 1000);
  for (const std::string& bad :
       std::vector<std::string>{"-1", "0.5", "\"1s\"", "18446744073709551615"}) {
    CAPTURE(bad);
    CHECK(starts_with(config_message(doc("lock_delay_ms", bad)), "lock_delay_ms: "));
  }
}

TEST_CASE("log_level is one of the spdlog levels", "[config]") {
  for (const std::string& level :
       std::vector<std::string>{"trace", "debug", "info", "warn", "error", "critical", "off"})
    CHECK(parse_config(doc("log_level", "\"" + level + "\"")).log_level == level);
  for (const std::string& bad : std::vector<std::string>{"\"INFO\"", "\"verbose\"", "\"\"", "1"}) {
    CAPTURE(bad);
    CHECK(starts_with(config_message(doc("log_level", bad)), "log_level: "));
  }
  CHECK(config_message(doc("log_level", "\"verbose\"")) ==
        "log_level: must be one of trace, debug, info, warn, error, critical, off");
}

TEST_CASE("validate checks the cross-field rules of an assembled config", "[config]") {
  config cfg;
  CHECK_NOTHROW(validate(cfg));

  SECTION("no nodes") {
    cfg.nodes.clear();
    CHECK(starts_with(validate_message(cfg), "nodes"));
  }
  SECTION("too many nodes") {
    cfg.nodes.clear();
    for (std::uint16_t port = 1; port <= 17; ++port)
      cfg.nodes.push_back({"h", port});
    CHECK(starts_with(validate_message(cfg), "nodes"));
    cfg.nodes.pop_back();
    CHECK_NOTHROW(validate(cfg));
  }
  SECTION("duplicate nodes") {
    cfg.nodes = {{"h", 1}, {"h", 2}, {"h", 1}};
    CHECK(starts_with(validate_message(cfg), "nodes"));
  }
  SECTION("min above max") {
    cfg.min_ttl_ms = 2000;
    cfg.max_ttl_ms = 1000;
    CHECK(starts_with(validate_message(cfg), "max_ttl_ms: "));
  }
  SECTION("ranges are checked again") {
    cfg.node_timeout_ms = 0;
    CHECK(validate_message(cfg) == "node_timeout_ms: must be an integer between 1 and 10000");
    cfg.node_timeout_ms = 50;
    cfg.max_line_bytes = 10;
    CHECK(starts_with(validate_message(cfg), "max_line_bytes: "));
    cfg.max_line_bytes = 4096;
    cfg.clock_drift_factor = 0.5;
    CHECK(starts_with(validate_message(cfg), "clock_drift_factor: "));
    cfg.clock_drift_factor = 0.01;
    cfg.fence_key.clear();
    CHECK(starts_with(validate_message(cfg), "fence_key: "));
    cfg.fence_key = "f";
    cfg.log_level = "loud";
    CHECK(starts_with(validate_message(cfg), "log_level: "));
    cfg.log_level = "info";
    cfg.max_ttl_ms = 86'400'001;
    CHECK(starts_with(validate_message(cfg), "max_ttl_ms: "));
  }
}

TEST_CASE("tls and redis_tls are absent by default and read when given", "[config][tls]") {
  const config plain = parse_config("{}");
  CHECK_FALSE(plain.tls.has_value());
  CHECK_FALSE(plain.redis_tls.has_value());

  const config cfg = parse_config(R"({
    "tls": {"cert_file": "/etc/redlockd/server.crt", "key_file": "/etc/redlockd/server.key",
            "client_ca_file": "/etc/redlockd/clients-ca.crt", "handshake_timeout_ms": 2000},
    "redis_tls": {"ca_file": "/etc/redlockd/redis-ca.crt", "cert_file": "/etc/redlockd/c.crt",
                  "key_file": "/etc/redlockd/c.key", "server_name": "redis.internal"}})");
  REQUIRE(cfg.tls.has_value());
  CHECK(cfg.tls->cert_file == "/etc/redlockd/server.crt");
  CHECK(cfg.tls->key_file == "/etc/redlockd/server.key");
  CHECK(cfg.tls->client_ca_file == "/etc/redlockd/clients-ca.crt");
  CHECK(cfg.tls->handshake_timeout_ms == 2000);
  REQUIRE(cfg.redis_tls.has_value());
  CHECK(cfg.redis_tls->ca_file == "/etc/redlockd/redis-ca.crt");
  CHECK(cfg.redis_tls->cert_file == "/etc/redlockd/c.crt");
  CHECK(cfg.redis_tls->key_file == "/etc/redlockd/c.key");
  CHECK(cfg.redis_tls->server_name == "redis.internal");

  const config minimal = parse_config(R"({"tls": {"cert_file": "s.crt", "key_file": "s.key"},
                                          "redis_tls": {"ca_file": "ca.crt"}})");
  CHECK(minimal.tls->client_ca_file.empty());
  CHECK(minimal.tls->handshake_timeout_ms == 5000);
  CHECK(minimal.redis_tls->cert_file.empty());
  CHECK(minimal.redis_tls->server_name.empty());
}

TEST_CASE("tls blocks refuse missing files, unknown keys and wrong types by name",
          "[config][tls]") {
  CHECK(config_message(R"({"tls": true})") ==
        "tls: must be an object with cert_file, key_file and optionally client_ca_file");
  CHECK(config_message(R"({"tls": {}})") == "tls.cert_file: is required");
  CHECK(config_message(R"({"tls": {"cert_file": "s.crt"}})") == "tls.key_file: is required");
  CHECK(config_message(R"({"tls": {"cert_file": "", "key_file": "k"}})") ==
        "tls.cert_file: must be a file path");
  CHECK(config_message(R"({"tls": {"cert_file": 1, "key_file": "k"}})") ==
        "tls.cert_file: must be a string");
  CHECK(config_message(R"({"tls": {"cert_file": "c", "key_file": "k", "ca_file": "x"}})") ==
        "tls: unknown key 'ca_file'");
  CHECK(config_message(R"({"tls": {"cert_file": "c", "key_file": "k",
                                   "handshake_timeout_ms": 10}})") ==
        "tls.handshake_timeout_ms: must be an integer between 100 and 60000");

  CHECK(config_message(R"({"redis_tls": "yes"})") ==
        "redis_tls: must be an object with ca_file and optionally cert_file, key_file, "
        "server_name");
  CHECK(config_message(R"({"redis_tls": {}})") ==
        "redis_tls.ca_file: is required (the masters' certificates are verified)");
  CHECK(config_message(R"({"redis_tls": {"ca_file": "ca", "cert_file": "c"}})") ==
        "redis_tls.key_file: cert_file and key_file go together");
  CHECK(config_message(R"({"redis_tls": {"ca_file": "ca", "key_file": "k"}})") ==
        "redis_tls.cert_file: cert_file and key_file go together");
  CHECK(config_message(R"({"redis_tls": {"ca_file": "ca", "server_name": "a b"}})") ==
        "redis_tls.server_name: must be a host name or address (1-253 printable bytes, no "
        "spaces)");
  CHECK(config_message(R"({"redis_tls": {"ca_file": "ca", "verify": false}})") ==
        "redis_tls: unknown key 'verify'");
}

TEST_CASE("the link timings default to the values the links always used", "[config]") {
  const config cfg = parse_config("{}");
  CHECK(cfg.redis_connect_timeout_ms == 1000);
  CHECK(cfg.redis_health_interval_ms == 500);
  CHECK(cfg.redis_backoff_min_ms == 50);
  CHECK(cfg.redis_backoff_max_ms == 2000);
  CHECK(cfg.redis_stall_ms == 0);
  // 0: twenty node timeouts, at least one second.
  CHECK(redis_stall_limit_ms(cfg) == 1000);
  CHECK(redis_stall_limit_ms(parse_config(doc("node_timeout_ms", "51"))) == 1020);
  CHECK(redis_stall_limit_ms(parse_config(doc("node_timeout_ms", "10000"))) == 200'000);
  CHECK(redis_stall_limit_ms(parse_config(doc("redis_stall_ms", "300"))) == 300);
}

TEST_CASE("the link timings are read and range-checked", "[config]") {
  const config cfg = parse_config(R"({"redis_connect_timeout_ms": 250,
    "redis_health_interval_ms": 100, "redis_backoff_min_ms": 10, "redis_backoff_max_ms": 30000,
    "redis_stall_ms": 5000})");
  CHECK(cfg.redis_connect_timeout_ms == 250);
  CHECK(cfg.redis_health_interval_ms == 100);
  CHECK(cfg.redis_backoff_min_ms == 10);
  CHECK(cfg.redis_backoff_max_ms == 30000);
  CHECK(cfg.redis_stall_ms == 5000);

  struct range {
    std::string key;
    std::uint64_t min;
    std::uint64_t max;
  };
  for (const range& r : std::vector<range>{{"redis_connect_timeout_ms", 100, 60'000},
                                           {"redis_health_interval_ms", 10, 10'000},
                                           {"redis_backoff_min_ms", 1, 2000},
                                           {"redis_backoff_max_ms", 50, 600'000},
                                           {"redis_stall_ms", 0, 3'600'000}}) {
    CAPTURE(r.key);
    CHECK_NOTHROW(parse_config(doc(r.key, std::to_string(r.min))));
    CHECK_NOTHROW(parse_config(doc(r.key, std::to_string(r.max))));
    for (const std::string& bad : std::vector<std::string>{"-1", "1.5", "\"100\"", "true"})
      CHECK(starts_with(config_message(doc(r.key, bad)), r.key + ": must be an integer between "));
  }
  CHECK(config_message(doc("redis_connect_timeout_ms", "99")) ==
        "redis_connect_timeout_ms: must be an integer between 100 and 60000");
  CHECK(config_message(doc("redis_connect_timeout_ms", "60001")) ==
        "redis_connect_timeout_ms: must be an integer between 100 and 60000");
  CHECK(config_message(doc("redis_health_interval_ms", "9")) ==
        "redis_health_interval_ms: must be an integer between 10 and 10000");
  CHECK(config_message(doc("redis_health_interval_ms", "10001")) ==
        "redis_health_interval_ms: must be an integer between 10 and 10000");
  CHECK(config_message(doc("redis_backoff_min_ms", "0")) ==
        "redis_backoff_min_ms: must be an integer between 1 and 60000");
  CHECK(config_message(doc("redis_backoff_max_ms", "600001")) ==
        "redis_backoff_max_ms: must be an integer between 1 and 600000");
  CHECK(config_message(doc("redis_stall_ms", "3600001")) ==
        "redis_stall_ms: must be an integer between 0 and 3600000");
}

TEST_CASE("redis_backoff_max_ms may not be below redis_backoff_min_ms", "[config]") {
  const config equal =
      parse_config(R"({"redis_backoff_min_ms": 700, "redis_backoff_max_ms": 700})");
  CHECK(equal.redis_backoff_min_ms == 700);
  CHECK(equal.redis_backoff_max_ms == 700);
  const std::string message =
      "redis_backoff_max_ms: must be between redis_backoff_min_ms and 600000";
  CHECK(config_message(R"({"redis_backoff_min_ms": 701, "redis_backoff_max_ms": 700})") == message);
  // The default max is 2000: a larger min alone is inconsistent.
  CHECK(config_message(doc("redis_backoff_min_ms", "2001")) == message);
  CHECK(config_message(doc("redis_backoff_max_ms", "49")) == message);
}

TEST_CASE("redis_stall_ms is 0 or at least node_timeout_ms", "[config]") {
  CHECK(parse_config(R"({"node_timeout_ms": 200, "redis_stall_ms": 200})").redis_stall_ms == 200);
  CHECK(parse_config(R"({"node_timeout_ms": 200, "redis_stall_ms": 0})").redis_stall_ms == 0);
  CHECK(config_message(R"({"node_timeout_ms": 200, "redis_stall_ms": 199})") ==
        "redis_stall_ms: must be 0 or at least node_timeout_ms");
  CHECK(config_message(doc("redis_stall_ms", "1")) ==
        "redis_stall_ms: must be 0 or at least node_timeout_ms");
}

TEST_CASE("validate applies the ranges parsing applies, with the same messages", "[config]") {
  // One table drives both: an assembled config out of range gets the parser's message.
  struct out_of_range {
    std::string json_key;
    std::string value;
    std::function<void(config&)> assign;
  };
  const std::vector<out_of_range> cases{
      {"max_connections", "0", [](config& c) { c.max_connections = 0; }},
      {"max_waiters", "10000001", [](config& c) { c.max_waiters = 10'000'001; }},
      {"client_keepalive_s", "3601", [](config& c) { c.client_keepalive_s = 3601; }},
      {"startup_timeout_ms", "600001", [](config& c) { c.startup_timeout_ms = 600'001; }},
      {"auth_timeout_ms", "99", [](config& c) { c.auth_timeout_ms = 99; }},
      {"lock_delay_ms", "3600001", [](config& c) { c.lock_delay_ms = 3'600'001; }},
      {"redis_connect_timeout_ms", "60001", [](config& c) { c.redis_connect_timeout_ms = 60'001; }},
      {"redis_health_interval_ms", "0", [](config& c) { c.redis_health_interval_ms = 0; }},
      {"redis_backoff_min_ms", "0", [](config& c) { c.redis_backoff_min_ms = 0; }},
  };
  for (const out_of_range& c : cases) {
    CAPTURE(c.json_key);
    config cfg;
    c.assign(cfg);
    const std::string parsed = config_message(doc(c.json_key, c.value));
    CHECK(starts_with(parsed, c.json_key + ": must be an integer between "));
    CHECK(validate_message(cfg) == parsed);
  }

  config cfg;
  cfg.redis_backoff_max_ms = 10;
  CHECK(validate_message(cfg) ==
        "redis_backoff_max_ms: must be between redis_backoff_min_ms and 600000");
  cfg = config{};
  cfg.tls = listener_tls{"s.crt", "s.key", "", 99};
  CHECK(validate_message(cfg) ==
        "tls.handshake_timeout_ms: must be an integer between 100 and 60000");
  cfg.tls->handshake_timeout_ms = 100;
  CHECK_NOTHROW(validate(cfg));
}
