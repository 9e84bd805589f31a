// The client listeners: the accept loops (TCP, and a Unix-domain socket when configured),
// max_connections over both, TCP keepalive and no-delay on each accepted TCP socket, and the set
// of live sessions (drain and stop at shutdown).
#include "redlockd/server/listener.hpp"

#include "redlockd/net/tls.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/stat.h>
#include <type_traits>
#include <unistd.h>

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

// "unix:PATH (pid N)": the client's process, as the kernel saw it connect.
std::string unix_peer(net::local::stream_protocol::socket& socket, const std::string& path) {
  ucred credentials{};
  socklen_t size = sizeof credentials;
  if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0)
    return "unix:" + path;
  return "unix:" + path + " (pid " + std::to_string(credentials.pid) + ")";
}

// A socket file at `path` from an earlier daemon: removed when nothing accepts on it any more.
void remove_stale_socket(net::io_context& io, const std::string& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0)
    return; // nothing there (or nothing we may look at: bind says why)
  if (!S_ISSOCK(info.st_mode))
    throw std::runtime_error(path + " exists and is not a socket");
  net::local::stream_protocol::socket probe(io);
  error_code_t ec;
  probe.connect(net::local::stream_protocol::endpoint(path), ec);
  if (!ec)
    throw std::runtime_error(path + ": another process is accepting connections on it");
  ::unlink(path.c_str());
}

} // namespace

listener::listener(net::io_context& io, session_context& context)
    : io_(io), context_(context), acceptor_(io), unix_acceptor_(io) {}

void listener::listen(const endpoint& address) {
  open_listener(acceptor_, address);
}

void listener::listen_unix(const std::string& path, unsigned mode) {
  remove_stale_socket(io_, path);
  const net::local::stream_protocol::endpoint where(path);
  unix_acceptor_.open(where.protocol());
  unix_acceptor_.bind(where);
  unix_path_ = path;
  // Before listen(): nobody can connect while the file still has the umask's bits.
  if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0)
    throw std::runtime_error(path + ": chmod failed: " + std::strerror(errno));
  unix_acceptor_.listen(net::socket_base::max_listen_connections);
}

void listener::start() {
  net::co_spawn(io_, accept_loop(acceptor_), log_failure{context_.log, "the client accept loop"});
  if (unix_acceptor_.is_open())
    net::co_spawn(io_, accept_loop(unix_acceptor_),
                  log_failure{context_.log, "the Unix-socket accept loop"});
}

void listener::stop_accepting() {
  error_code_t ignored;
  acceptor_.close(ignored);
  unix_acceptor_.close(ignored);
  if (!unix_path_.empty())
    ::unlink(unix_path_.c_str());
  unix_path_.clear();
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

template <class Acceptor>
awaitable<void> listener::accept_loop(Acceptor& acceptor) {
  while (acceptor.is_open()) {
    error_code_t ec;
    auto socket = co_await acceptor.async_accept(net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor.is_open())
        co_return;
      // Out of descriptors and the like: keep serving the clients we have.
      context_.log->warn("accept failed: {}", ec.message());
      net::steady_timer pause(io_, std::chrono::milliseconds(50));
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    if constexpr (std::is_same_v<Acceptor, tcp::acceptor>) {
      socket.set_option(tcp::no_delay(true), ec);
      enable_keepalive(socket, context_.cfg.client_keepalive_s);
      const tcp::endpoint remote = socket.remote_endpoint(ec);
      std::string peer =
          ec ? "unknown peer" : endpoint{remote.address().to_string(), remote.port()}.to_string();
      admit(stream_socket(std::move(socket)), std::move(peer), tls_.get());
    } else {
      // A local peer needs no keepalive: the kernel closes its end when the process dies.
      std::string peer = unix_peer(socket, unix_path_);
      admit(stream_socket(std::move(socket)), std::move(peer), nullptr);
    }
  }
}

void listener::admit(stream_socket socket, std::string peer, tls_context* tls) {
  if (sessions_.size() >= context_.cfg.max_connections) {
    refuse(socket, tls != nullptr);
    return;
  }
  auto session = std::make_shared<client_session>(std::move(socket), std::move(peer), *this,
                                                  context_, next_session_id_++, tls);
  sessions_.insert(session);
  session->start();
}

void listener::refuse(stream_socket& socket, bool tls) {
  // Tell the client why before closing; the line is small enough for a fresh socket buffer.
  // A TLS client could not read a plaintext line, and a handshake costs CPU we lack now.
  error_code_t ec;
  const std::string line =
      format_error(err_code::too_many, "too many connections (max_connections)");
  socket.non_blocking(true, ec);
  if (!tls)
    socket.write_some(net::buffer(line), ec);
  else
    context_.log->debug("TLS client refused: too many connections (max_connections)");
  socket.close(ec);
}

} // namespace redlockd
