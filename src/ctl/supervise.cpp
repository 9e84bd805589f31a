// `redlockctl run`'s watch over a running command and its KEEP lock: signals passed on to the
// command's group, LOST and a broken connection, the PING heartbeat, SIGTERM then SIGKILL.
#include "redlockd/ctl/supervise.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <optional>
#include <poll.h>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace redlockd::ctl {
namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

int poll_ms(clock_type::time_point deadline, clock_type::time_point now) {
  const auto left = std::chrono::ceil<milliseconds>(deadline - now).count();
  return static_cast<int>(std::clamp<std::int64_t>(left, 0, 60'000));
}

// Watches the command and the KEEP connection until the command's whole process group is gone.
class supervisor {
 public:
  supervisor(line_connection& connection, const run_options& options, pid_t child, int signal_fd)
      : connection_(connection), options_(options), timing_(timing_for(options)), child_(child),
        signal_fd_(signal_fd) {
    next_ping_ = clock_type::now() + timing_.ping_every;
  }

  // Returns the leader's wait status.
  int watch() {
    while (!leader_reaped_ || group_alive()) {
      const auto now = clock_type::now();
      std::array<pollfd, 2> fds{{{signal_fd_, POLLIN, 0}, {connection_.fd(), POLLIN, 0}}};
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
    while (::read(signal_fd_, &signal, 1) == 1)
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
  const int signal_fd_; // read end of the pipe the watched signals arrive through
  int status_ = 0;
  bool leader_reaped_ = false;
  bool lost_ = false;
  bool connection_open_ = true;
  bool killed_ = false;
  std::optional<clock_type::time_point> kill_at_;   // SIGKILL time once the group must stop
  std::optional<clock_type::time_point> ping_sent_; // the PING still unanswered
  clock_type::time_point next_ping_;
};

} // namespace

supervision_result supervise(line_connection& connection, const run_options& options, pid_t child,
                             int signal_fd) {
  supervisor watch(connection, options, child, signal_fd);
  supervision_result result;
  result.status = watch.watch();
  result.lost = watch.lost();
  result.connection_open = watch.connection_open();
  return result;
}

} // namespace redlockd::ctl
