#include "line_client.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <charconv>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <system_error>
#include <thread>
#include <unistd.h>

namespace redlockd::test {

using clock_type = std::chrono::steady_clock;

line_client::line_client(std::uint16_t port, std::chrono::milliseconds timeout)
    : timeout_(timeout) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  connect_to(reinterpret_cast<const sockaddr*>(&addr), sizeof(addr),
             "127.0.0.1:" + std::to_string(port));
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

line_client::line_client(const std::filesystem::path& socket_file,
                         std::chrono::milliseconds timeout)
    : timeout_(timeout) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = socket_file.string();
  if (path.size() >= sizeof addr.sun_path)
    throw std::system_error(ENAMETOOLONG, std::generic_category(), "connect " + path);
  path.copy(addr.sun_path, path.size());
  connect_to(reinterpret_cast<const sockaddr*>(&addr), sizeof(addr), path);
}

void line_client::connect_to(const sockaddr* address, socklen_t size, const std::string& name) {
  fd_ = ::socket(address->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0)
    throw std::system_error(errno, std::generic_category(), "socket");
  int r = 0;
  do {
    r = ::connect(fd_, address, size);
  } while (r != 0 && errno == EINTR);
  if (r != 0) {
    const int saved = errno;
    close_fd();
    throw std::system_error(saved, std::generic_category(), "connect " + name);
  }
}

line_client::line_client(std::uint16_t port, const tls_client_files& tls,
                         std::chrono::milliseconds timeout)
    : line_client(port, timeout) {
  tls_ = std::make_unique<tls_socket>(fd_, tls, clock_type::now() + timeout);
}

line_client::~line_client() {
  close_fd();
}

line_client::line_client(line_client&& other) noexcept
    : fd_(other.fd_), tls_(std::move(other.tls_)), timeout_(other.timeout_),
      buffer_(std::move(other.buffer_)), eof_(other.eof_) {
  other.fd_ = -1;
}

line_client& line_client::operator=(line_client&& other) noexcept {
  if (this != &other) {
    close_fd();
    fd_ = other.fd_;
    tls_ = std::move(other.tls_);
    timeout_ = other.timeout_;
    buffer_ = std::move(other.buffer_);
    eof_ = other.eof_;
    other.fd_ = -1;
  }
  return *this;
}

void line_client::close_fd() {
  tls_.reset();
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void line_client::send(std::string_view raw) {
  const auto deadline = clock_type::now() + timeout_;
  if (tls_) {
    tls_->write(raw, deadline);
    return;
  }
  while (!raw.empty()) {
    const ssize_t n = ::send(fd_, raw.data(), raw.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      raw.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
      if (left.count() <= 0) {
        throw std::system_error(ETIMEDOUT, std::generic_category(), "send");
      }
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
      continue;
    }
    throw std::system_error(errno, std::generic_category(), "send");
  }
}

line_client::fill_result line_client::fill(clock_type::time_point deadline) {
  if (eof_ || fd_ < 0) {
    return fill_result::closed;
  }
  if (tls_) {
    switch (tls_->read(buffer_, deadline)) {
    case tls_socket::result::data:
      return fill_result::data;
    case tls_socket::result::timeout:
      return fill_result::timeout;
    case tls_socket::result::closed:
      eof_ = true;
      return fill_result::closed;
    }
  }
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    if (ready < 0 && errno == EINTR) {
      continue;
    }
    if (ready == 0) {
      return fill_result::timeout;
    }
    char chunk[16384];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n > 0) {
      buffer_.append(chunk, static_cast<std::size_t>(n));
      return fill_result::data;
    }
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
      continue;
    }
    eof_ = true; // 0 = orderly EOF; ECONNRESET and friends count as closed too
    return fill_result::closed;
  }
}

std::optional<std::string> line_client::try_read_line(std::chrono::milliseconds timeout) {
  const auto deadline = clock_type::now() + timeout;
  for (;;) {
    const auto lf = buffer_.find('\n');
    if (lf != std::string::npos) {
      std::string line = buffer_.substr(0, lf);
      buffer_.erase(0, lf + 1);
      return line;
    }
    if (fill(deadline) != fill_result::data) {
      return std::nullopt;
    }
  }
}

