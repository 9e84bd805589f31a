#include "redlockd/ctl/line_connection.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace redlockd::ctl {
namespace {

using clock_type = std::chrono::steady_clock;

int wait_for(int fd, short events, clock_type::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock_type::now());
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
    if (n >= 0 || errno != EINTR)
      return n;
  }
}

// The newest OpenSSL error as text, or `fallback`.
std::string openssl_error(const char* fallback) {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0)
    return fallback;
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

// A connected Unix-domain socket to the daemon's listen_unix path.
int connect_unix(std::string_view address, std::string_view path) {
  sockaddr_un where{};
  where.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof where.sun_path)
    throw connection_error("bad address '" + std::string(address) +
                           "' (want unix:/path/to/socket)");
  path.copy(where.sun_path, path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    throw connection_error(std::string("cannot create a socket: ") + std::strerror(errno));
  // A local connect completes at once (or fails: no such file, no permission, nobody listening).
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&where), sizeof where) != 0) {
    const int error = errno;
    ::close(fd);
    throw connection_error("cannot connect to " + std::string(address) + ": " +
                           std::strerror(error));
  }
  // Like the TCP path: the reads and writes below poll a non-blocking descriptor.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

} // namespace

struct line_connection::tls_state {
  SSL_CTX* context = nullptr;
  SSL* ssl = nullptr;
  ~tls_state() {
    if (ssl != nullptr) {
      SSL_shutdown(ssl); // close_notify, without waiting for the daemon's
      SSL_free(ssl);
    }
    if (context != nullptr)
      SSL_CTX_free(context);
  }
};

// Drives one non-blocking OpenSSL call until it completes or the deadline passes; returns its
// result (> 0 done) or throws.
template <class Call>
static int drive(SSL* ssl, int fd, clock_type::time_point deadline, const char* what, Call call) {
  for (;;) {
    ERR_clear_error();
    const int result = call();
    if (result > 0)
      return result;
    const int error = SSL_get_error(ssl, result);
    short events = 0;
    if (error == SSL_ERROR_WANT_READ)
      events = POLLIN;
    else if (error == SSL_ERROR_WANT_WRITE)
      events = POLLOUT;
    else if (error == SSL_ERROR_ZERO_RETURN)
      throw connection_error("the daemon closed the connection");
    else
      throw connection_error(std::string(what) + ": " + openssl_error("connection lost"));
    if (wait_for(fd, events, deadline) <= 0)
      throw connection_error(std::string(what) + ": timed out");
  }
}

void line_connection::start_tls(const std::string& host, const tls_options& options,
                                clock_type::time_point deadline) {
  // SSL_write cannot pass MSG_NOSIGNAL: a daemon that closed must give EPIPE, not kill us. A
  // handler rather than SIG_IGN, so that the command of `run` still starts with the default.
  struct sigaction quiet {};
  quiet.sa_handler = [](int) {};
  sigemptyset(&quiet.sa_mask);
  ::sigaction(SIGPIPE, &quiet, nullptr);
  tls_ = std::make_unique<tls_state>();
  tls_->context = SSL_CTX_new(TLS_client_method());
  if (tls_->context == nullptr)
    throw connection_error("TLS: " + openssl_error("cannot create a context"));
  SSL_CTX* context = tls_->context;
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
  const bool loaded =
      options.ca_file.empty()
          ? SSL_CTX_set_default_verify_paths(context) == 1
          : SSL_CTX_load_verify_locations(context, options.ca_file.c_str(), nullptr) == 1;
  if (!loaded)
    throw connection_error("--cacert: cannot load '" + options.ca_file +
                           "': " + openssl_error("unreadable"));
  if (!options.cert_file.empty()) {
    const std::string& key = options.key_file.empty() ? options.cert_file : options.key_file;
    if (SSL_CTX_use_certificate_chain_file(context, options.cert_file.c_str()) != 1)
      throw connection_error("--cert: cannot load '" + options.cert_file +
                             "': " + openssl_error("unreadable"));
    if (SSL_CTX_use_PrivateKey_file(context, key.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(context) != 1)
      throw connection_error("--key: cannot load '" + key + "': " + openssl_error("not its key"));
  }
  tls_->ssl = SSL_new(context);
  SSL* ssl = tls_->ssl;
  if (ssl == nullptr || SSL_set_fd(ssl, fd_) != 1)
    throw connection_error("TLS: " + openssl_error("cannot create a connection"));
  in6_addr address{};
  const bool is_address = ::inet_pton(AF_INET, host.c_str(), &address) == 1 ||
                          ::inet_pton(AF_INET6, host.c_str(), &address) == 1;
  if (is_address) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, host.c_str());
    SSL_set1_host(ssl, host.c_str());
  }
  try {
    drive(ssl, fd_, deadline, "TLS handshake", [&] { return SSL_connect(ssl); });
  } catch (const connection_error& e) {
    const long verified = SSL_get_verify_result(ssl);
    if (verified != X509_V_OK)
      throw connection_error(std::string(e.what()) + " (" +
                             X509_verify_cert_error_string(verified) + ")");
    throw;
  }
}

