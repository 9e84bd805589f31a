// The client listener: the accept loop, max_connections, TCP keepalive and no-delay on each
// accepted socket, and the set of live sessions (drain and stop at shutdown).
#include "redlockd/server/listener.hpp"

#include "redlockd/net/tls.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace redlockd {
namespace {

// A peer that vanished without FIN or RST is only noticed by probing: after `idle_s` of silence,
// three probes idle_s / 3 apart (at least 1 s), so it is dropped about 2 * idle_s after.
void enable_keepalive(tcp::socket& socket, std::uint32_t idle_s) {
  if (idle_s == 0)
    return;
  error_code_t ignored;
  socket.set_option(net::socket_base::keep_alive(true), ignored);
  const int fd = socket.native_handle();
  const int idle = static_cast<int>(idle_s);
  const int interval = std::max(1, idle / 3);
  const int probes = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes));
}

} // namespace

listener::listener(net::io_context& io, session_context& context)
    : io_(io), context_(context), acceptor_(io) {}

void listener::listen(const endpoint& address) {
  open_listener(acceptor_, address);
}

void listener::start() {
  net::co_spawn(io_, accept_loop(), log_failure{context_.log, "the client accept loop"});
}

void listener::stop_accepting() {
  error_code_t ignored;
  acceptor_.close(ignored);
}

void listener::drain() {
  for (const auto& session : std::unordered_set(sessions_))
    session->finish_and_close();
}

void listener::stop() {
  stop_accepting();
  for (const auto& session : std::unordered_set(sessions_))
    session->close();
}

awaitable<void> listener::accept_loop() {
  while (acceptor_.is_open()) {
    error_code_t ec;
    tcp::socket socket =
        co_await acceptor_.async_accept(net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor_.is_open())
        co_return;
      // Out of descriptors and the like: keep serving the clients we have.
      context_.log->warn("accept failed: {}", ec.message());
      net::steady_timer pause(io_, std::chrono::milliseconds(50));
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    enable_keepalive(socket, context_.cfg.client_keepalive_s);
    if (sessions_.size() >= context_.cfg.max_connections) {
      refuse(socket);
      continue;
    }
    auto session = std::make_shared<client_session>(std::move(socket), *this, context_,
                                                    next_session_id_++, tls_.get());
    sessions_.insert(session);
    session->start();
  }
}

void listener::refuse(tcp::socket& socket) {
  // Tell the client why before closing; the line is small enough for a fresh socket buffer.
  // A TLS client could not read a plaintext line, and a handshake costs CPU we lack now.
  error_code_t ec;
  const std::string line =
      format_error(err_code::too_many, "too many connections (max_connections)");
  socket.non_blocking(true, ec);
  if (!tls_)
    socket.write_some(net::buffer(line), ec);
  else
    context_.log->debug("TLS client refused: too many connections (max_connections)");
  socket.close(ec);
}

} // namespace redlockd
