// A blocking line-protocol connection to redlockd, for redlockctl.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace redlockd::ctl {

// The daemon could not be reached, or the connection broke.
class connection_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// TLS to the daemon: its certificate is verified against `ca_file` (the system's trusted CAs
// when empty) and against the host of the address.
struct tls_options {
  std::string ca_file;
  std::string cert_file; // a client certificate, for a daemon that requires one
  std::string key_file;  // its key; defaults to cert_file (a PEM holding both)
};

class line_connection {
 public:
  // "host:port" (or "[v6]:port"), TLS when `tls` is set; or "unix:PATH" (plaintext only). Throws
  // connection_error.
  line_connection(std::string_view address, std::chrono::milliseconds timeout,
                  const std::optional<tls_options>& tls = std::nullopt);
  ~line_connection();
  line_connection(const line_connection&) = delete;
  line_connection& operator=(const line_connection&) = delete;

  void send_line(std::string_view line);
  // The next line without its LF; std::nullopt when nothing complete came before the timeout.
  // Throws connection_error when the daemon closed the connection.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // Sends a request and waits for its reply (connection_error on timeout too).
  std::string request(std::string_view line, std::chrono::milliseconds timeout);

  int fd() const { return fd_; }
  // Lines already received and not yet read.
  bool has_buffered_line() const { return buffer_.find('\n') != std::string::npos; }

 private:
  struct tls_state;
  void start_tls(const std::string& host, const tls_options& options,
                 std::chrono::steady_clock::time_point deadline);
  // Reads what is there into buffer_: > 0 bytes, 0 nothing yet; throws when the daemon closed.
  std::size_t receive();

  int fd_ = -1;
  std::string buffer_;
  std::unique_ptr<tls_state> tls_; // null: plaintext
};

} // namespace redlockd::ctl
