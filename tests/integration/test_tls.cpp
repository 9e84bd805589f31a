// TLS on both sides: clients to the daemon (client certificates required) and the daemon to
// masters that speak TLS only. The main user flows, refusals, and hostile connections.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "test_env.hpp"
#include "tls_files.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

const std::string ctl = REDLOCKCTL_BINARY;

// The fleet's own connections present the client certificate but do not verify the masters:
// a test may give one master a certificate the daemon must refuse, and still look inside it.
fleet_tls fleet_settings(const test_pki& pki) {
  return fleet_tls{pki.server_cert, pki.server_key, pki.ca_file, true,
                   tls_client_files{"", pki.client_cert, pki.client_key}};
}

// The daemon's config: TLS for clients (certificates required) and for masters (verified, with
// a client certificate since the masters require one).
nlohmann::json tls_config(const test_pki& pki, nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json config = {
      {"tls",
       {{"cert_file", pki.server_cert},
        {"key_file", pki.server_key},
        {"client_ca_file", pki.ca_file}}},
      {"redis_tls",
       {{"ca_file", pki.ca_file}, {"cert_file", pki.client_cert}, {"key_file", pki.client_key}}},
  };
  for (const auto& [key, value] : extra.items()) {
    config[key] = value;
  }
  return config;
}

daemon_options tls_daemon(const test_pki& pki, const redis_fleet& fleet,
                          nlohmann::json extra = nlohmann::json::object()) {
  daemon_options options;
  options.nodes = fleet.addresses();
  options.extra = tls_config(pki, std::move(extra));
  options.client_tls = pki.client();
  return options;
}

// A TLS fleet of five masters and a TLS daemon in front of it.
struct tls_env {
  explicit tls_env(nlohmann::json extra = nlohmann::json::object())
      : fleet(5, fleet_settings(pki)), daemon(tls_daemon(pki, fleet, std::move(extra))) {}

  line_client client() const { return daemon.connect(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(daemon.port()); }
  std::vector<std::string> ctl_args(std::vector<std::string> args) const {
    args.insert(args.begin(), {"--addr", address(), "--cacert", pki.ca_file, "--cert",
                               pki.client_cert, "--key", pki.client_key});
    return args;
  }

  test_pki pki;
  redis_fleet fleet;
  daemon_process daemon;
};

// True when a TLS client with these files gets no PONG: the handshake fails, or the daemon
// closes the connection before answering (TLS 1.3 checks the client's certificate after the
// client has finished its side).
bool refused(std::uint16_t port, const tls_client_files& files) {
  try {
    line_client client(port, files, 3s);
    return client.request("PING") != "PONG";
  } catch (const std::exception&) {
    return true;
  }
}

std::vector<double> lock_unlock_round_trips_us(line_client& client, const std::string& resource,
                                               int cycles) {
  std::vector<double> samples;
  for (int i = 0; i < cycles; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const auto grant = parse_lock_ok(client.request("LOCK " + resource + " 10000"));
    REQUIRE(grant);
    REQUIRE(client.request("UNLOCK " + resource + " " + grant->owner) == "OK");
    samples.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count());
  }
  std::sort(samples.begin(), samples.end());
  return samples;
}

} // namespace

TEST_CASE("TLS on both sides - HELLO, LOCK, EXTEND, UNLOCK and increasing fencing tokens",
          "[tls]") {
  tls_env env;
  auto client = env.client();
  CHECK(starts_with(client.request("HELLO"), "OK redlockd "));
  CHECK(client.request("HELLO").find("nodes=5 quorum=3") != std::string::npos);
  CHECK(count_nodes_in_state(env.daemon.info(), env.fleet.addresses(), "ok") == 5);

  const auto first = parse_lock_ok(client.request("LOCK orders 10000"));
  REQUIRE(first);
  // The lock really is on the TLS masters.
  CHECK(nodes_holding(env.fleet, "orders", first->owner).size() >= 3);
  CHECK(starts_with(client.request("LOCK orders 10000"), "BUSY "));

  const auto extended = client.request("EXTEND orders " + first->owner + " 20000");
  REQUIRE(starts_with(extended, "OK "));
  CHECK(env.fleet.pttl(0, "orders") > 10000);

  CHECK(client.request("UNLOCK orders " + first->owner) == "OK");
  CHECK(nodes_holding(env.fleet, "orders", first->owner).empty());
  CHECK(client.request("UNLOCK orders " + first->owner) == "NOTHELD");

  const auto second = parse_lock_ok(client.request("LOCK orders 10000"));
  REQUIRE(second);
  CHECK(second->fence > first->fence);
  const auto third = parse_lock_ok(client.request("LOCK invoices 10000"));
  REQUIRE(third);
  CHECK(third->fence > second->fence);
  CHECK(client.request("QUIT") == "OK");
  CHECK(client.closed_by_peer());
}

