// TLS helpers of the integration tests: a throw-away PKI made with the openssl CLI, and a
// blocking TLS client connection (OpenSSL) over a connected socket, with deadlines.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "process.hpp"

struct ssl_st;
struct ssl_ctx_st;

namespace redlockd::test {

// What a test client presents and checks.
struct tls_client_files {
  std::string ca_file;   // verify the server against this CA; empty: no verification
  std::string cert_file; // optional client certificate
  std::string key_file;
};

// A CA with a server certificate (localhost, 127.0.0.1) and a client certificate, plus a second,
// unrelated "rogue" CA with its own server and client certificates. EC P-256 keys, valid two
// days, in a temp dir removed on destruction.
class test_pki {
 public:
  test_pki();

  std::string ca_file;
  std::string server_cert;
  std::string server_key;
  std::string client_cert;
  std::string client_key;
  std::string rogue_ca_file;
  std::string rogue_server_cert;
  std::string rogue_server_key;
  std::string rogue_client_cert;
  std::string rogue_client_key;

  // A client with the good client certificate that verifies the server against the good CA.
  tls_client_files client() const { return {ca_file, client_cert, client_key}; }

 private:
  void make_ca(const std::string& name, std::string& cert, std::string& key);
  void make_leaf(const std::string& name, const std::string& ca_cert, const std::string& ca_key,
                 std::string& cert, std::string& key);

  temp_dir dir_;
};

// TLS over an already connected socket (not owned). The socket is switched to non-blocking mode.
class tls_socket {
 public:
  enum class result : std::uint8_t { data, timeout, closed };

  // Runs the client handshake; throws std::runtime_error with OpenSSL's reason on failure.
  tls_socket(int fd, const tls_client_files& files, std::chrono::steady_clock::time_point deadline);
  ~tls_socket();
  tls_socket(const tls_socket&) = delete;
  tls_socket& operator=(const tls_socket&) = delete;

  // Appends what arrives to `into`. closed: close_notify, EOF, reset or a fatal alert.
  result read(std::string& into, std::chrono::steady_clock::time_point deadline);
  // Writes all of `data`; throws std::runtime_error on failure or timeout.
  void write(std::string_view data, std::chrono::steady_clock::time_point deadline);
  // Sends close_notify (our end of the stream).
  void close_notify();
  // The peer ended the stream with close_notify (not a bare TCP close).
  bool close_notify_received() const { return close_notify_received_; }

 private:
  int fd_;
  bool close_notify_received_ = false;
  ssl_ctx_st* context_ = nullptr;
  ssl_st* ssl_ = nullptr;
};

} // namespace redlockd::test
