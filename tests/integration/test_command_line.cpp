// The binary's command line: --version, --help, --check-config, exit codes, overrides.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <system_error>

#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

const std::string binary = REDLOCKD_BINARY;

// A config file in `dir` with `doc` as its content.
std::string write_config(const temp_dir& dir, const nlohmann::json& doc,
                         const std::string& name = "config.json") {
  const auto path = (dir.path() / name).string();
  write_file(path, doc.dump(2));
  return path;
}

nlohmann::json valid_config() {
  return {{"listen", "127.0.0.1:" + std::to_string(free_loopback_port())},
          {"nodes", {"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}}};
}

// Exit 2 and stderr naming `key`.
void check_rejected(const run_result& r, const std::string& key) {
  CAPTURE(r.status, r.out, r.err);
  CHECK(r.status == 2);
  CHECK(r.err.find(key) != std::string::npos);
}

} // namespace

TEST_CASE("redlockd --version and --help", "[integration]") {
  const auto version = run_command(binary, {"--version"});
  CAPTURE(version.out, version.err);
  CHECK(version.status == 0);
  CHECK(version.out == "redlockd " REDLOCKD_VERSION "\n");

  const auto help = run_command(binary, {"--help"});
  CAPTURE(help.out, help.err);
  CHECK(help.status == 0);
  CHECK(help.out.find("--config") != std::string::npos);
  CHECK(help.out.find("--check-config") != std::string::npos);
}

TEST_CASE("redlockd --check-config accepts a valid file and rejects bad ones with exit 2",
          "[integration]") {
  temp_dir dir("redlockd-cli");

  SECTION("valid, with every key") {
    auto doc = valid_config();
    doc["key_prefix"] = "app:";
    doc["fence_key"] = "app:fence";
    doc["clock_drift_factor"] = 0.01;
    doc["node_timeout_ms"] = 50;
    doc["min_ttl_ms"] = 10;
    doc["max_ttl_ms"] = 3600000;
    doc["max_line_bytes"] = 4096;
    doc["log_level"] = "info";
    const auto r = run_command(binary, {"--check-config", "--config", write_config(dir, doc)});
    CAPTURE(r.out, r.err);
    CHECK(r.status == 0);
  }
  SECTION("valid, minimal") {
    const auto r =
        run_command(binary, {"--check-config", "--config", write_config(dir, valid_config())});
    CAPTURE(r.out, r.err);
    CHECK(r.status == 0);
  }
  SECTION("unknown key") {
    auto doc = valid_config();
    doc["no_such_setting"] = 1;
    check_rejected(run_command(binary, {"--check-config", "--config", write_config(dir, doc)}),
                   "no_such_setting");
  }
  SECTION("node_timeout_ms of the wrong type") {
    auto doc = valid_config();
    doc["node_timeout_ms"] = "fast";
    check_rejected(run_command(binary, {"--check-config", "--config", write_config(dir, doc)}),
                   "node_timeout_ms");
  }
  SECTION("node_timeout_ms negative") {
    auto doc = valid_config();
    doc["node_timeout_ms"] = -5;
    check_rejected(run_command(binary, {"--check-config", "--config", write_config(dir, doc)}),
                   "node_timeout_ms");
  }
  SECTION("malformed node address") {
    auto doc = valid_config();
    doc["nodes"] = {"127.0.0.1:7001", "not-an-address"};
    check_rejected(run_command(binary, {"--check-config", "--config", write_config(dir, doc)}),
                   "nodes");
  }
  SECTION("not JSON") {
    const auto path = (dir.path() / "broken.json").string();
    write_file(path, "{ \"listen\": ");
    const auto r = run_command(binary, {"--check-config", "--config", path});
    CAPTURE(r.out, r.err);
    CHECK(r.status == 2);
    CHECK_FALSE(r.err.empty());
  }
  SECTION("missing file") {
    const auto path = (dir.path() / "does-not-exist.json").string();
    const auto r = run_command(binary, {"--check-config", "--config", path});
    CAPTURE(r.out, r.err);
    CHECK(r.status == 2);
    CHECK_FALSE(r.err.empty());
  }
}

TEST_CASE("a bad config stops the daemon itself with exit 2", "[integration]") {
  temp_dir dir("redlockd-cli");
  SECTION("unknown key") {
    auto doc = valid_config();
    doc["bogus_key"] = true;
    check_rejected(run_command(binary, {"--config", write_config(dir, doc)}), "bogus_key");
  }
  SECTION("bad node_timeout_ms") {
    auto doc = valid_config();
    doc["node_timeout_ms"] = "fast";
    check_rejected(run_command(binary, {"--config", write_config(dir, doc)}), "node_timeout_ms");
  }
  SECTION("missing file") {
    const auto r = run_command(binary, {"--config", (dir.path() / "nope.json").string()});
    CAPTURE(r.out, r.err);
    CHECK(r.status == 2);
  }
  SECTION("unknown option") {
    const auto r = run_command(binary, {"--no-such-option"});
    CAPTURE(r.out, r.err);
    CHECK(r.status == 2);
  }
}

TEST_CASE("redlockd --listen overrides the file's listen address", "[integration]") {
  redis_fleet fleet;
  temp_dir dir("redlockd-cli");
  const auto file_port = free_loopback_port();
  auto port = free_loopback_port();
  while (port == file_port) {
    port = free_loopback_port();
  }
  const nlohmann::json doc = {{"listen", "127.0.0.1:" + std::to_string(file_port)},
                              {"nodes", fleet.addresses()}};
  const auto config = write_config(dir, doc);
  child_process daemon(binary,
                       {"--config", config, "--listen", "127.0.0.1:" + std::to_string(port)},
                       dir.path() / "redlockd.log");
  const bool up = wait_for_ping(port, 10s);
  if (!up) {
    WARN("redlockd log:\n" << file_tail(dir.path() / "redlockd.log"));
  }
  REQUIRE(up);
  line_client c(port);
  CHECK(c.request("HELLO") == "OK redlockd " REDLOCKD_VERSION " proto=1.1 nodes=5 quorum=3");
  CHECK_THROWS_AS(line_client(file_port), std::system_error); // nothing on the file's port
  CHECK(daemon.terminate(30s) == 0); // SIGTERM: a clean exit, LeakSanitizer's check included
  CHECK(sanitizer_report(read_file(dir.path() / "redlockd.log")).empty());
}

TEST_CASE("redlockd --nodes overrides the file's nodes", "[integration]") {
  redis_fleet fleet(3);
  // The file names five masters where nothing listens; the command line names the real three.
  std::vector<std::string> bogus;
  for (int i = 0; i < 5; ++i) {
    bogus.push_back("127.0.0.1:" + std::to_string(free_loopback_port()));
  }
  daemon_options options;
  options.nodes = bogus;
  options.ready_nodes = fleet.addresses();
  options.extra_args = {"--nodes",
                        fleet.address(0) + "," + fleet.address(1) + "," + fleet.address(2)};
  daemon_process daemon(options);
  line_client c(daemon.port());
  CHECK(c.request("HELLO") == "OK redlockd " REDLOCKD_VERSION " proto=1.1 nodes=3 quorum=2");
  const auto info = daemon.info();
  CHECK(info.at("nodes").size() == 3);
  CHECK(count_nodes_in_state(info, fleet.addresses(), "ok") == 3);
  const auto grant = parse_lock_ok(c.request("LOCK res 10000"));
  REQUIRE(grant);
  CHECK(nodes_holding(fleet, "res", grant->owner).size() >= 2);
  CHECK(c.request("UNLOCK res " + grant->owner) == "OK");
}