std::string line_client::read_line() {
  const auto deadline = clock_type::now() + timeout_;
  for (;;) {
    const auto lf = buffer_.find('\n');
    if (lf != std::string::npos) {
      std::string line = buffer_.substr(0, lf);
      buffer_.erase(0, lf + 1);
      return line;
    }
    switch (fill(deadline)) {
    case fill_result::data:
      break;
    case fill_result::timeout:
      throw read_timeout("no reply line within " + std::to_string(timeout_.count()) +
                         " ms; partial: '" + buffer_ + "'");
    case fill_result::closed:
      throw connection_closed("connection closed by peer; partial: '" + buffer_ + "'");
    }
  }
}

std::string line_client::request(std::string_view line) {
  std::string raw(line);
  raw.push_back('\n');
  send(raw);
  return read_line();
}

bool line_client::closed_by_peer(std::chrono::milliseconds timeout) {
  if (!buffer_.empty()) {
    return false;
  }
  const auto deadline = clock_type::now() + timeout;
  switch (fill(deadline)) {
  case fill_result::closed:
    return buffer_.empty();
  case fill_result::data:
  case fill_result::timeout:
    return false;
  }
  return false;
}

void line_client::shutdown_write() {
  if (tls_) {
    tls_->close_notify();
    return;
  }
  if (fd_ >= 0) {
    ::shutdown(fd_, SHUT_WR);
  }
}

void line_client::reset() {
  if (fd_ >= 0) {
    tls_.reset(); // no close_notify: the peer sees only the reset
    linger lin{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
    close_fd();
  }
}

bool line_client::vanish() {
  if (fd_ < 0)
    return false;
  // In repair mode the kernel drops the socket silently: the peer keeps an established
  // connection to nobody, and only learns otherwise when it sends something (a RST comes back).
  const int on = 1;
  if (::setsockopt(fd_, IPPROTO_TCP, TCP_REPAIR, &on, sizeof(on)) != 0)
    return false;
  close_fd();
  return true;
}

bool wait_for_ping(std::uint16_t port, std::chrono::milliseconds timeout) {
  const auto deadline = clock_type::now() + timeout;
  while (clock_type::now() < deadline) {
    try {
      line_client client(port, std::chrono::milliseconds(500));
      if (client.request("PING") == "PONG") {
        return true;
      }
    } catch (const std::exception&) {
      // not listening yet
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::vector<std::string> split_words(std::string_view line) {
  std::vector<std::string> words;
  std::size_t start = 0;
  for (;;) {
    const auto space = line.find(' ', start);
    words.emplace_back(line.substr(start, space - start));
    if (space == std::string_view::npos) {
      break;
    }
    start = space + 1;
  }
  return words;
}

bool is_owner(std::string_view text) {
  if (text.size() != 40) {
    return false;
  }
  for (const char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

std::optional<std::int64_t> parse_int(std::string_view text) {
  if (text.empty()) {
    return std::nullopt;
  }
  for (const char c : text) {
    if (c < '0' || c > '9') {
      return std::nullopt;
    }
  }
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

loopback_listener listen_on_loopback(int backlog) {
  loopback_listener out;
  out.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (out.fd < 0)
    throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(out.fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(out.fd, backlog) != 0 ||
      ::getsockname(out.fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const int error = errno;
    ::close(out.fd);
    throw std::system_error(error, std::generic_category(), "listen on 127.0.0.1");
  }
  out.port = ntohs(address.sin_port);
  return out;
}

std::optional<lock_grant> parse_lock_ok(std::string_view reply) {
  const auto words = split_words(reply);
  if (words.size() != 4 || words[0] != "OK" || !is_owner(words[1])) {
    return std::nullopt;
  }
  std::uint64_t fence = 0;
  const auto& f = words[2];
  if (f.empty() || f.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), fence);
  if (ec != std::errc() || end != f.data() + f.size()) {
    return std::nullopt;
  }
  const auto validity = parse_int(words[3]);
  if (!validity) {
    return std::nullopt;
  }
  return lock_grant{words[1], fence, *validity};
}

} // namespace redlockd::test
