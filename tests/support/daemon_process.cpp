#include "daemon_process.hpp"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "line_client.hpp"

#ifndef REDLOCKD_BINARY
#define REDLOCKD_BINARY "redlockd"
#endif

namespace {

using clock_type = std::chrono::steady_clock;

// How a status of child_process reads in a message.
std::string describe_status(int status) {
  if (status > 128) {
    return "signal " + std::to_string(status - 128) + " (" + ::strsignal(status - 128) + ")";
  }
  return "exit code " + std::to_string(status);
}

} // namespace

namespace redlockd::test {

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
  try {
    if (!checked_) {
      const std::string problems = stop_and_check();
      if (!problems.empty()) {
        report_problem("redlockd on port " + std::to_string(port_) + ": " + problems);
      }
    }
  } catch (...) {
    report_problem("redlockd on port " + std::to_string(port_) + ": could not be checked");
  }
  process_.kill(); // whatever happened above, no daemon outlives the test
  if (current_test_failed() || std::uncaught_exceptions() > 0) {
    std::cerr << "----- redlockd log (" << log_path_.string() << ", port " << port_ << ") -----\n"
              << file_tail(log_path_, 16384) << "----- end of redlockd log -----\n";
  }
}

void daemon_process::start() {
  start(options_.min_ok_nodes);
}

void daemon_process::start(std::size_t min_ok_nodes) {
  note_unexpected_exit("start()");
  process_.kill();
  exit_expected_ = false;
  checked_ = false;
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

std::chrono::milliseconds daemon_process::stop_timeout() const {
  std::int64_t shutdown_ms = 5000; // the daemon's default shutdown_timeout_ms
  const auto it = options_.extra.find("shutdown_timeout_ms");
  if (it != options_.extra.end() && it->is_number_integer()) {
    shutdown_ms = it->get<std::int64_t>();
  }
  return std::chrono::milliseconds(shutdown_ms) + std::chrono::seconds(20);
}

void daemon_process::note_unexpected_exit(const std::string& noticed_at) {
  if (exit_expected_ || process_.pid() < 0 || process_.running()) {
    return;
  }
  exit_expected_ = true; // reported once
  problems_.push_back("it ended on its own with " +
                      describe_status(process_.exit_status().value_or(-1)) +
                      " before the test stopped it (noticed at " + noticed_at + ")");
}

int daemon_process::stop() {
  note_unexpected_exit("stop()");
  if (!process_.running()) {
    return process_.exit_status().value_or(-1);
  }
  exit_expected_ = true;
  process_.signal(SIGTERM);
  process_.signal(SIGCONT);
  const auto timeout = stop_timeout();
  if (const auto status = process_.wait_for(timeout)) {
    if (*status != 0) {
      problems_.push_back("it exited with " + describe_status(*status) + " after SIGTERM");
    }
    return *status;
  }
  problems_.push_back("it did not exit within " + std::to_string(timeout.count()) +
                      " ms of SIGTERM and was killed with SIGKILL");
  return process_.kill();
}

int daemon_process::kill() {
  note_unexpected_exit("kill()");
  exit_expected_ = true;
  return process_.kill();
}

std::string daemon_process::stop_and_check() {
  checked_ = true;
  stop();
  if (const auto report = sanitizer_report(read_file(log_path_)); !report.empty()) {
    problems_.push_back("its log " + log_path_.string() + " holds a sanitizer report:\n" + report);
  }
  std::string out;
  for (const auto& problem : problems_) {
    out += (out.empty() ? "" : "\n") + problem;
  }
  problems_.clear();
  return out;
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
