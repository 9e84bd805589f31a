// What an operator sees: /metrics and /healthz over HTTP, systemd readiness, graceful stop.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <netinet/in.h>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

#include "checks.hpp"
#include "http_get.hpp"
#include "proc.hpp"
#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

// A strict reading of the Prometheus text format: every sample belongs to the family declared
// by the TYPE line before it, names and labels are well formed, values are numbers. Returns
// "name{labels}" -> value.
std::map<std::string, double> parse_exposition(const std::string& text) {
  static const std::regex help_line(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+)");
  static const std::regex type_line(
      R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped))");
  static const std::regex sample_line(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*")*\})? ([-+]?([0-9.]+([eE][-+]?[0-9]+)?|Inf|NaN)))");
  std::map<std::string, double> samples;
  std::map<std::string, std::string> types;
  std::string family;
  std::string family_type;
  std::istringstream lines(text);
  std::string line;
  REQUIRE(!text.empty());
  REQUIRE(text.back() == '\n');
  while (std::getline(lines, line)) {
    INFO("line: " << line);
    std::smatch m;
    if (std::regex_match(line, m, help_line))
      continue;
    if (std::regex_match(line, m, type_line)) {
      family = m[1];
      family_type = m[2];
      REQUIRE(types.count(family) == 0); // declared once
      types[family] = family_type;
      continue;
    }
    REQUIRE(std::regex_match(line, m, sample_line));
    const std::string name = m[1];
    if (family_type == "histogram")
      REQUIRE((name == family + "_bucket" || name == family + "_sum" || name == family + "_count"));
    else
      REQUIRE(name == family);
    const std::string key = name + std::string(m[2]);
    REQUIRE(samples.count(key) == 0);
    samples[key] = std::stod(m[7]);
  }
  return samples;
}

} // namespace

