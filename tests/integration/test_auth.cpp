// Who gets in: the client secret (AUTH), Redis ACL credentials for the masters, and redlockctl's
// --secret-file. The real daemon over TCP against real redis-server processes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "checks.hpp"
#include "http_get.hpp"
#include "proc.hpp"
#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

const std::string secret = "c0rrect-h0rse-battery-staple";
const std::string owner_sample = "0123456789abcdef0123456789abcdef01234567";

// A fleet and a daemon whose clients must AUTH with `secret` (read from a file).
struct secured {
  explicit secured(nlohmann::json extra = nlohmann::json::object())
      : secret_file(write_secret(dir, secret)), daemon(options(fleet, secret_file, extra)) {}

  static std::string write_secret(const temp_dir& where, const std::string& value) {
    const auto path = where.path() / "client-secret";
    write_file(path, value + "\n");
    return path.string();
  }
  static daemon_options options(const redis_fleet& fleet, const std::string& file,
                                nlohmann::json extra) {
    daemon_options o;
    o.nodes = fleet.addresses();
    o.extra = std::move(extra);
    o.extra["client_secret_file"] = file;
    o.client_secret = secret;
    return o;
  }
  line_client client() const { return line_client(daemon.port()); }
  line_client authenticated() const {
    line_client c(daemon.port());
    REQUIRE(c.request("AUTH " + secret) == "OK");
    return c;
  }

  redis_fleet fleet;
  temp_dir dir;
  std::string secret_file;
  daemon_process daemon;
};

} // namespace

TEST_CASE("with a client secret every verb but PING HELLO AUTH QUIT answers ERR NOAUTH",
          "[integration][auth]") {
  secured env;
  line_client client = env.client();
  for (const std::string& request : std::vector<std::string>{
           "LOCK res 1000", "LOCK res 1000 WAIT 100 KEEP", "UNLOCK res " + owner_sample,
           "EXTEND res " + owner_sample + " 1000", "INFO", "info", "STATUS res"}) {
    const std::string reply = client.request(request);
    INFO(request << " -> " << reply);
    CHECK(starts_with(reply, "ERR NOAUTH "));
  }
  CHECK(client.request("PING") == "PONG");
  CHECK(client.request("PING word") == "PONG word");
  CHECK(starts_with(client.request("HELLO"), "OK redlockd "));
  // Parse errors still come first: a malformed request is told what is wrong with it.
  CHECK(starts_with(client.request("LOCK"), "ERR SYNTAX "));
  CHECK(starts_with(client.request("FROB"), "ERR UNKNOWN_COMMAND "));
  CHECK(client.request("QUIT") == "OK");
  CHECK(client.closed_by_peer());
  CHECK(lock_keys(env.fleet).empty());
}

TEST_CASE("the right secret opens every verb, pipelined requests are answered in order",
          "[integration][auth]") {
  secured env;
  line_client client = env.client();
  // One write: refused, allowed, AUTH, then the same LOCK again, which now goes through.
  client.send("LOCK piped 5000\nPING\nAUTH " + secret + "\nLOCK piped 5000\nINFO\n");
  CHECK(starts_with(client.read_line(), "ERR NOAUTH "));
  CHECK(client.read_line() == "PONG");
  CHECK(client.read_line() == "OK");
  const auto grant = parse_lock_ok(client.read_line());
  REQUIRE(grant);
  CHECK(starts_with(client.read_line(), "OK {"));
  CHECK(eventually([&] { return nodes_holding(env.fleet, "piped", grant->owner).size() == 5; }));
  CHECK(starts_with(client.request("EXTEND piped " + grant->owner + " 5000"), "OK "));
  CHECK(client.request("UNLOCK piped " + grant->owner) == "OK");
  CHECK(lock_keys(env.fleet).empty());
  // AUTH again on an authenticated connection: still OK.
  CHECK(client.request("AUTH " + secret) == "OK");
}

