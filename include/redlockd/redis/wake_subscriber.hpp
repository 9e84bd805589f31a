// One subscriber connection per master: SUBSCRIBEs to the master's wake channel and reports each
// lock key a release published there (wake_channel.hpp says what is sent and received). PINGs on
// the health interval; a connection that stops answering (its SUBSCRIBE as well as its PINGs),
// or closes, is opened again with the link's backoff. While it is down, waiters on this daemon
// fall back to their timed retries.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/net/net.hpp"
#include "redlockd/net/stream.hpp"
#include "redlockd/redis/master_connect.hpp"
#include "redlockd/resp/resp.hpp"

#include <chrono>
#include <cstddef>
#include <memory>
#include <random>
#include <string>
#include <string_view>

namespace spdlog {
class logger;
}

namespace redlockd {

// What the subscribers tell the rest of the daemon (the app layer implements it).
class wake_events {
 public:
  virtual ~wake_events() = default;
  // Master `node` published that lock `key` is free (valid during the call).
  virtual void on_released(std::size_t node, std::string_view key) = 0;
  // Master `node`'s wake channel is subscribed (again): what was published before may be lost.
  virtual void on_wake_subscribed(std::size_t node) = 0;
};

class wake_subscriber {
 public:
  wake_subscriber(net::io_context& io, std::size_t index, endpoint address, const config& cfg,
                  wake_events& events, std::shared_ptr<spdlog::logger> log);
  ~wake_subscriber();

  void use_tls(std::shared_ptr<tls_context> context, std::string server_name) {
    to_.tls = std::move(context);
    to_.tls_server_name = std::move(server_name);
  }
  void start();
  void stop();
  bool subscribed() const { return subscribed_; }

 private:
  awaitable<void> run();
  awaitable<void> read_pushes();
  awaitable<void> check_health();
  // False when the connection must be dropped.
  bool handle(const redisReply& reply);
  // Queues bytes for the connection; nothing is dropped while a write is in flight.
  void write(std::string_view bytes);
  void flush();
  void drop(std::string_view why);

  std::size_t index_;
  master_address to_;
  const config& cfg_;
  wake_events& events_;
  std::shared_ptr<spdlog::logger> log_;
  std::string channel_;
  stream stream_;
  net::steady_timer connect_timer_;
  net::steady_timer health_timer_;
  net::steady_timer backoff_timer_;
  reply_reader reader_;
  std::string out_;    // what is being written: the subscription, then PINGs
  std::string queued_; // what is to be written after it
  bool writing_ = false;
  unsigned connection_ = 0; // counts connections: a write of one that ended is not the current's
  bool stopping_ = false;
  bool subscribing_ = false; // the SUBSCRIBE is out, its answer not in yet
  bool subscribed_ = false;
  std::size_t auth_replies_ = 0; // AUTH replies still due before the subscription's
  bool ping_outstanding_ = false;
  std::chrono::steady_clock::time_point last_heard_{};
  unsigned failures_ = 0;
  bool refused_logged_ = false;
  std::minstd_rand jitter_;
};

} // namespace redlockd