TEST_CASE("TLS - QUIT and end of input close with close_notify after every reply", "[tls]") {
  tls_env env;
  {
    auto client = env.client();
    client.send("PING a\nPING b\nQUIT\nPING never\n");
    CHECK(client.read_line() == "PONG a");
    CHECK(client.read_line() == "PONG b");
    CHECK(client.read_line() == "OK");
    CHECK(client.closed_by_peer());
    CHECK(client.tls_close_notify_received());
  }
  {
    // The client's close_notify is its end of input: what came is answered, then the close.
    auto client = env.client();
    client.send("PING x\nHELLO\n");
    client.shutdown_write();
    CHECK(client.read_line() == "PONG x");
    CHECK(starts_with(client.read_line(), "OK redlockd "));
    CHECK(client.closed_by_peer());
    CHECK(client.tls_close_notify_received());
  }
}

TEST_CASE("TLS - the listen address speaks TLS only, no plaintext reply", "[tls]") {
  tls_env env;
  line_client plain(env.daemon.port(), 3s);
  plain.send("PING\n");
  const auto reply = plain.try_read_line(2s);
  CHECK_FALSE(reply.has_value());
  CHECK(plain.pending().find("PONG") == std::string::npos);
  CHECK(env.client().request("PING") == "PONG");
}

TEST_CASE("TLS - a WAIT is served when a KEEP holder disconnects", "[tls]") {
  tls_env env;
  std::optional<line_client> holder = env.client();
  const auto held = parse_lock_ok(holder->request("LOCK queue 10000 KEEP"));
  REQUIRE(held);

  auto waiter = env.client();
  waiter.send("LOCK queue 10000 WAIT 8000\n");
  CHECK_FALSE(waiter.try_read_line(300ms).has_value()); // still waiting

  holder.reset(); // the KEEP lock is released on every node when its connection closes
  const auto granted = parse_lock_ok(waiter.read_line());
  REQUIRE(granted);
  CHECK(granted->owner != held->owner);
  CHECK(granted->fence > held->fence);
  CHECK(nodes_holding(env.fleet, "queue", held->owner).empty());
  CHECK(nodes_holding(env.fleet, "queue", granted->owner).size() >= 3);
}

TEST_CASE("TLS - a master killed with SIGKILL and restarted comes back over TLS", "[tls]") {
  tls_env env(nlohmann::json{{"unsafe_disable_quarantine", true}});
  auto client = env.client();
  env.fleet.kill(0);
  CHECK(eventually([&] { return node_state(env.daemon.info(), env.fleet.address(0)) != "ok"; }));
  const auto during = parse_lock_ok(client.request("LOCK report 10000"));
  REQUIRE(during);
  CHECK(client.request("UNLOCK report " + during->owner) == "OK");

  env.fleet.restart(0);
  REQUIRE(eventually([&] { return node_state(env.daemon.info(), env.fleet.address(0)) == "ok"; }));
  const auto after = parse_lock_ok(client.request("LOCK report 10000"));
  REQUIRE(after);
  CHECK(after->fence > during->fence);
  // The restarted master voted: the link's new TLS connection carries commands.
  CHECK(env.fleet.get(0, "report") == after->owner);
}