TEST_CASE("a wrong secret is refused, counted in INFO and /metrics, and logged without it",
          "[integration][auth]") {
  const std::uint16_t metrics_port = free_loopback_port();
  secured env(nlohmann::json{{"metrics_listen", "127.0.0.1:" + std::to_string(metrics_port)}});
  const std::string wrong = "n0t-the-secret-at-all";
  line_client client = env.client();
  CHECK(starts_with(client.request("AUTH " + wrong), "ERR AUTH_FAILED "));
  CHECK(starts_with(client.request("AUTH " + secret + "x"), "ERR AUTH_FAILED "));
  CHECK(starts_with(client.request("LOCK r 1000"), "ERR NOAUTH "));
  // Two failures, under the default max_auth_failures of 3: the connection lives on.
  CHECK(client.request("AUTH " + secret) == "OK");
  CHECK(parse_lock_ok(client.request("LOCK r 1000")));

  CHECK(env.daemon.info().at("counters").at("auth_failures") == 2);
  const std::string metrics = http_get(metrics_port, "/metrics").body;
  CHECK(metrics.find("redlockd_auth_failures_total 2\n") != std::string::npos);

  const std::string log = env.daemon.log();
  CHECK(log.find("AUTH refused") != std::string::npos);
  CHECK(log.find("from 127.0.0.1:") != std::string::npos); // the peer address
  CHECK(log.find(wrong) == std::string::npos);
  CHECK(log.find(secret) == std::string::npos);
}

TEST_CASE("the max_auth_failures-th wrong secret is answered and the connection closed",
          "[integration][auth]") {
  secured env(nlohmann::json{{"max_auth_failures", 2}});
  line_client client = env.client();
  CHECK(starts_with(client.request("AUTH wrong1"), "ERR AUTH_FAILED "));
  // Pipelined after the closing failure: never answered.
  client.send("AUTH wrong2\nPING\n");
  const std::string last = client.read_line();
  CHECK(starts_with(last, "ERR AUTH_FAILED "));
  CHECK(last.find("closing") != std::string::npos);
  CHECK(client.closed_by_peer());
  // Counted per connection: a new one starts from zero, and the right secret still works.
  line_client again = env.client();
  CHECK(starts_with(again.request("AUTH wrong3"), "ERR AUTH_FAILED "));
  CHECK(again.request("AUTH " + secret) == "OK");
  CHECK(env.daemon.info().at("counters").at("auth_failures") == 3);
}

TEST_CASE("a connection that does not authenticate within auth_timeout_ms is closed",
          "[integration][auth]") {
  secured env(nlohmann::json{{"auth_timeout_ms", 300}});
  line_client idle = env.client();
  line_client pinging = env.client();
  line_client in = env.authenticated();
  const auto start = std::chrono::steady_clock::now();
  CHECK(pinging.request("PING") == "PONG"); // PING does not count as authenticating
  CHECK(idle.closed_by_peer(3s));
  CHECK(pinging.closed_by_peer(3s));
  std::cout << "unauthenticated connection closed after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - start)
                   .count()
            << " ms (auth_timeout_ms 300)\n";
  // The authenticated one is past the deadline and still served.
  std::this_thread::sleep_for(200ms);
  CHECK(in.request("PING") == "PONG");
  CHECK(env.daemon.log().find("not authenticated within 300 ms") != std::string::npos);
}

