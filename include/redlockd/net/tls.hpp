// TLS for both sides of the daemon. <boost/asio/ssl.hpp> and OpenSSL stay inside src/net/tls.cpp:
// sessions and links hold a `stream` (stream.hpp), which layers a tls_stream over its plain
// socket when TLS is on and calls the socket directly when it is not.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/net/net.hpp"
#include "redlockd/net/tls_files.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace redlockd {

// Certificates, keys and verification settings, loaded once and shared by every connection of
// one side.
class tls_context {
 public:
  // Throw std::runtime_error naming the config key (e.g. "tls.cert_file: cannot load '...': ...").
  static std::shared_ptr<tls_context> for_listener(const listener_tls& cfg);
  static std::shared_ptr<tls_context> for_masters(const master_tls& cfg);
  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  struct impl;

 private:
  explicit tls_context(std::unique_ptr<impl> state);
  std::unique_ptr<impl> impl_;
  friend class tls_stream;
};

// One TLS connection over a socket that the caller owns and keeps (closing that socket ends
// the connection). Operations in flight keep the TLS state alive, so a link may replace its
// tls_stream on reconnect while an aborted write still completes.
class tls_stream {
 public:
  tls_stream(stream_socket& socket, tls_context& context);
  ~tls_stream();
  tls_stream(const tls_stream&) = delete;
  tls_stream& operator=(const tls_stream&) = delete;

  // Server side. The socket is closed when the handshake has not finished within `timeout`
  // (slowloris); ec is then timed_out.
  awaitable<void> accept(std::chrono::milliseconds timeout, error_code_t& ec);
  // Client side: sends `server_name` as SNI (unless it is an address) and verifies the peer's
  // certificate chain and name. The caller bounds it (the link's connect timer).
  awaitable<void> connect(const std::string& server_name, error_code_t& ec);

  // Like socket.async_read_some; a TCP close without close_notify is reported as eof.
  awaitable<std::size_t> read_some(net::mutable_buffer buffer, error_code_t& ec);
  // Writes all of `buffer`, then calls `done`.
  void async_write(net::const_buffer buffer, std::function<void(const error_code_t&)> done);

  // Sends close_notify without waiting for the peer's, then calls `done` (which closes the
  // socket). A peer that does not read is cut off after `limit`.
  void async_close_notify(std::chrono::milliseconds limit, std::function<void()> done);

  // A readable reason for a failed handshake: the error plus the certificate verification
  // result when that is what failed.
  std::string describe(const error_code_t& ec) const;
  // "TLSv1.3, client CN=..." after a successful handshake, for logs.
  std::string summary() const;

 private:
  struct impl;
  std::shared_ptr<impl> impl_;
};

} // namespace redlockd