TEST_CASE("/metrics is valid Prometheus text and counts what happened", "[integration][service]") {
  fleet_with_metrics env;
  line_client client(env.daemon.port());
  const auto grant = parse_lock_ok(client.request("LOCK m 10000"));
  REQUIRE(grant);
  CHECK(starts_with(client.request("LOCK m 10000"), "BUSY"));
  CHECK(client.request("UNLOCK m " + grant->owner) == "OK");
  CHECK(client.request("EXTEND m " + grant->owner + " 10000") == "NOTHELD");
  CHECK(starts_with(client.request("LOCK"), "ERR SYNTAX"));

  const http_response response = http_get(env.metrics_port, "/metrics");
  CHECK(response.status == 200);
  CHECK(response.headers.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  const auto samples = parse_exposition(response.body);
  CHECK(samples.at(R"(redlockd_results_total{op="lock",outcome="ok"})") == 1);
  CHECK(samples.at(R"(redlockd_results_total{op="lock",outcome="busy"})") == 1);
  CHECK(samples.at(R"(redlockd_results_total{op="lock",outcome="noquorum"})") == 0);
  CHECK(samples.at(R"(redlockd_results_total{op="unlock",outcome="ok"})") == 1);
  CHECK(samples.at(R"(redlockd_results_total{op="extend",outcome="notheld"})") == 1);
  CHECK(samples.at(R"(redlockd_results_total{op="extend",outcome="ok"})") == 0);
  CHECK(samples.at(R"(redlockd_results_total{op="other",outcome="error"})") == 1);
  CHECK(samples.at("redlockd_build_info{version=\"" REDLOCKD_VERSION "\"}") == 1);
  CHECK(samples.at("redlockd_clients") == 1);
  CHECK(samples.at("redlockd_fence_high_water") >= static_cast<double>(grant->fence));
  for (const auto& address : env.fleet.addresses()) {
    CHECK(samples.at("redlockd_node_up{node=\"" + address + "\"}") == 1);
    CHECK(samples.at("redlockd_node_state{node=\"" + address + "\",state=\"ok\"}") == 1);
    CHECK(samples.at("redlockd_node_state{node=\"" + address + "\",state=\"down\"}") == 0);
  }
  CHECK(samples.at("redlockd_quorum") == 3);
  CHECK(samples.at("redlockd_nodes_voting") == 5);
  // The process_* metrics of every Prometheus client library, from /proc.
  CHECK(samples.at("process_cpu_seconds_total") >= 0); // in clock ticks: 0 for a short run
  CHECK(samples.at("process_resident_memory_bytes") > 1e6);
  CHECK(samples.at("process_open_fds") >= 7); // the listeners, five masters, this scrape
  CHECK(samples.at("process_max_fds") >= samples.at("process_open_fds"));
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(samples.at("process_start_time_seconds") <= now + 1);
  CHECK(samples.at("process_start_time_seconds") > now - 600);

  // Buckets are cumulative and +Inf equals the count.
  double previous = 0;
  for (const char* le : {"0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
                         "0.05", "0.1", "0.25", "0.5", "1", "5", "+Inf"}) {
    const double value =
        samples.at("redlockd_acquire_duration_seconds_bucket{le=\"" + std::string(le) + "\"}");
    CHECK(value >= previous);
    previous = value;
  }
  CHECK(previous == samples.at("redlockd_acquire_duration_seconds_count"));
  CHECK(previous == 2); // two LOCKs answered

  CHECK(http_get(env.metrics_port, "/nothing").status == 404);
}

namespace {

// Where /metrics carries each INFO counter (PROTOCOL.md, "The metrics port"): the family and the
// labels of the samples whose sum is the counter. A counter INFO gains must be added here, and so
// exported, or the test below fails.
struct exported_as {
  std::string family;
  std::vector<std::string> labels; // each `name="value"` a sample must have
};
const std::map<std::string, exported_as> info_counters_in_metrics = {
    {"acquired", {"redlockd_results_total", {R"(op="lock")", R"(outcome="ok")"}}},
    {"busy", {"redlockd_results_total", {R"(op="lock")", R"(outcome="busy")"}}},
    {"noquorum", {"redlockd_results_total", {R"(outcome="noquorum")"}}},
    {"released", {"redlockd_results_total", {R"(op="unlock")", R"(outcome="ok")"}}},
    {"extended", {"redlockd_results_total", {R"(op="extend")", R"(outcome="ok")"}}},
    {"notheld", {"redlockd_results_total", {R"(outcome="notheld")"}}},
    {"lost", {"redlockd_lost_total", {}}},
    {"renewed", {"redlockd_renewals_total", {}}},
    {"delayed", {"redlockd_lock_delay_refusals_total", {}}},
    {"fence_conflicts", {"redlockd_fence_conflicts_total", {}}},
    {"handovers", {"redlockd_handovers_total", {}}},
    {"wakeups", {"redlockd_wakeups_total", {}}},
    {"restarts", {"redlockd_master_faults_total", {R"(kind="restart")"}}},
    {"clock_jumps", {"redlockd_master_faults_total", {R"(kind="clock_jump")"}}},
    {"clock_jumps_backward", {"redlockd_master_clock_jumps_backward_total", {}}},
    {"key_losses", {"redlockd_master_faults_total", {R"(kind="key_loss")"}}},
    {"auth_failures", {"redlockd_auth_failures_total", {}}},
};

// The sum of the samples of `family` that have every label of `labels`; std::nullopt when there
// is none.
std::optional<double> sum_of(const std::map<std::string, double>& samples,
                             const exported_as& series) {
  std::optional<double> sum;
  for (const auto& [key, value] : samples) {
    const std::string name = key.substr(0, key.find('{'));
    if (name != series.family)
      continue;
    bool all = true;
    for (const auto& label : series.labels)
      all = all && key.find(label) != std::string::npos;
    if (all)
      sum = sum.value_or(0) + value;
  }
  return sum;
}

} // namespace

TEST_CASE("every INFO counter is exported in /metrics, with the same value",
          "[integration][service]") {
  fleet_with_metrics env;
  // Traffic that moves most counters: grants, BUSY, a hand-over to a waiter, NOTHELD, EXTEND.
  line_client holder(env.daemon.port());
  line_client waiter(env.daemon.port());
  const auto grant = parse_lock_ok(holder.request("LOCK c 10000"));
  REQUIRE(grant);
  CHECK(starts_with(holder.request("LOCK c 10000"), "BUSY"));
  // The UNLOCK hands over only to a waiter between attempts: wait until the waiter's first
  // attempt has been decided (one more round in the histogram), not only until it is queued.
  const auto rounds = [&] {
    return parse_exposition(http_get(env.metrics_port, "/metrics").body)
        .at("redlockd_acquire_round_duration_seconds_count");
  };
  const double rounds_before = rounds();
  waiter.send("LOCK c 10000 WAIT 10000\n");
  REQUIRE(eventually([&] { return env.daemon.info().at("waiters") == 1; }));
  REQUIRE(eventually([&] { return rounds() == rounds_before + 1; }));
  CHECK(holder.request("UNLOCK c " + grant->owner) == "OK");
  const auto handed = parse_lock_ok(waiter.read_line());
  REQUIRE(handed);
  CHECK(starts_with(waiter.request("EXTEND c " + handed->owner + " 10000"), "OK "));
  CHECK(holder.request("UNLOCK c " + grant->owner) == "NOTHELD");

  const nlohmann::json counters = env.daemon.info().at("counters");
  const auto samples = parse_exposition(http_get(env.metrics_port, "/metrics").body);
  CHECK(counters.at("handovers") == 1);
  std::set<std::string> in_info;
  for (const auto& [name, value] : counters.items()) {
    in_info.insert(name);
    INFO("INFO counter " << name);
    const auto it = info_counters_in_metrics.find(name);
    if (it == info_counters_in_metrics.end()) {
      FAIL_CHECK("is not known to be exported: export it in /metrics, then add it to "
                 "info_counters_in_metrics and to PROTOCOL.md");
      continue;
    }
    const std::optional<double> exported = sum_of(samples, it->second);
    if (!exported) {
      FAIL_CHECK("is not in /metrics as " << it->second.family);
      continue;
    }
    CHECK(*exported == value.get<double>());
  }
  for (const auto& [name, series] : info_counters_in_metrics) {
    INFO(name << " (" << series.family << ") is expected among INFO's counters");
    CHECK(in_info.count(name) == 1);
  }
  // INFO's figures besides the counters are exported too.
  for (const char* gauge :
       {"redlockd_quorum", "redlockd_uptime_seconds", "redlockd_clients", "redlockd_waiters",
        "redlockd_keep_locks", "redlockd_operations_in_flight", "redlockd_fence_high_water",
        "redlockd_max_ttl_granted_seconds"}) {
    INFO(gauge);
    CHECK(samples.count(gauge) == 1);
  }
}

TEST_CASE("INFO and /metrics count grants by lock kind", "[integration][service]") {
  fleet_with_metrics env;
  line_client c(env.daemon.port());
  must_lock(c, "LOCK a 10000");
  must_lock(c, "LOCK b 10000");
  must_lock(c, "LOCK r 10000 SHARED");
  must_lock(c, "LOCK s 10000 PERMITS 2");
  CHECK(starts_with(c.request("MLOCK 2 x y 10000"), "OK "));
  CHECK(starts_with(c.request("LOCK a 10000"), "BUSY")); // a refusal counts nowhere
  const nlohmann::json info = env.daemon.info();
  const nlohmann::json expected = {{"exclusive", 2}, {"shared", 1}, {"permit", 1}, {"multi", 1}};
  CHECK(info.at("grants") == expected);
  CHECK(info.at("counters").at("acquired") == 5);
  const auto samples = parse_exposition(http_get(env.metrics_port, "/metrics").body);
  for (const auto& [kind, count] : expected.items()) {
    INFO("kind " << kind);
    CHECK(samples.at("redlockd_grants_total{kind=\"" + kind + "\"}") == count.get<double>());
  }
}

TEST_CASE("a WAIT's queueing goes to the wait histogram, each attempt to the round histogram",
          "[integration][service]") {
  fleet_with_metrics env;
  line_client holder(env.daemon.port());
  line_client waiter(env.daemon.port());
  const auto grant = parse_lock_ok(holder.request("LOCK h 10000"));
  REQUIRE(grant);
  waiter.send("LOCK h 10000 WAIT 10000\n");
  REQUIRE(eventually([&] { return env.daemon.info().at("waiters") == 1; }));
  // Held for 600 ms more once the waiter is queued: it cannot get the lock sooner.
  std::this_thread::sleep_for(600ms);
  CHECK(holder.request("UNLOCK h " + grant->owner) == "OK");
  REQUIRE(parse_lock_ok(waiter.read_line()));

  const auto samples = parse_exposition(http_get(env.metrics_port, "/metrics").body);
  // Two LOCKs granted: the holder's without a wait, the waiter's after more than 0.5 s.
  CHECK(samples.at("redlockd_acquire_wait_duration_seconds_count") == 2);
  CHECK(samples.at(R"(redlockd_acquire_wait_duration_seconds_bucket{le="0.5"})") == 1);
  CHECK(samples.at("redlockd_acquire_wait_duration_seconds_sum") >= 0.5);
  // Rounds: the holder's, the waiter's refused first attempt, its hand-over round at least.
  CHECK(samples.at("redlockd_acquire_round_duration_seconds_count") >= 3);
  // The client's view is still there: request to reply, WAIT included.
  CHECK(samples.at("redlockd_acquire_duration_seconds_count") == 2);
  CHECK(samples.at("redlockd_acquire_duration_seconds_sum") >=
        samples.at("redlockd_acquire_wait_duration_seconds_sum"));
}

TEST_CASE("/healthz follows the quorum of masters that vote", "[integration][service]") {
  fleet_with_metrics env;
  CHECK(eventually([&] { return http_get(env.metrics_port, "/healthz").status == 200; }));
  env.fleet.kill(0);
  env.fleet.kill(1);
  CHECK(http_get(env.metrics_port, "/healthz").status == 200);
  // A master that stops answering (data intact) is dropped, then counts again once back.
  env.fleet.pause(2);
  CHECK(eventually([&] { return http_get(env.metrics_port, "/healthz").status == 503; }, 10s));
  env.fleet.resume(2);
  CHECK(eventually([&] { return http_get(env.metrics_port, "/healthz").status == 200; }, 10s));
  // A master restarted empty does not vote while fewer than a majority of the masters that
  // kept their data can say how long it must sit out: no LOCK could be granted, and /healthz
  // says so although three masters are connected.
  env.fleet.kill(2);
  env.fleet.restart(2);
  CHECK(eventually(
      [&] { return node_state(env.daemon.info(), env.fleet.address(2)) == "quarantined:restart"; },
      10s));
  CHECK(http_get(env.metrics_port, "/healthz").status == 503);
}

TEST_CASE("SIGTERM releases KEEP locks on every master and exits 0", "[integration][service]") {
  fleet_and_daemon env;
  line_client keeper = env.client();
  const auto grant = parse_lock_ok(keeper.request("LOCK kept 30000 KEEP"));
  REQUIRE(grant);
  line_client plain = env.client();
  REQUIRE(parse_lock_ok(plain.request("LOCK lease 30000")));
  REQUIRE(eventually([&] { return nodes_holding(env.fleet, "kept", grant->owner).size() == 5; }));

  const int status = env.daemon.stop();
  CHECK(status == 0);
  CHECK(keeper.read_line() == "LOST kept " + grant->owner);
  CHECK(keeper.closed_by_peer());
  CHECK(nodes_holding(env.fleet, "kept", grant->owner).empty());
  // A plain lease is not the daemon's to release: it stays until its TTL.
  for (std::size_t i = 0; i < 5; ++i)
    CHECK(env.fleet.pttl(i, "lease") > 0);
}

TEST_CASE("systemd hears READY=1 once a quorum of masters is connected", "[integration][service]") {
  redis_fleet fleet;
  temp_dir dir;
  const std::string path = dir.path().string() + "/notify.sock";
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof addr.sun_path);
  std::copy(path.begin(), path.end(), addr.sun_path);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  timeval tv{0, 200'000};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

  ::setenv("NOTIFY_SOCKET", path.c_str(), 1); // inherited by the daemon only
  daemon_process daemon(fleet.addresses());
  ::unsetenv("NOTIFY_SOCKET");

  std::string heard;
  const bool ready = eventually(
      [&] {
        char buffer[512];
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n > 0)
          heard.append(buffer, static_cast<std::size_t>(n)).push_back('|');
        return heard.find("READY=1") != std::string::npos;
      },
      5s);
  INFO("heard: " << heard);
  CHECK(ready);
  CHECK(heard.find("STATUS=") != std::string::npos);
  daemon.stop();
  CHECK(eventually(
      [&] {
        char buffer[512];
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n > 0)
          heard.append(buffer, static_cast<std::size_t>(n)).push_back('|');
        return heard.find("STOPPING=1") != std::string::npos;
      },
      5s));
  ::close(fd);
}

