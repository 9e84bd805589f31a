// One long-lived connection to one Redis master: connects, loads the scripts, pipelines every
// command queued in a loop turn into one write, matches replies in order, checks health, and
// reconnects with capped, jittered backoff. What it learns goes to a link_events sink.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/net/batch_writer.hpp"
#include "redlockd/net/net.hpp"
#include "redlockd/net/stream.hpp"
#include "redlockd/redis/link_events.hpp"
#include "redlockd/redis/link_handshake.hpp"
#include "redlockd/redis/master_connect.hpp"
#include "redlockd/resp/pipeline.hpp"
#include "redlockd/resp/resp.hpp"

#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace spdlog {
class logger;
}

namespace redlockd {

class tls_context;

class redis_link : private batch_writer::owner {
 public:
  enum class state : std::uint8_t { connecting, handshaking, ok, down };

  // Node `index` of the fleet; everything it learns goes to `events`.
  redis_link(net::io_context& io, std::size_t index, endpoint address, const config& cfg,
             link_events& events, std::shared_ptr<spdlog::logger> log);
  ~redis_link();

  // Every connection runs a TLS handshake and verifies the master's certificate against
  // `server_name` (call before start()).
  void use_tls(std::shared_ptr<tls_context> context, std::string server_name) {
    to_.tls = std::move(context);
    to_.tls_server_name = std::move(server_name);
  }
  void start();
  void stop();

  // Connected, scripts loaded, and (with refuse_unsafe_nodes) not evicting keys.
  bool usable() const { return state_ == state::ok && !(unsafe_ && cfg_.refuse_unsafe_nodes); }
  // Its maxmemory-policy could evict lock keys.
  bool unsafe() const { return unsafe_; }
  state current_state() const { return state_; }
  const endpoint& address() const { return to_.address; }
  std::int64_t rtt_us() const { return rtt_us_; }
  // The master refused the last AUTH (wrong redis_username or password).
  bool auth_refused() const { return auth_refused_; }
  // Nothing queued or waiting for a reply (or the node is down).
  bool idle() const { return !usable() || (pipeline_.empty() && writer_.queued_bytes() == 0); }

  // Queues a command; everything queued before the loop turn ends goes out in one write.
  void send(const request_tag& tag, std::string_view command);
  // Loads the scripts again (the node answered NOSCRIPT).
  void reload_scripts();

 private:
  awaitable<void> run();
  awaitable<void> read_replies();
  awaitable<void> check_health();
  void handle_reply(const request_tag& tag, const redisReply& reply);
  void on_handshake_event(const handshake_event& event);
  void on_time_reply(const redisReply& reply);
  void mark_up();
  void send_time_probe(); // TIME, unless one is outstanding: a health check and a clock sample
  bool on_written(const error_code_t& ec) override;
  void drop_connection(std::string_view why);

  net::io_context& io_;
  std::size_t index_;
  master_address to_;
  const config& cfg_;
  std::shared_ptr<spdlog::logger> log_;
  link_events& events_;

  stream stream_; // a fresh TLS layer for each connection when to_.tls is set
  net::steady_timer connect_timer_;
  net::steady_timer health_timer_;
  net::steady_timer backoff_timer_;
  state state_ = state::connecting;
  bool stopping_ = false;

  pipeline pipeline_;
  reply_reader reader_;
  std::vector<char> read_buffer_;
  // Discarded when a connection ends: a write still in flight then completes unseen.
  batch_writer writer_;

  link_handshake handshake_;
  bool reload_in_progress_ = false;
  bool ping_outstanding_ = false;
  clock_type::time_point ping_sent_{};
  clock_type::time_point last_progress_{};
  std::int64_t rtt_us_ = -1;
  bool unsafe_ = false;
  bool auth_refused_ = false; // the last AUTH was refused: log the next refusal at debug only

  unsigned failures_ = 0; // consecutive failed connection attempts
  std::minstd_rand jitter_;
};

} // namespace redlockd