TEST_CASE("TLS - redlockctl lock, ping and run over TLS with a client certificate", "[tls]") {
  tls_env env;
  const auto ping = run_command(ctl, env.ctl_args({"ping"}));
  CHECK(ping.status == 0);
  CHECK(ping.out == "PONG\n");

  const auto lock = run_command(ctl, env.ctl_args({"lock", "nightly", "--ttl", "10s"}));
  REQUIRE(lock.status == 0);
  const auto words = split_words(lock.out.substr(0, lock.out.find('\n')));
  REQUIRE(words.size() == 3);
  CHECK(run_command(ctl, env.ctl_args({"unlock", "nightly", words[0]})).status == 0);

  const auto run =
      run_command(ctl, env.ctl_args({"run", "backup", "--ttl", "5s", "--", "/bin/sh", "-c",
                                     "echo fence=$REDLOCK_FENCE; test -n \"$REDLOCK_OWNER\""}));
  CHECK(run.status == 0);
  CHECK(run.out.find("fence=") != std::string::npos);
  CHECK(lock_keys(env.fleet).empty()); // released after the command

  // Without a client certificate the daemon refuses; a wrong CA refuses the daemon.
  const auto no_cert =
      run_command(ctl, {"--addr", env.address(), "--cacert", env.pki.ca_file, "ping"});
  CHECK(no_cert.status == 5);
  const auto wrong_ca =
      run_command(ctl, {"--addr", env.address(), "--cacert", env.pki.rogue_ca_file, "--cert",
                        env.pki.client_cert, "--key", env.pki.client_key, "ping"});
  CHECK(wrong_ca.status == 5);
  CHECK(wrong_ca.err.find("certificate verify failed") != std::string::npos);

  // The same settings from the environment.
  const auto from_env = run_command(
      "/usr/bin/env",
      {"REDLOCKD_ADDR=" + env.address(), "REDLOCKD_TLS=1", "REDLOCKD_CACERT=" + env.pki.ca_file,
       "REDLOCKD_CERT=" + env.pki.client_cert, "REDLOCKD_KEY=" + env.pki.client_key, ctl, "ping"});
  CHECK(from_env.status == 0);
  CHECK(from_env.out == "PONG\n");
  // Without --tls or REDLOCKD_TLS=1 the files alone do not switch TLS on.
  const auto plain = run_command("/usr/bin/env", {"REDLOCKD_ADDR=" + env.address(),
                                                  "REDLOCKD_CACERT=" + env.pki.ca_file, ctl,
                                                  "--timeout", "2s", "ping"});
  CHECK(plain.status == 5);
}

TEST_CASE("TLS - clients without a valid certificate are refused and the daemon keeps serving",
          "[tls]") {
  tls_env env;
  const std::uint16_t port = env.daemon.port();
  CHECK(refused(port, {env.pki.ca_file, "", ""}));
  CHECK(refused(port, {env.pki.ca_file, env.pki.rogue_client_cert, env.pki.rogue_client_key}));
  CHECK(refused(port, {env.pki.rogue_ca_file, env.pki.client_cert, env.pki.client_key}));

  auto client = env.client();
  CHECK(client.request("PING") == "PONG");
  const auto grant = parse_lock_ok(client.request("LOCK after-refusals 5000"));
  REQUIRE(grant);
  CHECK(client.request("UNLOCK after-refusals " + grant->owner) == "OK");
  CHECK(env.daemon.running());
  CHECK(env.daemon.log().find("TLS handshake failed") != std::string::npos);
}

TEST_CASE("TLS - garbage, plaintext and silent connections do not hurt the daemon", "[tls]") {
  tls_env env;
  // Restart with a short handshake timeout, so that a silent connection is closed quickly.
  nlohmann::json config = nlohmann::json::parse(read_file(env.daemon.config_path()));
  config["tls"]["handshake_timeout_ms"] = 300;
  write_file(env.daemon.config_path(), config.dump(2));
  env.daemon.restart();

  const std::uint16_t port = env.daemon.port();
  {
    line_client garbage(port, 3s);
    std::string bytes;
    for (int i = 0; i < 4096; ++i) {
      bytes.push_back(static_cast<char>((i * 131 + 7) & 0xff));
    }
    garbage.send(bytes);
    CHECK(garbage.closed_by_peer(3s));
  }
  {
    line_client http(port, 3s);
    http.send("GET / HTTP/1.0\r\n\r\n");
    CHECK(http.closed_by_peer(3s));
  }
  {
    // Slowloris: connects and never starts the handshake.
    line_client silent(port, 3s);
    const auto start = std::chrono::steady_clock::now();
    CHECK(silent.closed_by_peer(5s));
    std::cout << "silent TLS connection closed after "
              << std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now() - start)
                     .count()
              << " ms (handshake_timeout_ms 300)\n";
  }
  {
    line_client reset(port, 3s);
    reset.send(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11));
    reset.reset();
  }
  auto client = env.client();
  CHECK(client.request("PING") == "PONG");
  CHECK(parse_lock_ok(client.request("LOCK after-garbage 5000")));
  CHECK(env.daemon.running());
  CHECK(env.daemon.log().find("timed out") != std::string::npos);
}