line_connection::line_connection(std::string_view address, std::chrono::milliseconds timeout,
                                 const std::optional<tls_options>& tls) {
  if (address.starts_with("unix:")) {
    // The daemon's Unix socket is plaintext: the file's permissions decide who may connect.
    if (tls)
      throw connection_error("--tls does not apply to a unix: address (the socket is plaintext)");
    fd_ = connect_unix(address, address.substr(5));
    return;
  }
  std::string host;
  std::string port;
  if (address.starts_with('[')) {
    const auto close = address.find("]:");
    if (close == std::string_view::npos)
      throw connection_error("bad address '" + std::string(address) + "'");
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const auto colon = address.rfind(':');
    if (colon == std::string_view::npos)
      throw connection_error("bad address '" + std::string(address) + "' (want host:port)");
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    throw connection_error("cannot resolve " + host + ": " + ::gai_strerror(rc));
  const auto deadline = clock_type::now() + timeout;
  std::string last_error = "no address";
  for (addrinfo* ai = found; ai != nullptr && fd_ < 0; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
      continue;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ||
        (errno == EINPROGRESS && wait_for(fd, POLLOUT, deadline) > 0)) {
      int error = 0;
      socklen_t length = sizeof error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      if (error == 0) {
        fd_ = fd;
        break;
      }
      last_error = std::strerror(error);
    } else {
      last_error = errno == EINPROGRESS ? "timed out" : std::strerror(errno);
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  if (fd_ < 0)
    throw connection_error("cannot connect to " + std::string(address) + ": " + last_error);
  if (tls) {
    try {
      start_tls(host, *tls, deadline);
    } catch (const connection_error& e) {
      tls_.reset();
      ::close(fd_);
      fd_ = -1;
      throw connection_error("cannot connect to " + std::string(address) + ": " + e.what());
    }
  }
}

line_connection::~line_connection() {
  tls_.reset();
  if (fd_ >= 0)
    ::close(fd_);
}

void line_connection::send_line(std::string_view line) {
  std::string data(line);
  data.push_back('\n');
  std::size_t sent = 0;
  const auto deadline = clock_type::now() + std::chrono::seconds(10);
  if (tls_) {
    while (sent < data.size()) {
      const int chunk = static_cast<int>(std::min<std::size_t>(data.size() - sent, 1 << 20));
      sent += static_cast<std::size_t>(
          drive(tls_->ssl, fd_, deadline, "cannot send to the daemon",
                [&] { return SSL_write(tls_->ssl, data.data() + sent, chunk); }));
    }
    return;
  }
  while (sent < data.size()) {
    const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (wait_for(fd_, POLLOUT, deadline) <= 0)
        throw connection_error("cannot send to the daemon: timed out");
    } else {
      throw connection_error(std::string("cannot send to the daemon: ") + std::strerror(errno));
    }
  }
}

std::optional<std::string> line_connection::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = clock_type::now() + timeout;
  for (;;) {
    if (const auto lf = buffer_.find('\n'); lf != std::string::npos) {
      std::string line = buffer_.substr(0, lf);
      buffer_.erase(0, lf + 1);
      return line;
    }
    // TLS may hold decrypted bytes the socket no longer shows: read them before polling.
    const bool decrypted_waiting = tls_ && SSL_pending(tls_->ssl) > 0;
    if (!decrypted_waiting && wait_for(fd_, POLLIN, deadline) <= 0)
      return std::nullopt;
    receive();
  }
}

std::size_t line_connection::receive() {
  char chunk[4096];
  if (tls_) {
    std::size_t total = 0;
    do {
      ERR_clear_error();
      const int n = SSL_read(tls_->ssl, chunk, sizeof chunk);
      if (n > 0) {
        buffer_.append(chunk, static_cast<std::size_t>(n));
        total += static_cast<std::size_t>(n);
        continue;
      }
      const int error = SSL_get_error(tls_->ssl, n);
      if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE)
        return total; // a partial record or a handshake message: nothing for us yet
      if (error == SSL_ERROR_ZERO_RETURN || (error == SSL_ERROR_SYSCALL && errno == 0))
        throw connection_error("the daemon closed the connection");
      // OpenSSL 3 reports a TCP close without close_notify as an error: the same closed daemon.
      const std::string why = openssl_error("closed");
      if (why.find("unexpected eof") != std::string::npos)
        throw connection_error("the daemon closed the connection");
      throw connection_error("connection to the daemon lost: " + why);
    } while (SSL_pending(tls_->ssl) > 0);
    return total;
  }
  const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
  if (n == 0)
    throw connection_error("the daemon closed the connection");
  if (n < 0) {
    if (errno == EAGAIN || errno == EINTR)
      return 0;
    throw connection_error(std::string("connection to the daemon lost: ") + std::strerror(errno));
  }
  buffer_.append(chunk, static_cast<std::size_t>(n));
  return static_cast<std::size_t>(n);
}

std::string line_connection::request(std::string_view line, std::chrono::milliseconds timeout) {
  send_line(line);
  auto reply = read_line(timeout);
  if (!reply)
    throw connection_error("no reply from the daemon within " + std::to_string(timeout.count()) +
                           " ms");
  return *reply;
}

} // namespace redlockd::ctl
