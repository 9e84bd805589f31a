// A blocking line-protocol connection to redlockd, for redlockctl.
#pragma once

#include <chrono>
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

class line_connection {
 public:
  // "host:port" (or "[v6]:port"). Throws connection_error.
  line_connection(std::string_view address, std::chrono::milliseconds timeout);
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
  int fd_ = -1;
  std::string buffer_;
};

} // namespace redlockd::ctl
