#include "redlockd/net/tls.hpp"

#include <boost/asio/ssl.hpp>

#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdexcept>

namespace redlockd {
namespace ssl = net::ssl;

struct tls_context::impl {
  explicit impl(ssl::context::method method) : context(method) {}
  ssl::context context;
};

struct tls_stream::impl {
  impl(stream_socket& socket, ssl::context& context) : stream(socket, context) {}
  ssl::stream<stream_socket&> stream;
};

namespace {

// Runs one loading step; a failure names the config key and the file.
template <class Step>
void load(std::string_view key, const std::string& path, Step step) {
  try {
    step();
  } catch (const boost::system::system_error& e) {
    throw std::runtime_error(std::string(key) + ": cannot load '" + path +
                             "': " + e.code().message());
  }
}

// TLS 1.2 is the oldest version either side accepts.
void harden(ssl::context& context) {
  context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                      ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                      ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(context.native_handle(), TLS1_2_VERSION);
}

void load_key_pair(ssl::context& context, std::string_view block, const std::string& cert_file,
                   const std::string& key_file) {
  load(std::string(block) + ".cert_file", cert_file,
       [&] { context.use_certificate_chain_file(cert_file); });
  load(std::string(block) + ".key_file", key_file,
       [&] { context.use_private_key_file(key_file, ssl::context::pem); });
  if (SSL_CTX_check_private_key(context.native_handle()) != 1)
    throw std::runtime_error(std::string(block) + ".key_file: '" + key_file +
                             "' is not the key of '" + cert_file + "'");
}

} // namespace

tls_context::tls_context(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
tls_context::~tls_context() = default;

std::shared_ptr<tls_context> tls_context::for_listener(const listener_tls& cfg) {
  auto state = std::make_unique<impl>(ssl::context::tls_server);
  ssl::context& context = state->context;
  harden(context);
  load_key_pair(context, "tls", cfg.cert_file, cfg.key_file);
  if (!cfg.client_ca_file.empty()) {
    load("tls.client_ca_file", cfg.client_ca_file,
         [&] { context.load_verify_file(cfg.client_ca_file); });
    // Tells clients which CA to pick their certificate for.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(cfg.client_ca_file.c_str()))
      SSL_CTX_set_client_CA_list(context.native_handle(), names);
    context.set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  } else {
    context.set_verify_mode(ssl::verify_none);
  }
  return std::shared_ptr<tls_context>(new tls_context(std::move(state)));
}

std::shared_ptr<tls_context> tls_context::for_masters(const master_tls& cfg) {
  auto state = std::make_unique<impl>(ssl::context::tls_client);
  ssl::context& context = state->context;
  harden(context);
  load("redis_tls.ca_file", cfg.ca_file, [&] { context.load_verify_file(cfg.ca_file); });
  context.set_verify_mode(ssl::verify_peer);
  if (!cfg.cert_file.empty())
    load_key_pair(context, "redis_tls", cfg.cert_file, cfg.key_file);
  return std::shared_ptr<tls_context>(new tls_context(std::move(state)));
}

void check_tls_files(const config& cfg) {
  if (cfg.tls)
    tls_context::for_listener(*cfg.tls);
  if (cfg.redis_tls)
    tls_context::for_masters(*cfg.redis_tls);
}

tls_stream::tls_stream(stream_socket& socket, tls_context& context)
    : impl_(std::make_shared<impl>(socket, context.impl_->context)) {}

tls_stream::~tls_stream() = default;

awaitable<void> tls_stream::accept(std::chrono::milliseconds timeout, error_code_t& ec) {
  const auto state = impl_;
  // Shared with the timer's handler, which may run after this coroutine has returned.
  struct race {
    bool finished = false;
    bool timed_out = false;
  };
  const auto outcome = std::make_shared<race>();
  net::steady_timer deadline(state->stream.next_layer().get_executor(), timeout);
  deadline.async_wait([state, outcome](const error_code_t& timer_ec) {
    if (timer_ec || outcome->finished)
      return;
    outcome->timed_out = true;
    error_code_t ignored;
    state->stream.next_layer().close(ignored);
  });
  co_await state->stream.async_handshake(ssl::stream_base::server,
                                         net::redirect_error(net::use_awaitable, ec));
  outcome->finished = true;
  deadline.cancel();
  if (outcome->timed_out)
    ec = net::error::timed_out;
}

awaitable<void> tls_stream::connect(const std::string& server_name, error_code_t& ec) {
  const auto state = impl_;
  SSL* ssl = state->stream.native_handle();
  error_code_t not_address;
  net::ip::make_address(server_name, not_address);
  if (not_address) {
    SSL_set_tlsext_host_name(ssl, server_name.c_str());
    SSL_set1_host(ssl, server_name.c_str());
  } else {
    // A certificate for an address carries it as an IP subjectAltName.
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), server_name.c_str());
  }
  co_await state->stream.async_handshake(ssl::stream_base::client,
                                         net::redirect_error(net::use_awaitable, ec));
}

awaitable<std::size_t> tls_stream::read_some(net::mutable_buffer buffer, error_code_t& ec) {
  const auto state = impl_;
  const std::size_t n =
      co_await state->stream.async_read_some(buffer, net::redirect_error(net::use_awaitable, ec));
  // The peer's TCP close without close_notify: for a line protocol this is an ordinary end.
  if (ec == ssl::error::stream_truncated)
    ec = net::error::eof;
  co_return n;
}

void tls_stream::async_write(net::const_buffer buffer,
                             std::function<void(const error_code_t&)> done) {
  net::async_write(
      impl_->stream, buffer,
      [state = impl_, done = std::move(done)](const error_code_t& ec, std::size_t) { done(ec); });
}

void tls_stream::async_close_notify(std::chrono::milliseconds limit, std::function<void()> done) {
  const auto state = impl_;
  auto deadline =
      std::make_shared<net::steady_timer>(state->stream.next_layer().get_executor(), limit);
  deadline->async_wait([state](const error_code_t& ec) {
    if (ec)
      return;
    error_code_t ignored;
    state->stream.next_layer().close(ignored); // the shutdown below then completes
  });
  // As if the peer's close_notify had come: SSL_shutdown sends ours and is done, instead of
  // waiting for an answer many clients never send.
  SSL_set_shutdown(state->stream.native_handle(), SSL_RECEIVED_SHUTDOWN);
  state->stream.async_shutdown([state, deadline, done = std::move(done)](const error_code_t&) {
    deadline->cancel();
    done();
  });
}

std::string tls_stream::describe(const error_code_t& ec) const {
  std::string text = ec.message();
  SSL* ssl = impl_->stream.native_handle();
  const long verified = SSL_get_verify_result(ssl);
  if (verified != X509_V_OK)
    text += std::string(" (") + X509_verify_cert_error_string(verified) + ")";
  return text;
}

std::string tls_stream::summary() const {
  SSL* ssl = impl_->stream.native_handle();
  std::string text = SSL_get_version(ssl);
  if (X509* peer = SSL_get_peer_certificate(ssl)) {
    char subject[256] = {};
    X509_NAME_oneline(X509_get_subject_name(peer), subject, sizeof subject);
    text += std::string(", peer ") + subject;
    X509_free(peer);
  }
  return text;
}

} // namespace redlockd
