#include "redlockd/redis/master_connect.hpp"

#include "redlockd/net/tls.hpp"

#include <algorithm>

namespace redlockd {

awaitable<std::string> connect_to_master(stream& s, net::steady_timer& timer,
                                         const master_address& to,
                                         std::chrono::milliseconds limit) {
  tcp::resolver resolver(s.get_executor());
  error_code_t ec;
  auto endpoints = co_await resolver.async_resolve(to.address.host, std::to_string(to.address.port),
                                                   net::redirect_error(net::use_awaitable, ec));
  if (ec)
    co_return ec.message();
  // A master that accepts nothing must not hold us past the limit.
  timer.expires_after(limit);
  timer.async_wait([&s](const error_code_t& timer_ec) {
    if (!timer_ec)
      s.close();
  });
  std::string why;
  ec = net::error::host_not_found; // stays so only if the resolver found nothing
  // One resolved address after the other. (Not Asio's range connect: the stream's socket is a
  // generic one, which the resolver's entries do not convert to.)
  for (const auto& entry : endpoints) {
    co_await s.socket().async_connect(entry.endpoint(),
                                      net::redirect_error(net::use_awaitable, ec));
    if (!ec || !s.is_open()) // connected, or the timer closed the socket
      break;
    s.close(); // the next address may be of another family
  }
  if (!ec && to.tls) {
    // The limit bounds the handshake too. TLS state is per connection: a fresh one.
    tls_stream& tls = s.start_tls(*to.tls);
    co_await tls.connect(to.tls_server_name, ec);
    if (ec)
      why = s.is_open() ? "TLS handshake failed: " + tls.describe(ec) : "TLS handshake timed out";
  }
  timer.cancel();
  if (!ec && !s.is_open())
    ec = net::error::timed_out;
  if (ec) {
    s.close();
    co_return why.empty() ? ec.message() : why;
  }
  s.socket().set_option(tcp::no_delay(true), ec);
  co_return std::string();
}

std::chrono::milliseconds reconnect_backoff(const config& cfg, unsigned failures,
                                            std::minstd_rand& random) {
  // 2^20 takes the smallest redis_backoff_min_ms past the largest redis_backoff_max_ms.
  const unsigned shift = std::min(failures, 20u);
  const auto ceiling = std::min<std::chrono::milliseconds>(
      std::chrono::milliseconds(cfg.redis_backoff_min_ms) * (1u << shift),
      std::chrono::milliseconds(cfg.redis_backoff_max_ms));
  std::uniform_int_distribution<long> pick(ceiling.count() / 2, ceiling.count());
  return std::chrono::milliseconds(pick(random));
}

} // namespace redlockd