TEST_CASE("TLS - max_connections counts TLS connections, handshaking or not", "[tls]") {
  tls_env env(nlohmann::json{{"max_connections", 2}});
  auto first = env.client();
  line_client silent(env.daemon.port(), 3s); // holds a slot while it handshakes
  CHECK(refused(env.daemon.port(), env.pki.client()));
  CHECK(first.request("PING") == "PONG");
  silent.reset();
  CHECK(eventually([&] { return !refused(env.daemon.port(), env.pki.client()); }));
}

TEST_CASE("TLS - a master whose certificate does not verify is reported down", "[tls]") {
  test_pki pki;
  redis_fleet fleet(5, fleet_settings(pki));
  fleet.use_certificate(0, pki.rogue_server_cert, pki.rogue_server_key);
  auto options = tls_daemon(pki, fleet);
  options.min_ok_nodes = 4;
  daemon_process daemon(options);

  CHECK(eventually([&] { return node_state(daemon.info(), fleet.address(0)) == "down"; }));
  CHECK(count_nodes_in_state(daemon.info(), fleet.addresses(), "ok") == 4);
  CHECK(daemon.log().find("certificate verify failed") != std::string::npos);
  auto client = daemon.connect();
  const auto grant = parse_lock_ok(client.request("LOCK audited 10000"));
  REQUIRE(grant);
  // The reply came at quorum: the fourth verified master grants it a little later.
  CHECK(eventually([&] { return nodes_holding(fleet, "audited", grant->owner).size() == 4; }));
  CHECK(fleet.get(0, "audited") == std::nullopt); // the unverified master got nothing
}

TEST_CASE("TLS - masters are checked against server_name", "[tls]") {
  test_pki pki;
  redis_fleet fleet(3, fleet_settings(pki));
  SECTION("a name the certificates carry") {
    auto options = tls_daemon(pki, fleet,
                              {{"redis_tls",
                                {{"ca_file", pki.ca_file},
                                 {"cert_file", pki.client_cert},
                                 {"key_file", pki.client_key},
                                 {"server_name", "localhost"}}}});
    daemon_process daemon(options);
    CHECK(parse_lock_ok(daemon.connect().request("LOCK named 5000")));
  }
  SECTION("a name they do not carry") {
    auto options = tls_daemon(pki, fleet,
                              {{"redis_tls",
                                {{"ca_file", pki.ca_file},
                                 {"cert_file", pki.client_cert},
                                 {"key_file", pki.client_key},
                                 {"server_name", "redis.example.com"}}}});
    options.min_ok_nodes = 0;
    daemon_process daemon(options);
    CHECK(eventually(
        [&] { return count_nodes_in_state(daemon.info(), fleet.addresses(), "down") == 3; }));
    CHECK(starts_with(daemon.connect().request("LOCK named 5000"), "NOQUORUM "));
    CHECK(daemon.log().find("hostname mismatch") != std::string::npos);
  }
}

TEST_CASE("TLS - bad certificate files stop the start and fail --check-config", "[tls]") {
  test_pki pki;
  temp_dir dir("redlockd-tls-config");
  const auto config_with = [&](const nlohmann::json& tls) {
    const auto path = dir.path() / "redlockd.json";
    write_file(path, nlohmann::json{{"tls", tls}}.dump());
    return path.string();
  };
  const auto missing = run_command(
      REDLOCKD_BINARY,
      {"--check-config", "--config",
       config_with({{"cert_file", "/nonexistent/server.crt"}, {"key_file", pki.server_key}})});
  CHECK(missing.status == 2);
  CHECK(missing.err.find("tls.cert_file: cannot load '/nonexistent/server.crt'") !=
        std::string::npos);
  const auto mismatched =
      run_command(REDLOCKD_BINARY,
                  {"--check-config", "--config",
                   config_with({{"cert_file", pki.server_cert}, {"key_file", pki.client_key}})});
  CHECK(mismatched.status == 2);
  CHECK(mismatched.err.find("tls.key_file: cannot load '" + pki.client_key +
                            "': key values mismatch") != std::string::npos);
  const auto good =
      run_command(REDLOCKD_BINARY,
                  {"--check-config", "--config",
                   config_with({{"cert_file", pki.server_cert}, {"key_file", pki.server_key}})});
  CHECK(good.status == 0);
  const auto start = run_command(
      REDLOCKD_BINARY, {"--config", config_with({{"cert_file", pki.server_cert},
                                                 {"key_file", "/nonexistent/server.key"}})});
  CHECK(start.status == 1);
}

