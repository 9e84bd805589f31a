// The client side's listening socket: accepts connections within max_connections, sets their
// socket options, and owns the sessions it started until they close.
#pragma once

#include "redlockd/net/net.hpp"
#include "redlockd/server/client_session.hpp"

#include <memory>
#include <unordered_set>

namespace redlockd {

class tls_context;

class listener {
 public:
  listener(net::io_context& io, session_context& context);

  // Binds and listens; throws on failure (address in use, ...).
  void listen(const endpoint& address);
  // Every connection accepted from now on speaks TLS (call before start()).
  void use_tls(std::shared_ptr<tls_context> context) { tls_ = std::move(context); }
  void start();
  // Stops accepting new connections.
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
  awaitable<void> accept_loop();
  void refuse(tcp::socket& socket);

  net::io_context& io_;
  session_context& context_;
  tcp::acceptor acceptor_;
  std::shared_ptr<tls_context> tls_; // null: plaintext
  std::unordered_set<std::shared_ptr<client_session>> sessions_;
  std::uint64_t next_session_id_ = 1;
};

} // namespace redlockd