TEST_CASE("wrong secrets from many connections do not stop an authenticated client",
          "[integration][auth]") {
  secured env(nlohmann::json{{"max_auth_failures", 3}});
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> refused{0};
  std::atomic<std::uint64_t> closed{0};
  std::vector<std::thread> guessers;
  for (int t = 0; t < 4; ++t) {
    guessers.emplace_back([&, t] {
      std::uint64_t n = 0;
      while (!stop) {
        try {
          line_client guesser(env.daemon.port(), 2s);
          for (int i = 0; i < 3; ++i) {
            const auto reply =
                guesser.request("AUTH guess-" + std::to_string(t) + "-" + std::to_string(n++));
            if (starts_with(reply, "ERR AUTH_FAILED "))
              ++refused;
          }
          if (guesser.closed_by_peer(2s))
            ++closed;
        } catch (const std::exception&) {
          // A connection reset by the daemon's close: the next one starts fresh.
        }
      }
    });
  }

  line_client client = env.authenticated();
  std::vector<double> latencies_ms;
  const auto until = std::chrono::steady_clock::now() + 2s;
  int served = 0;
  while (std::chrono::steady_clock::now() < until) {
    const auto start = std::chrono::steady_clock::now();
    const auto grant = parse_lock_ok(client.request("LOCK busy-door 5000"));
    REQUIRE(grant);
    REQUIRE(client.request("UNLOCK busy-door " + grant->owner) == "OK");
    latencies_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    ++served;
  }
  stop = true;
  for (auto& g : guessers)
    g.join();

  std::sort(latencies_ms.begin(), latencies_ms.end());
  auto at = [&](double q) {
    return latencies_ms[static_cast<std::size_t>(q * static_cast<double>(latencies_ms.size() - 1))];
  };
  std::cout << "authenticated LOCK+UNLOCK under " << refused.load() << " refused AUTHs ("
            << closed.load() << " connections closed): " << served << " cycles in 2 s, p50 "
            << at(0.5) << " ms, p99 " << at(0.99) << " ms, max " << latencies_ms.back() << " ms\n";
  CHECK(served > 0);
  CHECK(refused > 0);
  CHECK(closed > 0);
  CHECK(env.daemon.info().at("counters").at("auth_failures") >= refused.load());
  CHECK(lock_keys(env.fleet).empty());
  // The log is bounded: far fewer lines than refusals when there were many.
  const std::string log = env.daemon.log();
  const auto lines = static_cast<std::uint64_t>(std::count(log.begin(), log.end(), '\n'));
  std::cout << "daemon log: " << lines << " lines for " << refused.load() << " refusals\n";
  CHECK(lines < 100 + refused.load() / 2);
}

TEST_CASE("the client secret can come from REDLOCKD_CLIENT_SECRET, and SIGHUP reads it again",
          "[integration][auth]") {
  redis_fleet fleet;
  SECTION("environment") {
    // The daemon inherits the test's environment.
    REQUIRE(::setenv("REDLOCKD_CLIENT_SECRET", "env-secret", 1) == 0);
    daemon_options o;
    o.nodes = fleet.addresses();
    o.client_secret = "env-secret";
    daemon_process daemon(o);
    ::unsetenv("REDLOCKD_CLIENT_SECRET");
    line_client client(daemon.port());
    CHECK(starts_with(client.request("INFO"), "ERR NOAUTH "));
    CHECK(client.request("AUTH env-secret") == "OK");
    CHECK(starts_with(client.request("INFO"), "OK {"));
  }
  SECTION("SIGHUP") {
    temp_dir dir;
    const auto file = dir.path() / "secret";
    write_file(file, "old-secret\n");
    daemon_options o;
    o.nodes = fleet.addresses();
    o.extra = {{"client_secret_file", file.string()}};
    o.client_secret = "old-secret";
    daemon_process daemon(o);
    line_client before(daemon.port());
    REQUIRE(before.request("AUTH old-secret") == "OK");

    write_file(file, "new-secret\n");
    const int pid = daemon_pid(daemon);
    REQUIRE(pid > 0);
    REQUIRE(::kill(pid, SIGHUP) == 0);
    REQUIRE(eventually(
        [&] { return daemon.log().find("client secret changed") != std::string::npos; }));
    line_client after(daemon.port());
    CHECK(starts_with(after.request("AUTH old-secret"), "ERR AUTH_FAILED "));
    CHECK(after.request("AUTH new-secret") == "OK");
    // A connection that was in stays in.
    CHECK(starts_with(before.request("INFO"), "OK {"));
    CHECK(daemon.log().find("new-secret") == std::string::npos);
  }
}

TEST_CASE("without a client secret AUTH answers OK and nothing is gated", "[integration][auth]") {
  fleet_and_daemon env;
  line_client client = env.client();
  CHECK(starts_with(client.request("INFO"), "OK {"));
  CHECK(client.request("AUTH whatever") == "OK");
  CHECK(env.daemon.info().at("counters").at("auth_failures") == 0);
}

