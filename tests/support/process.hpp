// Child processes, temp dirs and free ports for the integration tests. POSIX only.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace redlockd::test {

// A fresh directory under $TMPDIR (or /tmp), removed recursively on destruction.
class temp_dir {
 public:
  explicit temp_dir(const std::string& prefix = "redlockd-test");
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A loopback port free at the time of the call (bound and released), picked at random below
// the kernel's ephemeral range so that no outgoing connection can take it before it is used.
std::uint16_t free_loopback_port();

// Reads a whole file; "" when it does not exist.
std::string read_file(const std::filesystem::path& file);
void write_file(const std::filesystem::path& file, const std::string& content);

// Last `max_bytes` of a file, for failure diagnostics.
std::string file_tail(const std::filesystem::path& file, std::size_t max_bytes = 8192);

// One child (fork + execv) in its own process group, stdin from /dev/null, stdout and stderr
// appended to log files. The destructor SIGKILLs the group and reaps the child, so a failing test
// never leaks a process; the child also gets SIGKILL if the test process dies (PR_SET_PDEATHSIG).
class child_process {
 public:
  child_process() = default;
  // Starts `binary` with `args` (argv[0] is the binary). When `stderr_log` is empty, stderr goes
  // to `stdout_log` too. Each pair of `pass_fds` is (descriptor in the child, this process's
  // descriptor it is a copy of), for a child that talks over extra pipes.
  child_process(const std::string& binary, const std::vector<std::string>& args,
                const std::filesystem::path& stdout_log,
                const std::filesystem::path& stderr_log = {},
                const std::vector<std::pair<int, int>>& pass_fds = {});
  ~child_process();
  child_process(child_process&& other) noexcept;
  child_process& operator=(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const { return pid_; }
  // True while the child has not been reaped and has not exited.
  bool running();
  // Sends `sig` to the child's process group (no-op once reaped).
  void signal(int sig);
  // Waits up to `timeout` for the child to exit. Returns its status: the exit code, or 128 + the
  // signal number when a signal ended it. std::nullopt on timeout.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  // SIGKILL + reap. Returns the status (see wait_for).
  int kill();
  // SIGTERM, then SIGKILL after `grace`. Returns the status.
  int terminate(std::chrono::milliseconds grace = std::chrono::seconds(5));
  // The status once the child was reaped.
  std::optional<int> exit_status() const { return status_; }

 private:
  bool try_reap(bool block);
  void reset_after_move();

  pid_t pid_ = -1;
  bool reaped_ = true;
  std::optional<int> status_;
};

// Runs a command to completion (bounded by `timeout`, then SIGKILL) and captures its output. A
// sanitizer report in that output fails the running test case (report_problem).
struct run_result {
  int status = -1; // exit code, or 128 + signal
  std::string out;
  std::string err;
};
run_result run_command(const std::string& binary, const std::vector<std::string>& args,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10));

} // namespace redlockd::test
