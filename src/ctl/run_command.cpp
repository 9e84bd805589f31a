#include "redlockd/ctl/run_command.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <optional>
#include <poll.h>
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

int poll_ms(clock_type::time_point deadline, clock_type::time_point now) {
  const auto left = std::chrono::ceil<milliseconds>(deadline - now).count();
  return static_cast<int>(std::clamp<std::int64_t>(left, 0, 60'000));
}

// Watches the command and the KEEP connection until the command's whole process group is gone.
class supervisor {
 public:
  supervisor(line_connection& connection, const run_options& options, pid_t child)
      : connection_(connection), options_(options), timing_(timing_for(options)), child_(child) {
    next_ping_ = clock_type::now() + timing_.ping_every;
  }

  // Returns the leader's wait status.
  int watch() {
    while (!leader_reaped_ || group_alive()) {
      const auto now = clock_type::now();
      std::array<pollfd, 2> fds{{{signal_pipe[0], POLLIN, 0}, {connection_.fd(), POLLIN, 0}}};
      const int n = ::poll(fds.data(), connection_open_ ? 2 : 1, next_timeout(now));
      if (n < 0 && errno != EINTR)
        throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
      if (fds[0].revents & POLLIN)
        forward_signals();
      reap_leader();
      if (connection_open_ &&
          ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) || connection_.has_buffered_line()))
        read_daemon();
      heartbeat();
      enforce_kill();
    }
    return status_;
  }

  bool lost() const { return lost_; }
  bool connection_open() const { return connection_open_; }

 private:
  // Only meaningful once the leader is reaped: its pid stays reserved as the group's id while
  // any member lives, so this cannot hit a stranger. Orphaned members are ours to reap.
  bool group_alive() const { return ::kill(-child_, 0) == 0 || errno == EPERM; }

  int next_timeout(clock_type::time_point now) const {
    if (connection_open_ && connection_.has_buffered_line())
      return 0; // e.g. a LOST that came in with the LOCK reply
    auto wake = clock_type::time_point::max();
    if (kill_at_)
      wake = std::min(wake, *kill_at_);
    if (watching_daemon())
      wake = std::min(wake, ping_sent_ ? *ping_sent_ + timing_.silence_limit : next_ping_);
    int timeout = wake == clock_type::time_point::max() ? -1 : poll_ms(wake, now);
    if (leader_reaped_) // members still parented by others send us no SIGCHLD: look now and then
      timeout = timeout < 0 ? 10 : std::min(timeout, 10);
    return timeout;
  }

  bool watching_daemon() const { return connection_open_ && !lost_; }

  void forward_signals() {
    unsigned char signal = 0;
    while (::read(signal_pipe[0], &signal, 1) == 1)
      if (signal != SIGCHLD)
        ::kill(-child_, signal); // Ctrl-C and friends go to the command's whole group
  }

  void reap_leader() {
    int status = 0;
    bool leader_now = false;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;)
      if (pid == child_) {
        status_ = status;
        leader_now = true;
      }
    if (!leader_now)
      return;
    leader_reaped_ = true;
    // The lock covers the whole group: whatever the command left behind stops before the lock
    // is released, exactly as if the lock had been lost.
    if (group_alive())
      stop_group("the command exited and left processes in its group");
  }

  void read_daemon() {
    try {
      while (auto line = connection_.read_line(milliseconds(0))) {
        if (line->starts_with("LOST ")) {
          lose("the daemon could not renew it: " + *line);
        } else if (line->starts_with("PONG")) {
          ping_sent_.reset();
        } else if (!line->empty()) {
          std::cerr << "redlockctl: unexpected line from the daemon: " << *line << "\n";
          if (line->starts_with("ERR "))
            lose("the daemon said " + *line);
        }
      }
    } catch (const connection_error& e) {
      connection_open_ = false;
      lose(e.what());
    }
  }

  // A daemon that hangs, or a network that drops packets silently, never closes the connection:
  // only an unanswered PING tells.
  void heartbeat() {
    if (!watching_daemon())
      return;
    const auto now = clock_type::now();
    if (ping_sent_ && now - *ping_sent_ >= timing_.silence_limit) {
      lose("the daemon did not answer a PING within " +
           std::to_string(timing_.silence_limit.count()) + " ms");
      return;
    }
    if (!ping_sent_ && now >= next_ping_) {
      try {
        connection_.send_line("PING");
      } catch (const connection_error& e) {
        connection_open_ = false;
        lose(e.what());
        return;
      }
      ping_sent_ = now;
      next_ping_ = now + timing_.ping_every;
    }
  }

  void lose(const std::string& why) {
    if (lost_)
      return;
    lost_ = true;
    std::cerr << "redlockctl: lock on " << options_.resource << " lost (" << why
              << "); stopping the command\n";
    stop_group(why);
  }

  // SIGTERM to the whole group at once, SIGKILL after kill_after.
  void stop_group(const std::string& why) {
    if (kill_at_ || killed_)
      return;
    if (!lost_)
      std::cerr << "redlockctl: " << why << "; sending them SIGTERM\n";
    ::kill(-child_, SIGTERM);
    kill_at_ = clock_type::now() + timing_.kill_after;
  }

  void enforce_kill() {
    if (!kill_at_ || clock_type::now() < *kill_at_)
      return;
    ::kill(-child_, SIGKILL);
    kill_at_.reset();
    killed_ = true;
  }

  line_connection& connection_;
  const run_options& options_;
  const supervision_timing timing_;
  const pid_t child_;
  int status_ = 0;
  bool leader_reaped_ = false;
  bool lost_ = false;
  bool connection_open_ = true;
  bool killed_ = false;
  std::optional<clock_type::time_point> kill_at_;   // SIGKILL time once the group must stop
  std::optional<clock_type::time_point> ping_sent_; // the PING still unanswered
  clock_type::time_point next_ping_;
};

