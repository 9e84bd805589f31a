// listen_unix: the same protocol and sessions over a Unix-domain socket as over TCP, the socket
// file's mode, max_connections over both listeners, stale and live socket files, redlockctl's
// unix: addresses.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <sys/stat.h>

#include "checks.hpp"
#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

// A fleet and a daemon that also listens on `socket_file`.
struct unix_env {
  explicit unix_env(nlohmann::json extra = nlohmann::json::object())
      : socket_file(dir.path() / "redlockd.sock"), fleet(5),
        daemon(fleet.addresses(), with_socket(std::move(extra), socket_file)) {}

  static nlohmann::json with_socket(nlohmann::json extra, const std::filesystem::path& file) {
    extra["listen_unix"] = file.string();
    return extra;
  }

  line_client unix_client() const { return line_client(socket_file); }
  line_client tcp_client() const { return line_client(daemon.port()); }

  temp_dir dir;
  std::filesystem::path socket_file;
  redis_fleet fleet;
  daemon_process daemon;
};

unsigned file_mode(const std::filesystem::path& file) {
  struct stat info {};
  REQUIRE(::lstat(file.c_str(), &info) == 0);
  CHECK(S_ISSOCK(info.st_mode));
  return info.st_mode & 0777;
}

} // namespace

TEST_CASE("a Unix-socket client locks, is seen by TCP clients, and unlocks", "[integration]") {
  unix_env env;
  auto local = env.unix_client();
  auto remote = env.tcp_client();
  CHECK(local.request("PING") == "PONG");
  const auto grant = must_lock(local, "LOCK shared:1 10000");
  CHECK(starts_with(remote.request("LOCK shared:1 10000"), "BUSY "));
  CHECK(local.request("UNLOCK shared:1 " + grant.owner) == "OK");
  // And the other way round: a TCP holder, a Unix-socket client that waits for it.
  const auto held = must_lock(remote, "LOCK shared:2 10000");
  local.send("LOCK shared:2 10000 WAIT 5000\n");
  CHECK_FALSE(local.try_read_line(200ms));
  CHECK(remote.request("UNLOCK shared:2 " + held.owner) == "OK");
  const auto handed = parse_lock_ok(local.read_line());
  REQUIRE(handed);
  CHECK(handed->fence > held.fence);
  CHECK(local.request("UNLOCK shared:2 " + handed->owner) == "OK");
  CHECK(lock_keys(env.fleet).empty());
}

TEST_CASE("a KEEP lock taken over the Unix socket ends when that connection closes",
          "[integration]") {
  unix_env env;
  {
    auto local = env.unix_client();
    must_lock(local, "LOCK kept:1 10000 KEEP");
    auto remote = env.tcp_client();
    CHECK(starts_with(remote.request("LOCK kept:1 10000"), "BUSY "));
  }
  auto remote = env.tcp_client();
  CHECK(eventually(
      [&] { return parse_lock_ok(remote.request("LOCK kept:1 10000 WAIT 0")).has_value(); }));
}

TEST_CASE("the socket file has listen_unix_mode and is removed at shutdown", "[integration]") {
  unix_env env(nlohmann::json{{"listen_unix_mode", "0600"}});
  CHECK(file_mode(env.socket_file) == 0600);
  CHECK(env.daemon.stop() == 0);
  CHECK_FALSE(std::filesystem::exists(env.socket_file));
}

TEST_CASE("the default mode is 0660", "[integration]") {
  unix_env env;
  CHECK(file_mode(env.socket_file) == 0660);
}

TEST_CASE("max_connections counts the TCP and the Unix-socket clients together", "[integration]") {
  unix_env env(nlohmann::json{{"max_connections", 2}});
  auto local = env.unix_client();
  auto remote = env.tcp_client();
  // Both answered: both are sessions, so the limit is reached whatever else came before.
  CHECK(local.request("PING") == "PONG");
  CHECK(remote.request("PING") == "PONG");
  auto third = env.unix_client();
  const std::string refused = third.read_line();
  CHECK(starts_with(refused, "ERR TOO_MANY "));
  CHECK(third.closed_by_peer());
}

TEST_CASE("a socket file left by a killed daemon is replaced, and a live one stops the start",
          "[integration]") {
  unix_env env;
  env.daemon.kill();
  REQUIRE(std::filesystem::exists(env.socket_file)); // SIGKILL left it behind
  env.daemon.start();
  auto local = env.unix_client();
  CHECK(local.request("PING") == "PONG");

  // A second daemon on the same socket file while the first accepts on it.
  temp_dir other;
  const auto config = (other.path() / "config.json").string();
  nlohmann::json doc = {{"listen", "127.0.0.1:" + std::to_string(free_loopback_port())},
                        {"nodes", env.fleet.addresses()},
                        {"listen_unix", env.socket_file.string()}};
  write_file(config, doc.dump());
  const auto second = run_command(REDLOCKD_BINARY, {"--config", config}, 10s);
  CAPTURE(second.status, second.err);
  CHECK(second.status == 1);
  CHECK(second.err.find("another process is accepting connections on it") != std::string::npos);
  // The first daemon still serves on it.
  CHECK(env.unix_client().request("PING") == "PONG");
}

TEST_CASE("redlockctl reaches the daemon at unix:PATH", "[integration]") {
  unix_env env;
  const std::string addr = "unix:" + env.socket_file.string();
  const auto ping = run_command(REDLOCKCTL_BINARY, {"--addr", addr, "ping"});
  CAPTURE(ping.out, ping.err);
  CHECK(ping.status == 0);
  const auto locked =
      run_command(REDLOCKCTL_BINARY, {"--addr", addr, "lock", "ctl:1", "--ttl", "30s"});
  CAPTURE(locked.out, locked.err);
  REQUIRE(locked.status == 0);
  auto remote = env.tcp_client();
  CHECK(starts_with(remote.request("LOCK ctl:1 10000"), "BUSY "));

  const auto missing = run_command(
      REDLOCKCTL_BINARY, {"--addr", "unix:" + (env.dir.path() / "none").string(), "ping"});
  CHECK(missing.status != 0);
  CHECK(missing.err.find("No such file or directory") != std::string::npos);
  const auto with_tls = run_command(REDLOCKCTL_BINARY, {"--addr", addr, "--tls", "ping"});
  CHECK(with_tls.status != 0);
  CHECK(with_tls.err.find("--tls does not apply to a unix: address") != std::string::npos);
}
