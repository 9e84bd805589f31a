// The client side: accepts connections and runs protocol v1 sessions on them.
#pragma once

#include "redlockd/config/auth.hpp"
#include "redlockd/config/config.hpp"
#include "redlockd/lock/lock_engine.hpp"
#include "redlockd/metrics/metrics.hpp"
#include "redlockd/net/net.hpp"
#include "redlockd/protocol/protocol.hpp"
#include "redlockd/lock/status_query.hpp"

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>

namespace spdlog {
class logger;
}

namespace redlockd {

class client_session;
class tls_context;
class tls_stream;

// What sessions share: the engine, limits, and the text of HELLO and INFO.
struct session_context {
  lock_engine& engine;
  const config& cfg;
  request_limits limits;
  std::string hello_line;
  std::function<std::string()> info_json;
  std::shared_ptr<spdlog::logger> log;
  // Set when the daemon stops: new LOCKs are refused with ERR SHUTTING_DOWN.
  bool shutting_down = false;
  // ERR replies sent to anything but LOCK, UNLOCK and EXTEND (bad requests, refusals), and the
  // replies to those three by outcome, for /metrics.
  std::uint64_t errors = 0;
  result_counters results{};
  // Refused AUTH attempts, for INFO and /metrics; their log lines are rate-limited.
  std::uint64_t auth_failures = 0;
  log_budget auth_failure_log{10};
  // Answers STATUS (set by the daemon; without it STATUS is ERR INTERNAL).
  status_reader* status = nullptr;
};

class client_server {
 public:
  client_server(net::io_context& io, session_context& context);

  // Binds and listens; throws on failure (address in use, ...).
  void listen(const endpoint& address);
  // Every connection accepted from now on speaks TLS (call before start()).
  void use_tls(std::shared_ptr<tls_context> context) { tls_ = std::move(context); }
  void start();
  // Stops accepting new connections.
  void stop_accepting();
  // Every session stops reading and closes once its pending replies are written.
  void drain();
  // Closes every session at once.
  void stop();

  std::size_t clients() const { return sessions_.size(); }
  tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }

 private:
  friend class client_session;
  awaitable<void> accept_loop();

  net::io_context& io_;
  session_context& context_;
  tcp::acceptor acceptor_;
  std::shared_ptr<tls_context> tls_; // null: plaintext
  std::unordered_set<std::shared_ptr<client_session>> sessions_;
  std::uint64_t next_session_id_ = 1;
};

// One client connection. Requests are read in chunks and handled as they come; replies are
// written in request order, everything ready in one loop turn in one write.
class client_session : public reply_sink, public std::enable_shared_from_this<client_session> {
 public:
  // With `tls`, the session runs a server handshake before it reads any request.
  client_session(tcp::socket socket, client_server& server, std::uint64_t id,
                 tls_context* tls = nullptr);
  ~client_session() override;

  void start();
  // `graceful`: every reply is out; over TLS, send close_notify before closing.
  void close(bool graceful = false);
  // Reads no more requests; closes once every pending reply is written.
  void finish_and_close();
  void deliver(std::uint64_t seq, std::string line) override;
  void deliver_grant(std::uint64_t seq, grant_reply grant, clock_type::time_point now) override;
  void push(std::string line, std::uint64_t after_seq) override;

 private:
  awaitable<void> read_requests();
  void handle_line(std::string_view line);
  std::uint64_t reserve_reply() { return next_seq_++; }
  void schedule_flush();
  void write_pending();
  void on_written(const error_code_t& ec);
  void finish_if_done();
  bool backlogged() const;
  void watch_partial_line(bool progressed);
  void handle_auth(std::uint64_t seq, std::string_view candidate);
  void watch_auth_deadline();

  tcp::socket socket_;
  std::unique_ptr<tls_stream> tls_; // over socket_; null on a plaintext listener
  bool tls_ready_ = false;          // the handshake succeeded
  client_server& server_;
  session_context& context_;
  std::uint64_t id_;
  line_splitter lines_;
  std::vector<char> read_buffer_;

  // Replies not yet written, by sequence number from first_seq_.
  struct pending_reply {
    std::optional<std::string> line;
    std::optional<grant_reply> grant; // an OK whose validity is counted when it is written
    std::string pushes;               // LOST lines that must follow this reply
    // LOCK, UNLOCK and EXTEND: the reply is counted by outcome (/metrics) when it is written.
    std::optional<result_op> counted;
    bool ready() const { return line || grant; }
  };
  pending_reply* reply_slot(std::uint64_t seq); // null if already written or closed
  void write_ready_replies();
  std::deque<pending_reply> replies_;
  std::uint64_t first_seq_ = 0;
  std::uint64_t next_seq_ = 0;

  std::string pending_;
  std::string writing_;
  bool write_in_progress_ = false;
  bool flush_posted_ = false;
  bool reading_done_ = false; // QUIT, LINE_TOO_LONG or end of input: close once all is written
  bool closed_ = false;
  bool used_engine_state_ = false; // sent WAIT or KEEP: the engine must hear of the close

  // Back-pressure: while too many replies wait for the client to read them, no more requests
  // are read. The timer is a condition variable: expires never, cancelled to wake the reader.
  net::steady_timer resume_;
  // Slowloris: a partial line may not sit in the buffer longer than partial_line_timeout_ms.
  net::steady_timer partial_timer_;
  bool partial_timer_armed_ = false;
  clock_type::time_point partial_since_{};

  // AUTH: until it succeeds (when a client secret is configured) only PING, HELLO, AUTH and QUIT
  // are served, and the connection is closed after auth_timeout_ms.
  connection_auth auth_;
  net::steady_timer auth_timer_;
  std::string peer_; // "address:port" of the client, for log lines
};

} // namespace redlockd
