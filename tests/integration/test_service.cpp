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
#include <regex>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proc.hpp"
#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

struct http_response {
  int status = 0;
  std::string headers;
  std::string body;
};

// One GET with Connection: close; reads until the server closes.
http_response http_get(std::uint16_t port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  REQUIRE(::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  std::string raw;
  char buffer[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0)
      break;
    raw.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  http_response response;
  const auto end_of_headers = raw.find("\r\n\r\n");
  REQUIRE(end_of_headers != std::string::npos);
  response.headers = raw.substr(0, end_of_headers);
  response.body = raw.substr(end_of_headers + 4);
  REQUIRE(response.headers.rfind("HTTP/1.1 ", 0) == 0);
  response.status = std::stoi(response.headers.substr(9, 3));
  return response;
}

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
  redis_fleet fleet;
  const std::uint16_t metrics_port = free_loopback_port();
  daemon_process daemon(fleet.addresses(),
                        {{"metrics_listen", "127.0.0.1:" + std::to_string(metrics_port)}});
  line_client client(daemon.port());
  const auto grant = parse_lock_ok(client.request("LOCK m 10000"));
  REQUIRE(grant);
  CHECK(starts_with(client.request("LOCK m 10000"), "BUSY"));
  CHECK(client.request("UNLOCK m " + grant->owner) == "OK");
  CHECK(client.request("EXTEND m " + grant->owner + " 10000") == "NOTHELD");
  CHECK(starts_with(client.request("LOCK"), "ERR SYNTAX"));

  const http_response response = http_get(metrics_port, "/metrics");
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
  for (const auto& address : fleet.addresses()) {
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

  CHECK(http_get(metrics_port, "/nothing").status == 404);
}

TEST_CASE("/healthz follows the quorum of masters", "[integration][service]") {
  redis_fleet fleet;
  const std::uint16_t metrics_port = free_loopback_port();
  daemon_process daemon(fleet.addresses(),
                        {{"metrics_listen", "127.0.0.1:" + std::to_string(metrics_port)}});
  CHECK(http_get(metrics_port, "/healthz").status == 200);
  fleet.kill(0);
  fleet.kill(1);
  CHECK(http_get(metrics_port, "/healthz").status == 200);
  fleet.kill(2);
  CHECK(eventually([&] { return http_get(metrics_port, "/healthz").status == 503; }, 5s));
  fleet.restart(2);
  CHECK(eventually([&] { return http_get(metrics_port, "/healthz").status == 200; }, 10s));
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
