#include "redlockd/ctl/run_command.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <poll.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace redlockd::ctl {
namespace {

using clock_type = std::chrono::steady_clock;

// Signals arrive through a pipe, so that the poll loop sees them like any other event.
int signal_pipe[2] = {-1, -1};

void on_signal(int signal) {
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(signal);
  [[maybe_unused]] const ssize_t n = ::write(signal_pipe[1], &byte, 1);
  errno = saved;
}

constexpr std::array<int, 4> watched_signals = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};

void install_handlers() {
  if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error("pipe2 failed");
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (int signal : watched_signals)
    ::sigaction(signal, &action, nullptr);
}

// In the child, between fork and exec: its own process group, default signal handling, the
// lock's facts in the environment, then the command itself. An exec failure is reported through
// `report` (closed on exec) as an errno.
[[noreturn]] void exec_child(const run_options& options, const std::string& owner,
                             const std::string& fence, const std::string& validity, int report) {
  ::setpgid(0, 0);
  for (int signal : watched_signals)
    ::signal(signal, SIG_DFL);
  ::setenv("REDLOCK_RESOURCE", options.resource.c_str(), 1);
  ::setenv("REDLOCK_OWNER", owner.c_str(), 1);
  ::setenv("REDLOCK_FENCE", fence.c_str(), 1);
  ::setenv("REDLOCK_VALIDITY_MS", validity.c_str(), 1);
  std::vector<char*> argv;
  for (const auto& arg : options.command)
    argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  const int error = errno;
  [[maybe_unused]] const ssize_t n = ::write(report, &error, sizeof error);
  ::_exit(error == ENOENT ? exit_code::not_found : exit_code::not_executable);
}

int exit_status(int status) {
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return exit_code::run_failed;
}

} // namespace

std::chrono::milliseconds default_kill_after(std::chrono::milliseconds ttl) {
  const auto drift = std::chrono::milliseconds(ttl.count() / 100 + 2);
  return std::max(std::chrono::milliseconds(1), ttl / 4 - drift);
}

int run_under_lock(line_connection& connection, const run_options& options) {
  std::ostringstream request;
  request << "LOCK " << options.resource << " " << options.ttl.count();
  if (options.wait.count() > 0)
    request << " WAIT " << options.wait.count();
  request << " KEEP";
  std::string reply;
  try {
    reply = connection.request(request.str(), options.wait + options.timeout);
  } catch (const connection_error& e) {
    std::cerr << "redlockctl: " << e.what() << "\n";
    return exit_code::run_failed;
  }
  std::istringstream words(reply);
  std::string verdict, owner, fence, validity;
  words >> verdict >> owner >> fence >> validity;
  if (verdict != "OK" || validity.empty()) {
    std::cerr << "redlockctl: could not lock " << options.resource << ": " << reply << "\n";
    if (verdict == "BUSY")
      return exit_code::busy;
    if (verdict == "NOQUORUM")
      return exit_code::no_quorum;
    return exit_code::run_failed;
  }

  install_handlers();
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    std::cerr << "redlockctl: pipe2 failed\n";
    return exit_code::run_failed;
  }
  const pid_t child = ::fork();
  if (child < 0) {
    std::cerr << "redlockctl: fork failed: " << std::strerror(errno) << "\n";
    return exit_code::run_failed;
  }
  if (child == 0) {
    ::close(report[0]);
    exec_child(options, owner, fence, validity, report[1]);
  }
  ::setpgid(child, child); // also here: no race with the signals below
  ::close(report[1]);
  int exec_error = 0;
  const bool exec_failed = ::read(report[0], &exec_error, sizeof exec_error) == sizeof exec_error;
  ::close(report[0]);
  if (exec_failed)
    std::cerr << "redlockctl: cannot run " << options.command.front() << ": "
              << std::strerror(exec_error) << "\n";

  const auto kill_after =
      options.kill_after.count() > 0 ? options.kill_after : default_kill_after(options.ttl);
  bool lost = false;
  bool connection_open = true;
  constexpr auto never = clock_type::time_point::max();
  clock_type::time_point kill_at = never; // SIGKILL time once the lock is lost
  int status = 0;
  bool exited = false;
  auto lose = [&](const std::string& why) {
    if (lost)
      return;
    lost = true;
    std::cerr << "redlockctl: lock on " << options.resource << " lost (" << why
              << "); stopping the command\n";
    ::kill(-child, SIGTERM);
    kill_at = clock_type::now() + kill_after;
  };

  while (!exited) {
    std::array<pollfd, 2> fds{{{signal_pipe[0], POLLIN, 0}, {connection.fd(), POLLIN, 0}}};
    int wait_ms = -1;
    if (connection_open && connection.has_buffered_line())
      wait_ms = 0; // a LOST that came with the reply is already read
    else if (kill_at != never)
      wait_ms = static_cast<int>(std::max<std::int64_t>(
          0, std::chrono::ceil<std::chrono::milliseconds>(kill_at - clock_type::now()).count()));
    const int n = ::poll(fds.data(), connection_open ? 2 : 1, wait_ms);
    if (n < 0 && errno != EINTR)
      break;
    if (fds[0].revents & POLLIN) {
      unsigned char signal = 0;
      while (::read(signal_pipe[0], &signal, 1) == 1)
        if (signal != SIGCHLD)
          ::kill(-child, signal); // Ctrl-C and friends go to the command
    }
    if (::waitpid(child, &status, WNOHANG) == child)
      exited = true;
    if (connection_open &&
        ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) || connection.has_buffered_line())) {
      try {
        while (auto line = connection.read_line(std::chrono::milliseconds(0)))
          if (line->starts_with("LOST "))
            lose("the daemon could not renew it");
      } catch (const connection_error& e) {
        connection_open = false;
        lose(e.what());
      }
    }
    if (kill_at != never && clock_type::now() >= kill_at && !exited) {
      ::kill(-child, SIGKILL); // before the lock's remaining validity runs out
      kill_at = never;
    }
  }
  if (!exited)
    ::waitpid(child, &status, 0);

  if (connection_open) {
    try {
      if (!lost)
        connection.request("UNLOCK " + options.resource + " " + owner, options.timeout);
      connection.request("QUIT", options.timeout);
    } catch (const connection_error&) {
      // The lock expires by its TTL.
    }
  }
  if (exec_failed)
    return exec_error == ENOENT ? exit_code::not_found : exit_code::not_executable;
  return exit_status(status);
}

} // namespace redlockd::ctl