TEST_CASE("an empty client secret file is a configuration error naming the key",
          "[integration][auth]") {
  temp_dir dir;
  const auto config = dir.path() / "redlockd.json";
  const auto empty = dir.path() / "empty";
  write_file(empty, "\n");
  write_file(config, nlohmann::json{{"client_secret_file", empty.string()}}.dump());
  const auto result = run_command(REDLOCKD_BINARY, {"--config", config.string(), "--check-config"});
  CHECK(result.status == 2);
  CHECK(result.err.find("client_secret_file: ") != std::string::npos);
  CHECK(result.err.find("is empty") != std::string::npos);
}

TEST_CASE("the daemon authenticates to ACL masters, and again after a master restarts",
          "[integration][auth][redis]") {
  const std::string admin = "adm1n-pass";
  const std::string password = "l0ck-user-pass";
  redis_fleet fleet(5, acl_args(admin, password), admin);
  temp_dir dir;
  write_file(dir.path() / "redis-password", password + "\n");
  daemon_process daemon(fleet.addresses(),
                        {{"redis_username", "redlockd"},
                         {"redis_password_file", (dir.path() / "redis-password").string()},
                         {"unsafe_disable_quarantine", true}});
  line_client client(daemon.port());
  const auto grant = parse_lock_ok(client.request("LOCK acl-res 10000"));
  REQUIRE(grant);
  CHECK(eventually([&] { return nodes_holding(fleet, "acl-res", grant->owner).size() == 5; }));
  CHECK(client.request("UNLOCK acl-res " + grant->owner) == "OK");
  // The daemon's connections run as the ACL user.
  CHECK(fleet.run(0, "CLIENT", "LIST").str.find("user=redlockd") != std::string::npos);
  // The ACL line of docs/security.md covers the wake channel too: every subscriber is up.
  CHECK(eventually([&] { return all_wake_subscribed(daemon); }));

  fleet.kill(2);
  REQUIRE(eventually([&] { return node_state(daemon.info(), fleet.address(2)) != "ok"; }));
  fleet.restart(2);
  REQUIRE(eventually([&] { return node_state(daemon.info(), fleet.address(2)) == "ok"; }));
  CHECK(fleet.run(2, "CLIENT", "LIST").str.find("user=redlockd") != std::string::npos);
  const auto again = parse_lock_ok(client.request("LOCK acl-res 10000"));
  REQUIRE(again);
  CHECK(eventually([&] { return nodes_holding(fleet, "acl-res", again->owner).size() == 5; }));
  CHECK(client.request("UNLOCK acl-res " + again->owner) == "OK");
  CHECK(lock_keys(fleet).empty());

  const std::string log = daemon.log();
  CHECK(log.find(password) == std::string::npos);
  CHECK(log.find("redis authentication on (user 'redlockd')") != std::string::npos);
}

TEST_CASE("a requirepass master takes the password alone from REDLOCKD_REDIS_PASSWORD",
          "[integration][auth][redis]") {
  const std::string password = "default-user-pass";
  redis_fleet fleet(5, {"--requirepass", password}, password);
  REQUIRE(::setenv("REDLOCKD_REDIS_PASSWORD", password.c_str(), 1) == 0);
  daemon_process daemon(fleet.addresses());
  ::unsetenv("REDLOCKD_REDIS_PASSWORD");
  line_client client(daemon.port());
  const auto grant = parse_lock_ok(client.request("LOCK default-res 5000"));
  REQUIRE(grant);
  CHECK(client.request("UNLOCK default-res " + grant->owner) == "OK");
  CHECK(daemon.log().find(password) == std::string::npos);
}

