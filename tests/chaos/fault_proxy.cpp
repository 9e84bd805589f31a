#include "fault_proxy.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <deque>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdexcept>
#include <string>
#include <sys/socket.h>
#include <system_error>
#include <unistd.h>
#include <vector>

#include "history.hpp"

namespace redlockd::chaos {
namespace {

int connect_loopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
  }
  if (fd >= 0)
    ::close(fd);
  return -1;
}

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n <= 0)
      return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// One proxied connection: bytes read from one side wait here until they are due.
struct chunk {
  std::int64_t due_ns;
  bool to_upstream;
  std::string bytes;
};

struct link {
  int client = -1;
  int upstream = -1;
  std::uint64_t epoch = 0;
  std::deque<chunk> pending;
};

} // namespace

fault_proxy::fault_proxy(std::uint16_t upstream_port) : upstream_port_(upstream_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      ::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::system_error(errno, std::generic_category(), "fault proxy: listen");
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { run(); });
}

fault_proxy::~fault_proxy() {
  stopping_ = true;
  const char wake = 'x';
  [[maybe_unused]] auto ignored = ::write(wake_pipe_[1], &wake, 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

void fault_proxy::set_mode(mode m, int delay_ms) {
  const mode previous = mode_.exchange(m);
  delay_ms_ = delay_ms;
  if (m == mode::pass && previous == mode::blackhole)
    ++epoch_;
  const char wake = 'x';
  [[maybe_unused]] auto ignored = ::write(wake_pipe_[1], &wake, 1);
}

void fault_proxy::run() {
  std::vector<link> links;
  auto close_link = [](link& l) {
    ::close(l.client);
    if (l.upstream >= 0)
      ::close(l.upstream);
    l.client = -1;
  };
  while (!stopping_) {
    const std::uint64_t epoch = epoch_;
    for (auto& l : links)
      if (l.epoch != epoch)
        close_link(l);
    std::erase_if(links, [](const link& l) { return l.client < 0; });

    // Deliver what is due; find the next due time.
    const std::int64_t now = monotonic_ns();
    int timeout_ms = 100;
    for (auto& l : links) {
      while (!l.pending.empty() && l.pending.front().due_ns <= now) {
        const chunk& c = l.pending.front();
        if (!write_all(c.to_upstream ? l.upstream : l.client, c.bytes.data(), c.bytes.size())) {
          close_link(l);
          break;
        }
        l.pending.pop_front();
      }
      if (l.client >= 0 && !l.pending.empty())
        timeout_ms = std::min<int>(
            timeout_ms, static_cast<int>((l.pending.front().due_ns - now) / 1'000'000) + 1);
    }
    std::erase_if(links, [](const link& l) { return l.client < 0; });

    std::vector<pollfd> fds{{wake_pipe_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const auto& l : links) {
      fds.push_back({l.client, POLLIN, 0});
      fds.push_back({l.upstream, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0)
      continue;
    if ((fds[0].revents & POLLIN) != 0) {
      char drain[64];
      while (::read(wake_pipe_[0], drain, sizeof(drain)) > 0) {
      }
    }
    const mode m = mode_;
    const std::int64_t delay_ns = m == mode::delay ? std::int64_t{delay_ms_} * 1'000'000 : 0;
    const std::size_t polled = links.size(); // links accepted below were not polled
    for (std::size_t k = 0; k < polled; ++k) {
      link& l = links[k];
      for (const bool from_client : {true, false}) {
        const pollfd& p = fds[2 + 2 * k + (from_client ? 0 : 1)];
        if (p.fd < 0 || p.revents == 0 || l.client < 0)
          continue;
        char buffer[65536];
        const ssize_t n = ::read(p.fd, buffer, sizeof(buffer));
        if (n <= 0) {
          close_link(l);
          continue;
        }
        if (m == mode::blackhole || (from_client && l.upstream < 0))
          continue; // swallowed
        l.pending.push_back({monotonic_ns() + delay_ns, from_client,
                             std::string(buffer, static_cast<std::size_t>(n))});
      }
    }
    if ((fds[1].revents & POLLIN) != 0) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        // A blackholed master still "accepts" (as a stopped process's backlog does) but the
        // proxy does not even reach it.
        const int upstream = mode_ == mode::blackhole ? -1 : connect_loopback(upstream_port_);
        if (upstream < 0 && mode_ != mode::blackhole)
          ::close(client);
        else
          links.push_back({client, upstream, epoch_, {}});
      }
    }
  }
  for (auto& l : links)
    close_link(l);
}

} // namespace redlockd::chaos
