#include "process.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <mutex>
#include <netinet/in.h>
#include <pthread.h>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <utility>

#include "harness.hpp"

namespace redlockd::test {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

int decode_status(int raw) {
  if (WIFEXITED(raw)) {
    return WEXITSTATUS(raw);
  }
  if (WIFSIGNALED(raw)) {
    return 128 + WTERMSIG(raw);
  }
  return -1;
}

// The range bind(port 0) and connect() draw from; Linux's default when it cannot be read.
std::pair<int, int> ephemeral_port_range() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  int high = 0;
  if (in >> low >> high && low > 0 && low <= high) {
    return {low, high};
  }
  return {32768, 60999};
}

// Binds 127.0.0.1:`port` and closes it again: the port bound, 0 when `port` is taken. Port 0
// lets the kernel choose and throws when even that fails.
std::uint16_t binds_on_loopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    throw_errno("socket");
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int saved = errno;
    ::close(fd);
    if (port != 0) {
      return 0;
    }
    errno = saved;
    throw_errno("bind 127.0.0.1:0");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

} // namespace

temp_dir::temp_dir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string templ =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/" + prefix + "-XXXXXX";
  std::vector<char> buffer(templ.begin(), templ.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    throw_errno("mkdtemp " + templ);
  }
  path_ = buffer.data();
}

temp_dir::~temp_dir() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

std::uint16_t free_loopback_port() {
  // The kernel's port 0 comes from the ephemeral range, where every outgoing connection of
  // every test running beside this one also takes its source port: between our close() and the
  // program's bind(), one of them can take it (CI once saw "bind: Address already in use").
  // A port below that range is only ever taken by a bind(), so the window is left to programs
  // that pick the same way, at random.
  // A port handed out before is not handed out again by this process: the caller may not have
  // bound it yet (a test picks the metrics port, then the daemon's, then starts the daemon).
  static std::mutex handed_out_mutex;
  static std::set<std::uint16_t> handed_out;
  const std::lock_guard<std::mutex> lock(handed_out_mutex);
  const int ephemeral_low = ephemeral_port_range().first;
  constexpr int lowest = 10000;
  if (ephemeral_low - lowest >= 1000) {
    thread_local std::mt19937 pick(std::random_device{}());
    std::uniform_int_distribution<int> port(lowest, ephemeral_low - 1);
    for (int attempt = 0; attempt < 64; ++attempt) {
      const auto candidate = static_cast<std::uint16_t>(port(pick));
      if (!handed_out.contains(candidate) && binds_on_loopback(candidate) == candidate) {
        handed_out.insert(candidate);
        return candidate;
      }
    }
  }
  const std::uint16_t chosen = binds_on_loopback(0);
  handed_out.insert(chosen);
  return chosen;
}

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return {};
  }
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void write_file(const fs::path& file, const std::string& content) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << content;
  if (!out.flush()) {
    throw std::runtime_error("cannot write " + file.string());
  }
}

std::string file_tail(const fs::path& file, std::size_t max_bytes) {
  std::string content = read_file(file);
  if (content.size() > max_bytes) {
    content = "[...]\n" + content.substr(content.size() - max_bytes);
  }
  return content;
}

