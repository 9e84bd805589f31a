// The real redlockd binary, started on a free loopback port with a generated config file.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "harness.hpp"
#include "line_client.hpp"
#include "process.hpp"
#include "tls_files.hpp"

namespace redlockd::test {

struct daemon_options {
  // "host:port" of the masters, written to the config's "nodes".
  std::vector<std::string> nodes;
  // Extra top-level config fields (e.g. {"key_prefix": "app:"}); they override listen/nodes too.
  nlohmann::json extra = nlohmann::json::object();
  // Extra command-line arguments after "--config FILE".
  std::vector<std::string> extra_args;
  // Addresses INFO must report as "ok" before the daemon counts as ready; empty = `nodes`.
  std::vector<std::string> ready_nodes;
  // How many of `ready_nodes` must be "ok"; the default means all of them.
  std::size_t min_ok_nodes = std::numeric_limits<std::size_t>::max();
  std::chrono::milliseconds ready_timeout = std::chrono::seconds(10);
  // When the daemon has a client secret: info() (and so the readiness check) sends AUTH first.
  std::string client_secret{};
  // Set when the config has a "tls" block: how the harness's own connections (INFO) speak TLS.
  std::optional<tls_client_files> client_tls = std::nullopt;
};

class daemon_process {
 public:
  explicit daemon_process(daemon_options options);
  explicit daemon_process(const std::vector<std::string>& nodes,
                          nlohmann::json extra = nlohmann::json::object());
  // Calls stop_and_check() unless the test did, and fails the running test case (report_problem)
  // with what it found; then prints the log to stderr if the test case has failed.
  ~daemon_process();
  daemon_process(const daemon_process&) = delete;
  daemon_process& operator=(const daemon_process&) = delete;

  // Starts (or starts again, same port and config) and waits until ready.
  void start();
  // The same, waiting until at least `min_ok_nodes` of the ready nodes are "ok".
  void start(std::size_t min_ok_nodes);
  // Waits until the daemon accepts TCP and INFO reports at least `min_ok` of `ready_nodes` "ok".
  // Throws std::runtime_error (with the log tail) on timeout or when the daemon exits.
  void wait_ready(std::size_t min_ok, std::chrono::milliseconds timeout);
  // SIGTERM (and SIGCONT, should the daemon be stopped), then waits for it to exit: up to its
  // shutdown_timeout_ms plus 20 s, for LeakSanitizer runs at exit in sanitizer builds. Returns
  // the exit status. A daemon that needs SIGKILL after all, or exits other than with 0, is a
  // problem that stop_and_check() returns.
  int stop();
  // SIGKILL, on purpose: the exit status (137) is no problem. Returns it.
  int kill();
  // Stops the daemon as stop() does unless the test stopped or killed it, and returns what went
  // wrong with it, one problem a line: it ended on its own (crashed) at some point, needed
  // SIGKILL, exited non-zero after SIGTERM, or its log holds a sanitizer report (its stderr goes
  // to log_path(), as does its stdout). Empty when all is well. The destructor calls it; a caller
  // outside Catch test cases (the chaos harness) may call it first and judge the text itself.
  std::string stop_and_check();
  // kill() then start().
  void restart();
  bool running() { return process_.running(); }
  pid_t pid() const { return process_.pid(); }

  std::uint16_t port() const { return port_; }
  const std::filesystem::path& config_path() const { return config_path_; }
  const std::filesystem::path& log_path() const { return log_path_; }
  std::string log() const { return read_file(log_path_); }
  // A fresh connection, over TLS when the options say so.
  line_client connect(std::chrono::milliseconds timeout = std::chrono::seconds(5)) const;
  // INFO over a fresh connection, parsed (without the "OK "). Throws on a bad reply.
  nlohmann::json info() const;

 private:
  daemon_options options_;
  temp_dir dir_;
  std::uint16_t port_ = 0;
  std::filesystem::path config_path_;
  std::filesystem::path log_path_;
  child_process process_;
  // The test stopped or killed this run of the daemon: its ending is no surprise.
  bool exit_expected_ = false;
  bool checked_ = false;
  std::vector<std::string> problems_;

  std::chrono::milliseconds stop_timeout() const;
  // Records a problem when the daemon has ended although nobody stopped or killed it.
  void note_unexpected_exit(const std::string& noticed_at);
};

// Counts the nodes of an INFO document in `state` whose address is in `addresses`.
std::size_t count_nodes_in_state(const nlohmann::json& info,
                                 const std::vector<std::string>& addresses,
                                 const std::string& state);
// The state INFO reports for `address`, "" when absent.
std::string node_state(const nlohmann::json& info, const std::string& address);

} // namespace redlockd::test
