// One redlockd under test, started from a selectable binary (the harness can be pointed at an
// older build), its log appended across restarts so that what it reported survives a kill.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "process.hpp"

namespace redlockd::chaos {

class chaos_daemon {
 public:
  // Writes the config (listen on a free port, `nodes`, then `extra`) into `dir` and starts.
  chaos_daemon(std::string binary, const std::filesystem::path& dir,
               const std::vector<std::string>& nodes, const nlohmann::json& extra,
               std::size_t min_ok_nodes);
  ~chaos_daemon();
  chaos_daemon(const chaos_daemon&) = delete;
  chaos_daemon& operator=(const chaos_daemon&) = delete;

  // Starts (same port and config) and waits until `min_ok_nodes` masters are "ok" in INFO.
  void start();
  // Starts and waits only until INFO answers: the masters' states at start can be read, before
  // quarantines that keep `min_ok_nodes` from voting end. `start()` is this, then `wait_ready()`.
  void launch();
  void wait_ready();
  // SIGKILL, as a crash.
  void kill();
  // SIGTERM and wait (LeakSanitizer reports at exit); returns the exit status.
  int stop();
  void pause();
  void resume();
  bool running() { return process_.running(); }
  std::uint16_t port() const { return port_; }
  // INFO over a fresh connection, parsed. Throws on a bad reply or a dead daemon.
  nlohmann::json info() const;
  // The whole log, every start of this daemon.
  std::string log() const;

 private:
  void wait_until(const char* what, const std::function<bool(const nlohmann::json&)>& done);
  std::string binary_;
  std::filesystem::path config_;
  std::filesystem::path log_;
  std::vector<std::string> nodes_;
  std::size_t min_ok_nodes_;
  std::uint16_t port_ = 0;
  test::child_process process_;
};

// The daemon binary under test: --daemon-bin, else $REDLOCKD_CHAOS_DAEMON, else the one built
// with the suite.
std::string default_daemon_binary();

} // namespace redlockd::chaos
