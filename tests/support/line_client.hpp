// A blocking line-protocol client over TCP to 127.0.0.1 (or a Unix-domain socket), with a
// receive timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <vector>

#include "tls_files.hpp"

namespace redlockd::test {

// read_line() found no complete line before the timeout.
class read_timeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The peer closed (EOF or reset) before a complete line arrived.
class connection_closed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class line_client {
 public:
  // Connects to 127.0.0.1:port; throws std::system_error when the connection is refused.
  explicit line_client(std::uint16_t port,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Connects to the Unix-domain socket at `socket_file`; throws std::system_error on failure.
  explicit line_client(const std::filesystem::path& socket_file,
                       std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Over TCP with TLS; throws std::runtime_error when the handshake fails.
  line_client(std::uint16_t port, const tls_client_files& tls,
              std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~line_client();
  line_client(line_client&& other) noexcept;
  line_client& operator=(line_client&& other) noexcept;
  line_client(const line_client&) = delete;
  line_client& operator=(const line_client&) = delete;

  // Sends raw bytes as they are (no LF added). Throws std::system_error on failure.
  void send(std::string_view raw);
  // Sends `line` + "\n", then reads one reply line.
  std::string request(std::string_view line);
  // The next reply line without its LF. Throws read_timeout or connection_closed.
  std::string read_line();
  // Like read_line(), but std::nullopt instead of throwing.
  std::optional<std::string> try_read_line(std::chrono::milliseconds timeout);
  // True when the peer closes the connection (EOF or reset) within `timeout` without sending
  // any further byte; false if bytes arrive or the timeout passes.
  bool closed_by_peer(std::chrono::milliseconds timeout = std::chrono::seconds(3));
  // Sends FIN (shutdown of the write side); over TLS, close_notify.
  void shutdown_write();
  // Closes the socket with SO_LINGER 0, so the peer sees a reset.
  void reset();
  // Closes the socket without sending anything, neither FIN nor RST, as when the client's host
  // dies or the network is cut (TCP_REPAIR; needs CAP_NET_ADMIN). False, and nothing is closed,
  // when that is not permitted.
  bool vanish();

  // Over TLS: the daemon ended the stream with close_notify.
  bool tls_close_notify_received() const { return tls_ && tls_->close_notify_received(); }

  void set_timeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // Bytes received but not yet returned as lines.
  const std::string& pending() const { return buffer_; }

 private:
  // Opens fd_ connected to `address` (blocking); throws std::system_error naming `name`.
  void connect_to(const sockaddr* address, socklen_t size, const std::string& name);
  enum class fill_result : std::uint8_t { data, timeout, closed };
  fill_result fill(std::chrono::steady_clock::time_point deadline);
  void close_fd();

  int fd_ = -1;
  std::unique_ptr<tls_socket> tls_; // over fd_; null: plaintext
  std::chrono::milliseconds timeout_;
  std::string buffer_;
  bool eof_ = false;
};

// A listening TCP socket on a free 127.0.0.1 port, for stand-ins of a daemon or a master: its
// descriptor and port. Throws std::system_error when the socket cannot be set up.
struct loopback_listener {
  int fd = -1;
  std::uint16_t port = 0;
};
loopback_listener listen_on_loopback(int backlog);

// Tries to connect and get "PONG" until `timeout`; true on success.
bool wait_for_ping(std::uint16_t port, std::chrono::milliseconds timeout);

// Splits a reply on single spaces.
std::vector<std::string> split_words(std::string_view line);

// A parsed "OK <owner> <fence> <validity_ms>".
struct lock_grant {
  std::string owner;
  std::uint64_t fence = 0;
  std::int64_t validity_ms = 0;
};
// std::nullopt unless `reply` is exactly "OK <40 lowercase hex> <decimal> <decimal>".
std::optional<lock_grant> parse_lock_ok(std::string_view reply);
// 40 lowercase hex characters.
bool is_owner(std::string_view text);
// Strict decimal (digits only, fits int64). std::nullopt otherwise.
std::optional<std::int64_t> parse_int(std::string_view text);

} // namespace redlockd::test
