#include "redlockd/ctl/line_connection.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace redlockd::ctl {
namespace {

using clock_type = std::chrono::steady_clock;

int wait_for(int fd, short events, clock_type::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now());
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
    if (n >= 0 || errno != EINTR)
      return n;
  }
}

} // namespace

line_connection::line_connection(std::string_view address, std::chrono::milliseconds timeout) {
  std::string host;
  std::string port;
  if (address.starts_with('[')) {
    const auto close = address.find("]:");
    if (close == std::string_view::npos)
      throw connection_error("bad address '" + std::string(address) + "'");
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const auto colon = address.rfind(':');
    if (colon == std::string_view::npos)
      throw connection_error("bad address '" + std::string(address) + "' (want host:port)");
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    throw connection_error("cannot resolve " + host + ": " + ::gai_strerror(rc));
  const auto deadline = clock_type::now() + timeout;
  std::string last_error = "no address";
  for (addrinfo* ai = found; ai != nullptr && fd_ < 0; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
      continue;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ||
        (errno == EINPROGRESS && wait_for(fd, POLLOUT, deadline) > 0)) {
      int error = 0;
      socklen_t length = sizeof error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      if (error == 0) {
        fd_ = fd;
        break;
      }
      last_error = std::strerror(error);
    } else {
      last_error = errno == EINPROGRESS ? "timed out" : std::strerror(errno);
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (fd_ < 0)
    throw connection_error("cannot connect to " + std::string(address) + ": " + last_error);
}

line_connection::~line_connection() {
  if (fd_ >= 0)
    ::close(fd_);
}

void line_connection::send_line(std::string_view line) {
  std::string data(line);
  data.push_back('\n');
  std::size_t sent = 0;
  const auto deadline = clock_type::now() + std::chrono::seconds(10);
  while (sent < data.size()) {
    const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (wait_for(fd_, POLLOUT, deadline) <= 0)
        throw connection_error("cannot send to the daemon: timed out");
    } else {
      throw connection_error(std::string("cannot send to the daemon: ") + std::strerror(errno));
    }
  }
}

std::optional<std::string> line_connection::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = clock_type::now() + timeout;
  for (;;) {
    if (const auto lf = buffer_.find('\n'); lf != std::string::npos) {
      std::string line = buffer_.substr(0, lf);
      buffer_.erase(0, lf + 1);
      return line;
    }
    if (wait_for(fd_, POLLIN, deadline) <= 0)
      return std::nullopt;
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n == 0)
      throw connection_error("the daemon closed the connection");
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR)
        continue;
      throw connection_error(std::string("connection to the daemon lost: ") + std::strerror(errno));
    }
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

std::string line_connection::request(std::string_view line, std::chrono::milliseconds timeout) {
  send_line(line);
  auto reply = read_line(timeout);
  if (!reply)
    throw connection_error("no reply from the daemon within " + std::to_string(timeout.count()) +
                           " ms");
  return *reply;
}

} // namespace redlockd::ctl
