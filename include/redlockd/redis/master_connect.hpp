// Opening a connection to a Redis master, shared by the link and the wake-up subscriber: resolve,
// connect and, when configured, the TLS handshake, all within one time limit; and the jittered
// backoff between failed attempts.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/net/net.hpp"
#include "redlockd/net/stream.hpp"

#include <chrono>
#include <random>
#include <string>

namespace redlockd {

class tls_context;

// Where to connect and how.
struct master_address {
  endpoint address;
  std::shared_ptr<tls_context> tls; // null: plaintext
  std::string tls_server_name;      // the name the master's certificate must carry
};

// Connects `s` (closed) to the master; `timer` bounds the whole attempt to `limit`. Returns an
// empty string when the connection is up (TLS established, TCP_NODELAY set), else why not; the
// stream is then closed.
awaitable<std::string> connect_to_master(stream& s, net::steady_timer& timer,
                                         const master_address& to, std::chrono::milliseconds limit);

// The wait before attempt `failures` + 1: exponential from redis_backoff_min_ms, capped at
// redis_backoff_max_ms, jittered into [d/2, d] so that daemons do not reconnect in step.
std::chrono::milliseconds reconnect_backoff(const config& cfg, unsigned failures,
                                            std::minstd_rand& random);

} // namespace redlockd