TEST_CASE("TLS - LOCK and UNLOCK round trip over TLS and plaintext, printed not asserted",
          "[tls]") {
  constexpr int cycles = 300;
  std::vector<double> plain;
  {
    fleet_and_daemon env;
    auto client = env.client();
    lock_unlock_round_trips_us(client, "warmup", 20);
    plain = lock_unlock_round_trips_us(client, "latency", cycles);
  }
  std::vector<double> tls;
  {
    tls_env env;
    auto client = env.client();
    lock_unlock_round_trips_us(client, "warmup", 20);
    tls = lock_unlock_round_trips_us(client, "latency", cycles);
  }
  REQUIRE(plain.size() == cycles);
  REQUIRE(tls.size() == cycles);
  const auto at = [](const std::vector<double>& v, double q) {
    return static_cast<long>(v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))]);
  };
  std::cout << "LOCK+UNLOCK round trip, 5 masters, " << cycles
            << " sequential cycles on one connection (us):\n"
            << "  plaintext      p50 " << at(plain, 0.5) << "  p90 " << at(plain, 0.9) << "  p99 "
            << at(plain, 0.99) << "\n"
            << "  TLS both sides p50 " << at(tls, 0.5) << "  p90 " << at(tls, 0.9) << "  p99 "
            << at(tls, 0.99) << "\n";
}

TEST_CASE("TLS - SIGTERM drains TLS clients, releases KEEP locks and exits 0", "[tls]") {
  tls_env env;
  auto idle = env.client();
  CHECK(idle.request("PING") == "PONG");
  auto keeper = env.client();
  const auto held = parse_lock_ok(keeper.request("LOCK drained 10000 KEEP"));
  REQUIRE(held);
  CHECK(env.daemon.stop() == 0);
  CHECK(idle.closed_by_peer());
  CHECK(keeper.read_line() == "LOST drained " + held->owner);
  CHECK(nodes_holding(env.fleet, "drained", held->owner).empty());
}

TEST_CASE("TLS - everything on: certificates both ways, a client secret and a Redis ACL user",
          "[tls][auth]") {
  test_pki pki;
  const std::string admin = "adm1n-pass";
  const std::string password = "redlockd-acl-pass";
  const std::string secret = "s3cret-over-tls";
  redis_fleet fleet(5, fleet_settings(pki), acl_args(admin, password), admin);
  temp_dir dir;
  write_file(dir.path() / "redis-password", password + "\n");
  write_file(dir.path() / "client-secret", secret + "\n");
  daemon_options options =
      tls_daemon(pki, fleet,
                 {{"redis_username", "redlockd"},
                  {"redis_password_file", (dir.path() / "redis-password").string()},
                  {"client_secret_file", (dir.path() / "client-secret").string()}});
  options.client_secret = secret;
  daemon_process daemon(options);

  line_client client = daemon.connect();
  CHECK(starts_with(client.request("LOCK vault 10000"), "ERR NOAUTH"));
  CHECK(starts_with(client.request("AUTH wrong"), "ERR AUTH_FAILED"));
  REQUIRE(client.request("AUTH " + secret) == "OK");
  const auto grant = parse_lock_ok(client.request("LOCK vault 10000"));
  REQUIRE(grant);
  CHECK(nodes_holding(fleet, "vault", grant->owner).size() >= 3);

  // A master restarted with the same ACL is authenticated again, over TLS.
  fleet.kill(0);
  fleet.restart(0);
  // (It is quarantined as restarted: the daemon has read its new run_id, so it got back in.)
  CHECK(eventually(
      [&] { return node_state(daemon.info(), fleet.address(0)) == "quarantined:restart"; }, 5s));
  CHECK(client.request("UNLOCK vault " + grant->owner) == "OK");
  CHECK(nodes_holding(fleet, "vault", grant->owner).empty());

  // redlockctl with every flag.
  write_file(dir.path() / "ctl-secret", secret + "\n");
  const std::vector<std::string> flags = {"--addr",   "127.0.0.1:" + std::to_string(daemon.port()),
                                          "--cacert", pki.ca_file,
                                          "--cert",   pki.client_cert,
                                          "--key",    pki.client_key};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = flags;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  CHECK(run_command(ctl, with({"--secret-file", (dir.path() / "ctl-secret").string(), "lock",
                               "vault", "--ttl", "5s"}))
            .status == 0);
  CHECK(run_command(ctl, with({"lock", "vault", "--ttl", "5s"})).status == 6); // no secret
  CHECK(daemon.running());
}