TEST_CASE("a wrong Redis password leaves the masters down and LOCK answers NOQUORUM",
          "[integration][auth][redis]") {
  const std::string admin = "adm1n-pass";
  const std::string wrong = "wr0ng-lock-pass";
  redis_fleet fleet(5, acl_args(admin, "the-real-pass"), admin);
  temp_dir dir;
  write_file(dir.path() / "redis-password", wrong + "\n");
  daemon_options o;
  o.nodes = fleet.addresses();
  // At debug level too: the refusals after the first are logged there.
  o.extra = {{"redis_username", "redlockd"},
             {"redis_password_file", (dir.path() / "redis-password").string()},
             {"log_level", "debug"}};
  o.min_ok_nodes = 0;
  daemon_process daemon(o);
  REQUIRE(eventually(
      [&] { return count_nodes_in_state(daemon.info(), fleet.addresses(), "down:auth") == 5; }));
  line_client client(daemon.port());
  CHECK(client.request("LOCK refused-res 5000") == "NOQUORUM 0 3");
  CHECK(lock_keys(fleet).empty());
  // Retried with backoff, never accepted, never logged with the password.
  CHECK(eventually([&] {
    const std::string log = daemon.log();
    return log.find("AUTH refused for user 'redlockd'") != std::string::npos &&
           log.find("AUTH refused again") != std::string::npos;
  }));
  const std::string log = daemon.log();
  CHECK(log.find(wrong) == std::string::npos);
  CHECK(log.find("the-real-pass") == std::string::npos);
  CHECK(daemon.info().dump().find(wrong) == std::string::npos);
}

TEST_CASE("redlockctl authenticates with --secret-file or REDLOCKD_CLIENT_SECRET",
          "[integration][auth][redlockctl]") {
  secured env;
  const std::string ctl = REDLOCKCTL_BINARY;
  const std::string addr = "127.0.0.1:" + std::to_string(env.daemon.port());

  const auto locked = run_command(
      ctl, {"--addr", addr, "--secret-file", env.secret_file, "lock", "ctl-res", "--ttl", "30s"});
  REQUIRE(locked.status == 0);
  const auto words = split_words(locked.out.substr(0, locked.out.find('\n')));
  REQUIRE(words.size() == 3);

  // The daemon's variable name works for redlockctl too.
  const auto status = run_command("/usr/bin/env", {"REDLOCKD_CLIENT_SECRET=" + secret, ctl,
                                                   "--addr", addr, "status", "ctl-res"});
  CHECK(status.status == 0);
  CHECK(status.out.starts_with("held "));
  CHECK(status.err.empty());
  // The old name still works, with a deprecation line.
  const auto unlocked = run_command("/usr/bin/env", {"REDLOCKD_SECRET=" + secret, ctl, "--addr",
                                                     addr, "unlock", "ctl-res", words[0]});
  CHECK(unlocked.status == 0);
  CHECK(unlocked.err.find("REDLOCKD_SECRET is deprecated; set REDLOCKD_CLIENT_SECRET") !=
        std::string::npos);
  CHECK(lock_keys(env.fleet).empty());

  // No secret: the daemon says NOAUTH, redlockctl says what to do, exit 6.
  const auto none = run_command(ctl, {"--addr", addr, "info"});
  CHECK(none.status == 6);
  CHECK(none.err.find("--secret-file") != std::string::npos);

  // A wrong secret: exit 6, the secret not echoed.
  const auto wrong_file = env.dir.path() / "wrong";
  write_file(wrong_file, "not-it\n");
  const auto wrong = run_command(ctl, {"--addr", addr, "--secret-file", wrong_file.string(), "lock",
                                       "ctl-res", "--ttl", "30s"});
  CHECK(wrong.status == 6);
  CHECK(wrong.err.find("authentication refused: ERR AUTH_FAILED") != std::string::npos);
  CHECK(wrong.err.find("not-it") == std::string::npos);
  const auto wrong_run = run_command(
      ctl, {"--addr", addr, "--secret-file", wrong_file.string(), "run", "ctl-res", "--", "true"});
  CHECK(wrong_run.status == 6);

  const auto missing =
      run_command(ctl, {"--addr", addr, "--secret-file", "/nonexistent/secret", "ping"});
  CHECK(missing.status == 64);
  CHECK(lock_keys(env.fleet).empty());
}