child_process::child_process(const std::string& binary, const std::vector<std::string>& args,
                             const fs::path& stdout_log, const fs::path& stderr_log,
                             const std::vector<std::pair<int, int>>& pass_fds) {
  // Everything the child needs is prepared before fork: only async-signal-safe calls after it.
  std::vector<std::string> argv_storage;
  argv_storage.push_back(binary);
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& arg : argv_storage) {
    argv.push_back(arg.data());
  }
  argv.push_back(nullptr);

  const int out_fd = ::open(stdout_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out_fd < 0) {
    throw_errno("open " + stdout_log.string());
  }
  int err_fd = out_fd;
  if (!stderr_log.empty()) {
    err_fd = ::open(stderr_log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (err_fd < 0) {
      const int saved = errno;
      ::close(out_fd);
      errno = saved;
      throw_errno("open " + stderr_log.string());
    }
  }
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t parent = ::getpid();

  // Block every signal across fork so the child cannot run the test runner's handlers (Catch's
  // fatal-signal reporter) before it has reset them.
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  const pid_t pid = ::fork();
  if (pid != 0) {
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  }
  if (pid < 0) {
    const int saved = errno;
    ::close(out_fd);
    if (err_fd != out_fd) {
      ::close(err_fd);
    }
    ::close(null_fd);
    errno = saved;
    throw_errno("fork");
  }
  if (pid == 0) {
    for (int sig = 1; sig < NSIG; ++sig) {
      ::signal(sig, SIG_DFL);
    }
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) {
      ::_exit(126);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (null_fd >= 0) {
      ::dup2(null_fd, STDIN_FILENO);
    }
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    // First out of the way (a source may be another pair's target), then into place; dup2 and
    // F_DUPFD clear close-on-exec.
    constexpr int parked = 200;
    for (std::size_t i = 0; i < pass_fds.size(); ++i)
      ::dup2(pass_fds[i].second, parked + static_cast<int>(i));
    for (std::size_t i = 0; i < pass_fds.size(); ++i) {
      ::dup2(parked + static_cast<int>(i), pass_fds[i].first);
      ::close(parked + static_cast<int>(i));
    }
    ::execv(argv[0], argv.data());
    static const char msg[] = "execv failed\n";
    [[maybe_unused]] auto ignored = ::write(STDERR_FILENO, msg, sizeof(msg) - 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid); // also done by the child; whichever runs first wins, both are fine
  ::close(out_fd);
  if (err_fd != out_fd) {
    ::close(err_fd);
  }
  if (null_fd >= 0) {
    ::close(null_fd);
  }
  pid_ = pid;
  reaped_ = false;
}

child_process::~child_process() {
  if (!reaped_) {
    kill();
  }
}

child_process::child_process(child_process&& other) noexcept
    : pid_(other.pid_), reaped_(other.reaped_), status_(other.status_) {
  other.reset_after_move();
}

child_process& child_process::operator=(child_process&& other) noexcept {
  if (this != &other) {
    if (!reaped_) {
      kill();
    }
    pid_ = other.pid_;
    reaped_ = other.reaped_;
    status_ = other.status_;
    other.reset_after_move();
  }
  return *this;
}

void child_process::reset_after_move() {
  pid_ = -1;
  reaped_ = true;
  status_.reset();
}

bool child_process::try_reap(bool block) {
  if (reaped_) {
    return true;
  }
  int raw = 0;
  pid_t r = 0;
  do {
    r = ::waitpid(pid_, &raw, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_) {
    reaped_ = true;
    status_ = decode_status(raw);
    // Anything the child left in its group (it should not fork, but be safe).
    ::kill(-pid_, SIGKILL);
    return true;
  }
  if (r < 0) { // ECHILD: someone else reaped it
    reaped_ = true;
    status_ = -1;
    return true;
  }
  return false;
}

bool child_process::running() {
  return !try_reap(false);
}

void child_process::signal(int sig) {
  if (!reaped_) {
    // One signal, never two: a second SIGTERM sent after a preempted first one can reach a daemon
    // that has already finished its shutdown and dropped its handler, and kill it (seen in CI).
    if (::kill(-pid_, sig) != 0) {
      ::kill(pid_, sig); // the child has not yet called setpgid
    }
  }
}

std::optional<int> child_process::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = clock_type::now() + timeout;
  auto pause = std::chrono::microseconds(200);
  while (!try_reap(false)) {
    if (clock_type::now() >= deadline) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
  }
  return status_;
}

int child_process::kill() {
  if (!reaped_) {
    signal(SIGKILL);
    try_reap(true);
  }
  return status_.value_or(-1);
}

int child_process::terminate(std::chrono::milliseconds grace) {
  if (reaped_) {
    return status_.value_or(-1);
  }
  signal(SIGTERM);
  if (auto status = wait_for(grace)) {
    return *status;
  }
  return kill();
}

run_result run_command(const std::string& binary, const std::vector<std::string>& args,
                       std::chrono::milliseconds timeout) {
  temp_dir dir("redlockd-run");
  const fs::path out = dir.path() / "stdout";
  const fs::path err = dir.path() / "stderr";
  child_process child(binary, args, out, err);
  run_result result;
  if (auto status = child.wait_for(timeout)) {
    result.status = *status;
  } else {
    result.status = child.kill();
  }
  result.out = read_file(out);
  result.err = read_file(err);
  // Our binaries are sanitized in the ASan build: a report fails the test that ran them.
  if (const auto report = sanitizer_report(result.err + result.out); !report.empty()) {
    report_problem(binary + " printed a sanitizer report:\n" + report);
  }
  return result;
}

} // namespace redlockd::test
