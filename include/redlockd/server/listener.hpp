// The client side's listening sockets: TCP (listen) and, optionally, a Unix-domain socket for
// clients on the same host (listen_unix). Accepts connections within max_connections, sets their
// socket options, and owns the sessions it started until they close.
#pragma once

#include "redlockd/net/net.hpp"
#include "redlockd/server/client_session.hpp"

#include <boost/asio/local/stream_protocol.hpp>

#include <memory>
#include <string>
#include <unordered_set>

namespace redlockd {

class tls_context;

class listener {
 public:
  listener(net::io_context& io, session_context& context);

  // Binds and listens; throws on failure (address in use, ...).
  void listen(const endpoint& address);
  // Also listens on a Unix-domain socket at `path`, a socket file with permission bits `mode`.
  // A socket file left by a daemon that died is replaced; one a live process accepts on is not
  // (throws, as for any other failure). Its clients are plaintext even with use_tls().
  void listen_unix(const std::string& path, unsigned mode);
  // Every TCP connection accepted from now on speaks TLS (call before start()).
  void use_tls(std::shared_ptr<tls_context> context) { tls_ = std::move(context); }
  void start();
  // Stops accepting new connections (and removes the Unix socket file).
  void stop_accepting();
  // Every session stops reading and closes once its pending replies are written.
  void drain();
  // Closes every session at once.
  void stop();

  std::size_t clients() const { return sessions_.size(); }
  tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }

  // Called by a session as it closes: the listener lets go of it.
  void forget(const std::shared_ptr<client_session>& session) { sessions_.erase(session); }

 private:
  using unix_acceptor = net::local::stream_protocol::acceptor;

  template <class Acceptor>
  awaitable<void> accept_loop(Acceptor& acceptor);
  // A connection just accepted: refused past max_connections, else a new session.
  void admit(stream_socket socket, std::string peer, tls_context* tls);
  void refuse(stream_socket& socket, bool tls);

  net::io_context& io_;
  session_context& context_;
  tcp::acceptor acceptor_;
  unix_acceptor unix_acceptor_;
  std::string unix_path_;            // the socket file this listener created; empty: none
  std::shared_ptr<tls_context> tls_; // null: plaintext
  std::unordered_set<std::shared_ptr<client_session>> sessions_;
  std::uint64_t next_session_id_ = 1;
};

} // namespace redlockd
