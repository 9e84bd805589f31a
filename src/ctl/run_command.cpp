// `redlockctl run`: take a KEEP lock, start the command in its own process group with the lock's
// facts in its environment, route signals for supervise() (supervise.cpp) to watch the lock and
// the command, then release the lock.
#include "redlockd/ctl/run_command.hpp"

#include "redlockd/ctl/long_wait.hpp"
#include "redlockd/ctl/supervise.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <optional>
#include <sstream>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace redlockd::ctl {
namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Signals arrive through a pipe, so that the poll loop sees them like any other event.
int signal_pipe[2] = {-1, -1};

void on_signal(int signal) {
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(signal);
  [[maybe_unused]] const ssize_t n = ::write(signal_pipe[1], &byte, 1);
  errno = saved;
}

constexpr std::array<int, 4> watched_signals = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};

// Routes the watched signals into signal_pipe for its lifetime; the old handlers come back after.
class signal_routing {
 public:
  signal_routing() {
    if (::pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
      throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    for (std::size_t i = 0; i < watched_signals.size(); ++i)
      ::sigaction(watched_signals[i], &action, &saved_[i]);
  }
  ~signal_routing() {
    for (std::size_t i = 0; i < watched_signals.size(); ++i)
      ::sigaction(watched_signals[i], &saved_[i], nullptr);
    ::close(signal_pipe[0]);
    ::close(signal_pipe[1]);
    signal_pipe[0] = signal_pipe[1] = -1;
  }
  signal_routing(const signal_routing&) = delete;
  signal_routing& operator=(const signal_routing&) = delete;

 private:
  std::array<struct sigaction, watched_signals.size()> saved_{};
};

// The resources of a run: one or several.
std::vector<std::string> resources_of(const run_options& options) {
  return options.resources.empty() ? std::vector<std::string>{options.resource} : options.resources;
}

// The resources for people: "a", or "a b c".
std::string resources_text(const run_options& options) {
  std::string text;
  for (const auto& resource : resources_of(options))
    text += (text.empty() ? "" : " ") + resource;
  return text;
}

struct lock_grant {
  std::string owner;
  std::string fence;
  std::string validity;
};

bool is_decimal(const std::string& word) {
  return !word.empty() &&
         std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::optional<lock_grant> parse_grant(const std::string& reply) {
  std::istringstream words(reply);
  std::string verdict;
  lock_grant grant;
  words >> verdict >> grant.owner >> grant.fence >> grant.validity;
  if (verdict != "OK" || grant.owner.empty() || !is_decimal(grant.fence) ||
      !is_decimal(grant.validity))
    return std::nullopt;
  return grant;
}

// In the child, between fork and exec: its own process group, death with redlockctl, default
// signal handling, the lock's facts in the environment, then the command itself. An exec failure
// is reported through `report` (closed on exec) as an errno.
[[noreturn]] void exec_child(const run_options& options, const lock_grant& grant,
                             std::vector<char*>& argv, int report, pid_t parent,
                             const sigset_t& old_mask) {
  ::setpgid(0, 0);
  // If redlockctl is SIGKILLed, the daemon releases the KEEP lock: the command must not outlive it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent)
    ::_exit(exit_code::run_failed); // redlockctl died before prctl
  for (int signal : watched_signals)
    ::signal(signal, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  ::setenv("REDLOCK_RESOURCE", options.resource.c_str(), 1);
  std::string all;
  for (const auto& resource : resources_of(options))
    all += (all.empty() ? "" : " ") + resource;
  ::setenv("REDLOCK_RESOURCES", all.c_str(), 1);
  ::setenv("REDLOCK_OWNER", grant.owner.c_str(), 1);
  ::setenv("REDLOCK_FENCE", grant.fence.c_str(), 1);
  ::setenv("REDLOCK_VALIDITY_MS", grant.validity.c_str(), 1);
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

// Releases the lock (unless lost) and says goodbye, skipping the heartbeat's late PONGs.
void release(line_connection& connection, const run_options& options, const lock_grant& grant,
             bool lost) {
  try {
    if (!lost)
      connection.send_line(resources_request_prefix("UNLOCK", resources_of(options)) + " " +
                           grant.owner);
    connection.send_line("QUIT");
    const auto deadline = clock_type::now() + options.timeout;
    bool unlock_answered = lost;
    while (!unlock_answered) {
      const auto line = connection.read_line(
          std::max(milliseconds(0), std::chrono::ceil<milliseconds>(deadline - clock_type::now())));
      if (!line) {
        std::cerr << "redlockctl: no answer to UNLOCK; the lock expires by its TTL\n";
        return;
      }
      if (line->starts_with("PONG"))
        continue;
      if (line->starts_with("LOST ")) {
        std::cerr << "redlockctl: lock on " << resources_text(options)
                  << " lost just as the command ended\n";
        return;
      }
      unlock_answered = true;
      if (*line != "OK")
        std::cerr << "redlockctl: UNLOCK " << resources_text(options) << " answered " << *line
                  << " (the lock may have expired while the command ran)\n";
    }
  } catch (const connection_error&) {
    // The daemon releases a KEEP lock when its connection closes; else the TTL does.
  }
}

// LOCK (or MLOCK) with KEEP (the daemon renews the lock while the connection lives), with --wait
// as long as asked.
std::string take_lock(line_connection& connection, const run_options& options) {
  const std::string lock =
      lock_request_line(resources_of(options), options.ttl, options.shared, options.permits);
  if (options.wait.count() > 0)
    return lock_with_wait(connection, lock, " KEEP", options.wait, options.ttl, options.timeout);
  return connection.request(lock + " KEEP", options.timeout);
}

// Says why the lock was not granted; returns the exit code for it.
int lock_refused(const run_options& options, const std::string& reply) {
  std::cerr << "redlockctl: could not lock " << resources_text(options) << ": " << reply << "\n";
  if (reply.starts_with("BUSY"))
    return options.conflict_exit_code;
  if (reply.starts_with("NOQUORUM"))
    return exit_code::no_quorum;
  if (reply.starts_with("ERR NOAUTH"))
    return exit_code::auth_failed;
  return exit_code::run_failed;
}

// Forks the command's process (see exec_child), the leader of its own process group. Returns its
// pid, or -1 when fork failed (said on stderr). Closes the write end of `report` in any case, and
// its read end too when fork failed.
pid_t start_command(const run_options& options, const lock_grant& grant, const int report[2]) {
  std::vector<char*> argv;
  for (const auto& arg : options.command)
    argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  // Blocked across fork: the child must not run our handlers before it resets them.
  sigset_t blocked, old_mask;
  sigemptyset(&blocked);
  for (int signal : watched_signals)
    sigaddset(&blocked, signal);
  ::sigprocmask(SIG_BLOCK, &blocked, &old_mask);
  // Orphans of the command come to us, so we can reap them and see when its group is empty.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(report[0]);
    exec_child(options, grant, argv, report[1], parent, old_mask);
  }
  const int fork_error = errno;
  if (child > 0)
    ::setpgid(child, child); // also here, so the group exists before we signal it
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  ::close(report[1]);
  if (child < 0) {
    ::close(report[0]);
    std::cerr << "redlockctl: fork: " << std::strerror(fork_error) << "\n";
    return -1;
  }
  return child;
}

// The errno exec_child reported when the command could not be run, read from (and closing) the
// read end of its report pipe; nullopt once the exec succeeded and closed the pipe.
std::optional<int> exec_error_of(int report) {
  int exec_error = 0;
  ssize_t got = 0;
  do
    got = ::read(report, &exec_error, sizeof exec_error);
  while (got < 0 && errno == EINTR);
  ::close(report);
  if (got != sizeof exec_error)
    return std::nullopt;
  return exec_error;
}

// Runs the command under the granted lock until its whole group is gone, then releases the lock;
// returns redlockctl's exit code.
int run_holding(line_connection& connection, const run_options& options, const lock_grant& grant) {
  std::optional<signal_routing> routing;
  int report[2] = {-1, -1};
  try {
    routing.emplace();
    if (::pipe2(report, O_CLOEXEC) != 0)
      throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  } catch (const std::exception& e) {
    std::cerr << "redlockctl: " << e.what() << "\n";
    return exit_code::run_failed; // the KEEP lock goes with the connection
  }
  const pid_t child = start_command(options, grant, report);
  if (child < 0)
    return exit_code::run_failed;
  const std::optional<int> exec_error = exec_error_of(report[0]);
  if (exec_error)
    std::cerr << "redlockctl: cannot run " << options.command.front() << ": "
              << std::strerror(*exec_error) << "\n";

  supervision_result watched;
  try {
    watched = supervise(connection, options, child, signal_pipe[0]);
  } catch (const std::exception& e) {
    // Never leave the command behind without its lock.
    std::cerr << "redlockctl: " << e.what() << "; killing the command\n";
    ::kill(-child, SIGKILL);
    ::waitpid(child, &watched.status, 0);
    return exit_code::run_failed;
  }
  if (watched.connection_open)
    release(connection, options, grant, watched.lost);
  int code = exit_status(watched.status);
  if (exec_error)
    code = *exec_error == ENOENT ? exit_code::not_found : exit_code::not_executable;
  if (options.json) {
    nlohmann::json result = {{"resource", options.resource},
                             {"fence", std::stoull(grant.fence)},
                             {"exit_code", code},
                             {"lost", watched.lost}};
    if (resources_of(options).size() > 1)
      result["resources"] = resources_of(options);
    std::cout << result.dump() << std::endl;
  }
  return code;
}

} // namespace

std::string lock_request_line(const std::vector<std::string>& resources, milliseconds ttl,
                              bool shared, unsigned permits) {
  const std::string ttl_ms = std::to_string(ttl.count());
  if (resources.size() > 1)
    return resources_request_prefix("LOCK", resources) + " " + ttl_ms;
  std::string line = "LOCK " + resources.front() + " " + ttl_ms;
  if (shared)
    line += " SHARED";
  if (permits > 0)
    line += " PERMITS " + std::to_string(permits);
  return line;
}

std::string resources_request_prefix(const std::string& verb,
                                     const std::vector<std::string>& resources) {
  if (resources.size() == 1)
    return verb + " " + resources.front();
  std::string line = "M" + verb + " " + std::to_string(resources.size());
  for (const auto& resource : resources)
    line += " " + resource;
  return line;
}

std::chrono::milliseconds default_kill_after(std::chrono::milliseconds ttl) {
  const auto drift = milliseconds(ttl.count() / 100 + 2);
  return std::max(milliseconds(1), ttl / 4 - drift);
}

supervision_timing timing_for(const run_options& options) {
  supervision_timing t{};
  t.kill_after =
      options.kill_after.count() > 0 ? options.kill_after : default_kill_after(options.ttl);
  // Silent for at most ttl/8 + ttl/4 after the last answer, plus a quarter of the TTL to SIGKILL:
  // 5/8 of the TTL, within the two thirds a healthy KEEP lock has left.
  t.ping_every = std::max(milliseconds(1), options.ttl / 8);
  t.silence_limit = std::max(milliseconds(1), options.ttl / 4);
  return t;
}

int run_under_lock(line_connection& connection, const run_options& options) {
  if (options.command.empty()) {
    std::cerr << "redlockctl: run: no command\n";
    return exit_code::usage;
  }
  std::string reply;
  try {
    reply = take_lock(connection, options);
  } catch (const connection_error& e) {
    std::cerr << "redlockctl: " << e.what() << "\n";
    return exit_code::run_failed;
  }
  const auto grant = parse_grant(reply);
  if (!grant)
    return lock_refused(options, reply);
  return run_holding(connection, options, *grant);
}

} // namespace redlockd::ctl
