#include "chaos_daemon.hpp"

#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "daemon_process.hpp"
#include "line_client.hpp"

#ifndef REDLOCKD_BINARY
#define REDLOCKD_BINARY "redlockd"
#endif

namespace redlockd::chaos {

std::string default_daemon_binary() {
  if (const char* env = std::getenv("REDLOCKD_CHAOS_DAEMON"); env != nullptr && *env != '\0')
    return env;
  return REDLOCKD_BINARY;
}

chaos_daemon::chaos_daemon(std::string binary, const std::filesystem::path& dir,
                           const std::vector<std::string>& nodes, const nlohmann::json& extra,
                           std::size_t min_ok_nodes)
    : binary_(std::move(binary)), config_(dir / "redlockd.json"), log_(dir / "redlockd.log"),
      nodes_(nodes), min_ok_nodes_(min_ok_nodes), port_(test::free_loopback_port()) {
  std::filesystem::create_directories(dir);
  nlohmann::json config = {{"listen", "127.0.0.1:" + std::to_string(port_)}, {"nodes", nodes}};
  for (const auto& [key, value] : extra.items())
    config[key] = value;
  test::write_file(config_, config.dump(2) + "\n");
  start();
}

chaos_daemon::~chaos_daemon() {
  process_.kill();
}

void chaos_daemon::start() {
  launch();
  wait_ready();
}

void chaos_daemon::launch() {
  process_.kill();
  process_ = test::child_process(binary_, {"--config", config_.string()}, log_);
  wait_until("INFO answers", [](const nlohmann::json&) { return true; });
}

void chaos_daemon::wait_ready() {
  wait_until("ready", [this](const nlohmann::json& doc) {
    return test::count_nodes_in_state(doc, nodes_, "ok") >= min_ok_nodes_;
  });
}

void chaos_daemon::wait_until(const char* what,
                              const std::function<bool(const nlohmann::json&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!process_.running())
      throw std::runtime_error(binary_ + " exited with status " +
                               std::to_string(process_.exit_status().value_or(-1)) +
                               " at start; log:\n" + test::file_tail(log_));
    try {
      const auto doc = info();
      if (done(doc))
        return;
      last = doc.dump();
    } catch (const std::exception& e) {
      last = e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("redlockd on port " + std::to_string(port_) + " not " + what +
                           "; last: " + last + "\nlog:\n" + test::file_tail(log_));
}

void chaos_daemon::kill() {
  process_.kill();
}

int chaos_daemon::stop() {
  process_.signal(SIGCONT);
  return process_.terminate(std::chrono::seconds(10));
}

void chaos_daemon::pause() {
  process_.signal(SIGSTOP);
}

void chaos_daemon::resume() {
  process_.signal(SIGCONT);
}

nlohmann::json chaos_daemon::info() const {
  test::line_client c(port_, std::chrono::seconds(3));
  const std::string reply = c.request("INFO");
  if (reply.rfind("OK ", 0) != 0)
    throw std::runtime_error("INFO: " + reply);
  return nlohmann::json::parse(reply.substr(3));
}

std::string chaos_daemon::log() const {
  return test::read_file(log_);
}

} // namespace redlockd::chaos
