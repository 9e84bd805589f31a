#include "daemon_process.hpp"

#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include <catch2/catch.hpp>

#include <algorithm>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "line_client.hpp"

#ifndef REDLOCKD_BINARY
#define REDLOCKD_BINARY "redlockd"
#endif

namespace {

bool test_failed = false;

// Remembers whether the running test case has a failed assertion, so helpers can dump logs.
struct redlockd_failure_listener : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;

  void testCaseStarting(Catch::TestCaseInfo const& info) override {
    test_failed = false;
    TestEventListenerBase::testCaseStarting(info);
  }

  bool assertionEnded(Catch::AssertionStats const& stats) override {
    if (!stats.assertionResult.isOk()) {
      test_failed = true;
    }
    return TestEventListenerBase::assertionEnded(stats);
  }
};

using clock_type = std::chrono::steady_clock;

} // namespace

CATCH_REGISTER_LISTENER(redlockd_failure_listener)

namespace redlockd::test {

bool current_test_failed() {
  return test_failed;
}

daemon_process::daemon_process(daemon_options options)
    : options_(std::move(options)), dir_("redlockd-daemon") {
  if (options_.ready_nodes.empty()) {
    options_.ready_nodes = options_.nodes;
  }
  port_ = free_loopback_port();
  config_path_ = dir_.path() / "redlockd.json";
  log_path_ = dir_.path() / "redlockd.log";
  // A roomier node timeout than the 50 ms default: CI machines are small and shared, and a
  // test about something else must not fail because a master answered late. Tests of timeouts
  // set their own.
  nlohmann::json config = {
      {"listen", "127.0.0.1:" + std::to_string(port_)},
      {"nodes", options_.nodes},
      {"node_timeout_ms", 250},
  };
  for (const auto& [key, value] : options_.extra.items()) {
    config[key] = value;
  }
  write_file(config_path_, config.dump(2) + "\n");
  start();
}

daemon_process::daemon_process(const std::vector<std::string>& nodes, nlohmann::json extra)
    : daemon_process(daemon_options{nodes, std::move(extra), {}, {}}) {}

daemon_process::~daemon_process() {
  process_.kill();
  if (current_test_failed() || std::uncaught_exceptions() > 0) {
    std::cerr << "----- redlockd log (" << log_path_.string() << ", port " << port_ << ") -----\n"
              << file_tail(log_path_, 16384) << "----- end of redlockd log -----\n";
  }
}

void daemon_process::start() {
  start(options_.min_ok_nodes);
}

void daemon_process::start(std::size_t min_ok_nodes) {
  process_.kill();
  std::vector<std::string> args{"--config", config_path_.string()};
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  process_ = child_process(REDLOCKD_BINARY, args, log_path_);
  wait_ready(std::min(min_ok_nodes, options_.ready_nodes.size()), options_.ready_timeout);
}

void daemon_process::wait_ready(std::size_t min_ok, std::chrono::milliseconds timeout) {
  const auto deadline = clock_type::now() + timeout;
  std::string last;
  while (clock_type::now() < deadline) {
    if (!process_.running()) {
      throw std::runtime_error("redlockd exited with status " +
                               std::to_string(process_.exit_status().value_or(-1)) +
                               " before it was ready; log:\n" + file_tail(log_path_));
    }
    try {
      const auto doc = info();
      if (count_nodes_in_state(doc, options_.ready_nodes, "ok") >= min_ok) {
        return;
      }
      last = doc.dump();
    } catch (const std::exception& e) {
      last = e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("redlockd on port " + std::to_string(port_) + " not ready within " +
                           std::to_string(timeout.count()) + " ms; last: " + last + "\nlog:\n" +
                           file_tail(log_path_));
}

int daemon_process::stop() {
  return process_.terminate(std::chrono::seconds(5));
}

int daemon_process::kill() {
  return process_.kill();
}

void daemon_process::restart() {
  kill();
  start();
}

line_client daemon_process::connect(std::chrono::milliseconds timeout) const {
  if (options_.client_tls) {
    return line_client(port_, *options_.client_tls, timeout);
  }
  return line_client(port_, timeout);
}

nlohmann::json daemon_process::info() const {
  line_client client = connect(std::chrono::seconds(2));
  if (!options_.client_secret.empty()) {
    const auto auth = client.request("AUTH " + options_.client_secret);
    if (auth != "OK") {
      throw std::runtime_error("AUTH replied: " + auth);
    }
  }
  const auto reply = client.request("INFO");
  if (reply.rfind("OK ", 0) != 0) {
    throw std::runtime_error("INFO replied: " + reply);
  }
  return nlohmann::json::parse(reply.substr(3));
}

std::size_t count_nodes_in_state(const nlohmann::json& info,
                                 const std::vector<std::string>& addresses,
                                 const std::string& state) {
  std::size_t count = 0;
  if (!info.contains("nodes") || !info["nodes"].is_array()) {
    return 0;
  }
  for (const auto& n : info["nodes"]) {
    if (!n.is_object() || !n.contains("address") || !n.contains("state") ||
        !n["address"].is_string() || !n["state"].is_string()) {
      continue;
    }
    const auto address = n["address"].get<std::string>();
    if (std::find(addresses.begin(), addresses.end(), address) != addresses.end() &&
        n["state"].get<std::string>() == state) {
      ++count;
    }
  }
  return count;
}

std::string node_state(const nlohmann::json& info, const std::string& address) {
  if (!info.contains("nodes") || !info["nodes"].is_array()) {
    return {};
  }
  for (const auto& n : info["nodes"]) {
    if (n.is_object() && n.value("address", "") == address) {
      return n.value("state", "");
    }
  }
  return {};
}

} // namespace redlockd::test