TEST_CASE("JSON logs go to log_file, and SIGHUP reopens it and applies the new level",
          "[integration][service]") {
  redis_fleet fleet;
  temp_dir dir;
  const std::string log_file = dir.path().string() + "/redlockd.log";
  daemon_process daemon(fleet.addresses(), {{"log_format", "json"}, {"log_file", log_file}});
  line_client client(daemon.port());
  REQUIRE(parse_lock_ok(client.request("LOCK logged 1000")));

  auto records = [&](const std::string& path) {
    std::vector<nlohmann::json> out;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line))
      out.push_back(nlohmann::json::parse(line)); // throws if a line is not one JSON object
    return out;
  };
  const auto first = records(log_file);
  REQUIRE(!first.empty());
  for (const auto& record : first) {
    CHECK(record.at("time").is_string());
    CHECK(record.at("level").is_string());
    CHECK(record.at("message").is_string());
  }
  CHECK(first.front().at("message").get<std::string>().find("listening on") != std::string::npos);

  // logrotate moves the file away, edits nothing else, then sends SIGHUP.
  std::filesystem::rename(log_file, log_file + ".1");
  nlohmann::json doc = nlohmann::json::parse(read_file(daemon.config_path()));
  doc["log_level"] = "debug";
  std::ofstream(daemon.config_path()) << doc.dump();
  const int pid = daemon_pid(daemon);
  REQUIRE(pid > 0);
  REQUIRE(::kill(pid, SIGHUP) == 0);
  CHECK(eventually([&] {
    for (const auto& record : records(log_file))
      if (record.at("message").get<std::string>().find("level debug") != std::string::npos)
        return true;
    return false;
  }));
  CHECK(client.request("PING") == "PONG"); // still serving
}