// Releases the lock (unless lost) and says goodbye, skipping the heartbeat's late PONGs.
void release(line_connection& connection, const run_options& options, const lock_grant& grant,
             bool lost) {
  try {
    if (!lost)
      connection.send_line("UNLOCK " + options.resource + " " + grant.owner);
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
        std::cerr << "redlockctl: lock on " << options.resource
                  << " lost just as the command ended\n";
        return;
      }
      unlock_answered = true;
      if (*line != "OK")
        std::cerr << "redlockctl: UNLOCK " << options.resource << " answered " << *line
                  << " (the lock may have expired while the command ran)\n";
    }
  } catch (const connection_error&) {
    // The daemon releases a KEEP lock when its connection closes; else the TTL does.
  }
}

} // namespace

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
  const auto grant = parse_grant(reply);
  if (!grant) {
    std::cerr << "redlockctl: could not lock " << options.resource << ": " << reply << "\n";
    if (reply.starts_with("BUSY"))
      return exit_code::busy;
    if (reply.starts_with("NOQUORUM"))
      return exit_code::no_quorum;
    if (reply.starts_with("ERR NOAUTH"))
      return exit_code::auth_failed;
    return exit_code::run_failed;
  }

  std::vector<char*> argv;
  for (const auto& arg : options.command)
    argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);

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
    exec_child(options, *grant, argv, report[1], parent, old_mask);
  }
  const int fork_error = errno;
  if (child > 0)
    ::setpgid(child, child); // also here, so the group exists before we signal it
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  ::close(report[1]);
  if (child < 0) {
    ::close(report[0]);
    std::cerr << "redlockctl: fork: " << std::strerror(fork_error) << "\n";
    return exit_code::run_failed;
  }
  int exec_error = 0;
  ssize_t got = 0;
  do
    got = ::read(report[0], &exec_error, sizeof exec_error);
  while (got < 0 && errno == EINTR);
  ::close(report[0]);
  const bool exec_failed = got == sizeof exec_error;
  if (exec_failed)
    std::cerr << "redlockctl: cannot run " << options.command.front() << ": "
              << std::strerror(exec_error) << "\n";

  supervisor watch(connection, options, child);
  int status = 0;
  try {
    status = watch.watch();
  } catch (const std::exception& e) {
    // Never leave the command behind without its lock.
    std::cerr << "redlockctl: " << e.what() << "; killing the command\n";
    ::kill(-child, SIGKILL);
    ::waitpid(child, &status, 0);
    return exit_code::run_failed;
  }
  if (watch.connection_open())
    release(connection, options, *grant, watch.lost());
  if (exec_failed)
    return exec_error == ENOENT ? exit_code::not_found : exit_code::not_executable;
  return exit_status(status);
}

} // namespace redlockd::ctl
