#include "redlockd/metrics_server.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include <spdlog/spdlog.h>

namespace redlockd {
namespace {

namespace http = boost::beast::http;

// A scraper that stalls must not hold a socket for long.
constexpr auto request_timeout = std::chrono::seconds(10);

} // namespace

metrics_server::metrics_server(net::io_context& io, handlers h, std::shared_ptr<spdlog::logger> log)
    : io_(io), handlers_(std::move(h)), log_(std::move(log)), acceptor_(io) {}

metrics_server::~metrics_server() = default;

void metrics_server::start(const endpoint& address) {
  open_listener(acceptor_, address);
  log_->info("metrics on http://{}/metrics and /healthz", address.to_string());
  net::co_spawn(io_, accept_loop(), log_failure{log_, "the metrics accept loop"});
}

void metrics_server::stop() {
  error_code_t ignored;
  acceptor_.close(ignored);
}

awaitable<void> metrics_server::accept_loop() {
  while (acceptor_.is_open()) {
    error_code_t ec;
    tcp::socket socket =
        co_await acceptor_.async_accept(net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      if (!acceptor_.is_open())
        co_return;
      continue;
    }
    net::co_spawn(io_, serve(std::move(socket)), log_failure{log_, "a metrics request"});
  }
}

awaitable<void> metrics_server::serve(tcp::socket socket) {
  boost::beast::tcp_stream stream(std::move(socket));
  boost::beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> request;
    stream.expires_after(request_timeout);
    error_code_t ec;
    co_await http::async_read(stream, buffer, request, net::redirect_error(net::use_awaitable, ec));
    if (ec)
      co_return;
    http::response<http::string_body> response;
    response.version(request.version());
    response.keep_alive(request.keep_alive());
    response.set(http::field::server, "redlockd");
    const auto target = request.target();
    if (request.method() != http::verb::get) {
      response.result(http::status::method_not_allowed);
      response.set(http::field::allow, "GET");
      response.set(http::field::content_type, "text/plain; charset=utf-8");
      response.body() = "only GET\n";
    } else if (target == "/metrics") {
      response.result(http::status::ok);
      response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      response.body() = handlers_.metrics();
    } else if (target == "/healthz") {
      const bool healthy = handlers_.healthy();
      response.result(healthy ? http::status::ok : http::status::service_unavailable);
      response.set(http::field::content_type, "text/plain; charset=utf-8");
      response.body() = healthy ? "ok: a quorum of masters is usable\n"
                                : "unavailable: fewer than a quorum of masters is usable\n";
    } else {
      response.result(http::status::not_found);
      response.set(http::field::content_type, "text/plain; charset=utf-8");
      response.body() = "try /metrics or /healthz\n";
    }
    response.prepare_payload();
    co_await http::async_write(stream, response, net::redirect_error(net::use_awaitable, ec));
    if (ec || !response.keep_alive())
      co_return;
  }
}

} // namespace redlockd
