#include "tls_files.hpp"

#include <csignal>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdexcept>

#ifndef OPENSSL_CLI
#define OPENSSL_CLI "/usr/bin/openssl"
#endif

namespace redlockd::test {

using clock_type = std::chrono::steady_clock;

namespace {

void openssl(const std::vector<std::string>& args) {
  const auto r = run_command(OPENSSL_CLI, args, std::chrono::seconds(20));
  if (r.status != 0) {
    std::string line = "openssl";
    for (const auto& a : args) {
      line += " " + a;
    }
    throw std::runtime_error(line + " failed (" + std::to_string(r.status) + "): " + r.err);
  }
}

std::string last_error(const char* fallback) {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) {
    return fallback;
  }
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

// Waits until `fd` is ready for what OpenSSL asked; false at the deadline.
bool wait_for(int fd, short events, clock_type::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 0)));
    if (n > 0) {
      return true;
    }
    if (n == 0 || errno != EINTR) {
      return false;
    }
  }
}

} // namespace

test_pki::test_pki() : dir_("redlockd-pki") {
  make_ca("ca", ca_file, rogue_ca_file); // rogue_ca_file holds the key for a moment
  const std::string ca_key = rogue_ca_file;
  make_leaf("server", ca_file, ca_key, server_cert, server_key);
  make_leaf("client", ca_file, ca_key, client_cert, client_key);
  std::string rogue_key;
  make_ca("rogue-ca", rogue_ca_file, rogue_key);
  make_leaf("rogue-server", rogue_ca_file, rogue_key, rogue_server_cert, rogue_server_key);
  make_leaf("rogue-client", rogue_ca_file, rogue_key, rogue_client_cert, rogue_client_key);
}

void test_pki::make_ca(const std::string& name, std::string& cert, std::string& key) {
  cert = (dir_.path() / (name + ".crt")).string();
  key = (dir_.path() / (name + ".key")).string();
  openssl({"req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", key, "-subj", "/CN=redlockd test " + name, "-days", "2", "-out", cert});
}

void test_pki::make_leaf(const std::string& name, const std::string& ca_cert,
                         const std::string& ca_key, std::string& cert, std::string& key) {
  cert = (dir_.path() / (name + ".crt")).string();
  key = (dir_.path() / (name + ".key")).string();
  const std::string request = (dir_.path() / (name + ".csr")).string();
  const std::string extensions = (dir_.path() / (name + ".ext")).string();
  write_file(extensions, "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                         "extendedKeyUsage=serverAuth,clientAuth\n");
  openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-keyout", key, "-subj", "/CN=" + name, "-out", request});
  openssl({"x509", "-req", "-in", request, "-CA", ca_cert, "-CAkey", ca_key, "-CAcreateserial",
           "-days", "2", "-extfile", extensions, "-out", cert});
}

tls_socket::tls_socket(int fd, const tls_client_files& files, clock_type::time_point deadline)
    : fd_(fd) {
  // SSL_write cannot pass MSG_NOSIGNAL. A no-op handler, not SIG_IGN: children we exec later
  // start with the default again.
  struct sigaction quiet {};
  quiet.sa_handler = [](int) {};
  sigemptyset(&quiet.sa_mask);
  ::sigaction(SIGPIPE, &quiet, nullptr);
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) | O_NONBLOCK);
  context_ = SSL_CTX_new(TLS_client_method());
  if (context_ == nullptr) {
    throw std::runtime_error("TLS: " + last_error("no context"));
  }
  if (!files.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(context_, files.ca_file.c_str(), nullptr) != 1) {
      throw std::runtime_error("TLS: cannot load " + files.ca_file);
    }
    SSL_CTX_set_verify(context_, SSL_VERIFY_PEER, nullptr);
  }
  if (!files.cert_file.empty() &&
      (SSL_CTX_use_certificate_chain_file(context_, files.cert_file.c_str()) != 1 ||
       SSL_CTX_use_PrivateKey_file(context_, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1)) {
    throw std::runtime_error("TLS: cannot load " + files.cert_file + ": " + last_error("?"));
  }
  ssl_ = SSL_new(context_);
  SSL_set_fd(ssl_, fd_);
  for (;;) {
    ERR_clear_error();
    const int r = SSL_connect(ssl_);
    if (r == 1) {
      return;
    }
    const int error = SSL_get_error(ssl_, r);
    const short events = error == SSL_ERROR_WANT_READ    ? POLLIN
                         : error == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                         : 0;
    if (events == 0) {
      const std::string why = last_error("connection closed");
      SSL_free(ssl_);
      SSL_CTX_free(context_);
      throw std::runtime_error("TLS handshake failed: " + why);
    }
    if (!wait_for(fd_, events, deadline)) {
      SSL_free(ssl_);
      SSL_CTX_free(context_);
      throw std::runtime_error("TLS handshake timed out");
    }
  }
}

tls_socket::~tls_socket() {
  SSL_free(ssl_);
  SSL_CTX_free(context_);
}

tls_socket::result tls_socket::read(std::string& into, clock_type::time_point deadline) {
  char chunk[16384];
  for (;;) {
    ERR_clear_error();
    const int n = SSL_read(ssl_, chunk, sizeof chunk);
    if (n > 0) {
      into.append(chunk, static_cast<std::size_t>(n));
      return result::data;
    }
    const int error = SSL_get_error(ssl_, n);
    const short events = error == SSL_ERROR_WANT_READ    ? POLLIN
                         : error == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                         : 0;
    if (events == 0) {
      ERR_clear_error();
      close_notify_received_ = error == SSL_ERROR_ZERO_RETURN;
      return result::closed; // close_notify, EOF, reset, or an alert such as "unknown ca"
    }
    if (!wait_for(fd_, events, deadline)) {
      return result::timeout;
    }
  }
}

void tls_socket::write(std::string_view data, clock_type::time_point deadline) {
  while (!data.empty()) {
    ERR_clear_error();
    const int n = SSL_write(ssl_, data.data(), static_cast<int>(data.size()));
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    const int error = SSL_get_error(ssl_, n);
    const short events = error == SSL_ERROR_WANT_READ    ? POLLIN
                         : error == SSL_ERROR_WANT_WRITE ? POLLOUT
                                                         : 0;
    if (events == 0) {
      throw std::runtime_error("TLS write failed: " + last_error("connection closed"));
    }
    if (!wait_for(fd_, events, deadline)) {
      throw std::runtime_error("TLS write timed out");
    }
  }
}

void tls_socket::close_notify() {
  SSL_shutdown(ssl_);
}

} // namespace redlockd::test
