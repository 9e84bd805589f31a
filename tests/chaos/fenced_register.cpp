#include "fenced_register.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/un.h>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace redlockd::chaos {
namespace {

std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string word;
  while (in >> word)
    out.push_back(word);
  return out;
}

std::optional<std::uint64_t> to_fence(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 19)
    return std::nullopt;
  return std::stoull(text);
}

} // namespace

std::string fenced_register::apply(const std::string& line) {
  const auto w = words(line);
  if (w.size() < 3)
    return "ERR syntax";
  const auto fence = to_fence(w[2]);
  if (!fence)
    return "ERR fence";
  std::lock_guard lock(mutex_);
  cell& c = cells_[w[1]];
  if (w[0] == "READ" && w.size() == 4) {
    if (*fence < c.max_all) {
      ++reads_rejected_;
      return "STALE " + std::to_string(c.max_all);
    }
    c.max_all = c.max_w = *fence;
    c.last_reader = w[3];
    c.last_read_ns = monotonic_ns();
    return "OK " + (c.elements.empty() ? std::string("-") : c.elements);
  }
  if (w[0] == "SREAD" && w.size() == 4) {
    if (*fence < c.max_w) {
      ++shared_reads_rejected_;
      return "STALE " + std::to_string(c.max_w);
    }
    c.max_all = std::max(c.max_all, *fence);
    c.last_reader = w[3];
    c.last_read_ns = monotonic_ns();
    return "OK " + (c.elements.empty() ? std::string("-") : c.elements);
  }
  if (w[0] == "WRITE" && w.size() == 4) {
    if (*fence < c.max_all) {
      ++writes_rejected_;
      return "STALE " + std::to_string(c.max_all);
    }
    c.max_all = c.max_w = *fence;
    c.elements = w[3] == "-" ? std::string() : w[3];
    ++writes_accepted_;
    return "OK";
  }
  return "ERR command";
}

register_state fenced_register::snapshot() const {
  std::lock_guard lock(mutex_);
  register_state state;
  for (const auto& [resource, c] : cells_) {
    auto& set = state.sets[resource];
    std::istringstream in(c.elements);
    std::string element;
    while (std::getline(in, element, ','))
      if (!element.empty())
        set.insert(element);
  }
  state.writes_accepted = writes_accepted_;
  state.writes_rejected = writes_rejected_;
  state.reads_rejected = reads_rejected_;
  state.shared_reads_rejected = shared_reads_rejected_;
  return state;
}

std::optional<std::pair<std::string, std::int64_t>>
fenced_register::last_reader(const std::string& resource) {
  std::lock_guard lock(mutex_);
  const auto it = cells_.find(resource);
  if (it == cells_.end() || it->second.last_reader.empty())
    return std::nullopt;
  return std::pair{it->second.last_reader, it->second.last_read_ns};
}

register_server::register_server(fenced_register& store, std::filesystem::path socket_path)
    : store_(store), path_(std::move(socket_path)) {
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string p = path_.string();
  if (listen_fd_ < 0 || p.size() >= sizeof(addr.sun_path))
    throw std::runtime_error("register: cannot create a socket for " + p);
  std::memcpy(addr.sun_path, p.c_str(), p.size() + 1);
  ::unlink(p.c_str());
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 64) != 0 || ::pipe2(wake_pipe_, O_CLOEXEC) != 0)
    throw std::system_error(errno, std::generic_category(), "register: listen on " + p);
  thread_ = std::thread([this] { run(); });
}

register_server::~register_server() {
  const char stop = 'x';
  [[maybe_unused]] auto ignored = ::write(wake_pipe_[1], &stop, 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
  ::unlink(path_.c_str());
}

void register_server::run() {
  struct connection {
    int fd;
    std::string input;
  };
  std::vector<connection> connections;
  for (;;) {
    std::vector<pollfd> fds{{wake_pipe_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const auto& c : connections)
      fds.push_back({c.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    if (fds[0].revents != 0)
      break;
    if ((fds[1].revents & POLLIN) != 0) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0)
        connections.push_back({fd, {}});
    }
    std::vector<int> closed;
    for (std::size_t k = 2; k < fds.size(); ++k) {
      if (fds[k].revents == 0)
        continue;
      connection& c = connections[k - 2];
      char buffer[65536];
      const ssize_t n = ::read(c.fd, buffer, sizeof(buffer));
      if (n <= 0) {
        closed.push_back(c.fd);
        continue;
      }
      c.input.append(buffer, static_cast<std::size_t>(n));
      std::size_t eol = 0;
      while ((eol = c.input.find('\n')) != std::string::npos) {
        const std::string reply = store_.apply(c.input.substr(0, eol)) + "\n";
        c.input.erase(0, eol + 1);
        // Replies are short unless the set is large; a blocking write is fine for a test.
        std::size_t sent = 0;
        while (sent < reply.size()) {
          const ssize_t w = ::write(c.fd, reply.data() + sent, reply.size() - sent);
          if (w <= 0)
            break;
          sent += static_cast<std::size_t>(w);
        }
      }
    }
    for (const int fd : closed) {
      ::close(fd);
      std::erase_if(connections, [fd](const connection& c) { return c.fd == fd; });
    }
  }
  for (const auto& c : connections)
    ::close(c.fd);
}

} // namespace redlockd::chaos
