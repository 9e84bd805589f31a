// One connection (TCP, or a Unix-domain socket), plaintext or with TLS layered over its socket,
// behind one read / write / close interface: client sessions and Redis links call it without asking
// which it is. The TLS machinery itself (OpenSSL, <boost/asio/ssl.hpp>) stays in src/net/tls.cpp.
#pragma once

#include "redlockd/net/net.hpp"
#include "redlockd/net/tls.hpp"

#include <chrono>
#include <memory>
#include <utility>

namespace redlockd {

class stream {
 public:
  // A socket that a link connects (and reconnects) itself.
  explicit stream(net::io_context& io) : socket_(io) {}
  // An accepted connection.
  explicit stream(stream_socket socket) : socket_(std::move(socket)) {}
  // The TLS layer refers to the socket by address.
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  // For what is not reading or writing: connecting, socket options, endpoints.
  stream_socket& socket() { return socket_; }
  stream_socket::executor_type get_executor() { return socket_.get_executor(); }
  bool is_open() const { return socket_.is_open(); }

  // Every read and write from now on goes through a fresh TLS layer (its handshake is the
  // caller's: tls()->accept or tls()->connect). One per connection: TLS state is not reused.
  tls_stream& start_tls(tls_context& context) {
    tls_ = std::make_unique<tls_stream>(socket_, context);
    return *tls_;
  }
  // Drops the TLS layer of a connection that ended; a write still in flight keeps its TLS state
  // alive until it completes.
  void end_tls() { tls_.reset(); }
  // Null while plaintext.
  tls_stream* tls() const { return tls_.get(); }

  // Like socket.async_read_some. Over TLS, a TCP close without close_notify is reported as eof.
  // Not a coroutine itself: the plaintext read costs what a direct socket read costs.
  awaitable<std::size_t> read_some(net::mutable_buffer buffer, error_code_t& ec) {
    if (tls_)
      return tls_->read_some(buffer, ec);
    return socket_.async_read_some(buffer, net::redirect_error(net::use_awaitable, ec));
  }

  // Writes all of `bytes`, then calls done(const error_code_t&). The caller keeps the bytes, and
  // this stream, alive until then.
  template <class Handler>
  void async_write(net::const_buffer bytes, Handler&& done) {
    if (tls_) {
      tls_->async_write(bytes, std::forward<Handler>(done));
      return;
    }
    net::async_write(socket_, bytes,
                     [done = std::forward<Handler>(done)](const error_code_t& ec,
                                                          std::size_t) mutable { done(ec); });
  }

  // Sends FIN now, even while a write is in flight.
  void shutdown() {
    error_code_t ignored;
    socket_.shutdown(net::socket_base::shutdown_both, ignored);
  }
  // Closes the socket: every read and write in flight completes with operation_aborted.
  void close() {
    error_code_t ignored;
    socket_.close(ignored);
  }
  // A clean end for TLS peers that insist on close_notify: sends it, then closes the socket (a
  // peer that does not read is cut off after `limit`). `keep` holds the owner of this stream
  // until then. Only after a finished handshake.
  void close_after_notify(std::chrono::milliseconds limit, std::shared_ptr<void> keep) {
    tls_->async_close_notify(limit, [this, keep = std::move(keep)] { close(); });
  }

 private:
  stream_socket socket_;
  std::unique_ptr<tls_stream> tls_; // over socket_; null while plaintext
};

} // namespace redlockd
