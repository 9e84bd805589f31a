// One client connection speaking protocol v1: reads request lines, dispatches them to the
// engine, writes the replies in request order, and enforces AUTH and the per-connection limits.
#pragma once

#include "redlockd/config/auth.hpp"
#include "redlockd/config/config.hpp"
#include "redlockd/lock/lock_engine.hpp"
#include "redlockd/lock/status_query.hpp"
#include "redlockd/metrics/metrics.hpp"
#include "redlockd/net/batch_writer.hpp"
#include "redlockd/net/net.hpp"
#include "redlockd/net/read_buffer.hpp"
#include "redlockd/net/stream.hpp"
#include "redlockd/protocol/protocol.hpp"

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace spdlog {
class logger;
}

namespace redlockd {

class listener;
class tls_context;

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

// One client connection. Requests are read in chunks and handled as they come; replies are
// written in request order, everything ready in one loop turn in one write.
class client_session : public reply_sink,
                       private batch_writer::owner,
                       public std::enable_shared_from_this<client_session> {
 public:
  // `peer` names the client in log lines ("address:port", or the Unix socket's path). With
  // `tls`, the session runs a server handshake before it reads any request.
  client_session(stream_socket socket, std::string peer, listener& server, session_context& context,
                 std::uint64_t id, tls_context* tls = nullptr);
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
  awaitable<bool> accept_tls();
  awaitable<void> wait_while_backlogged();
  void handle_line(std::string_view line);
  void dispatch(std::uint64_t seq, const request& req);
  std::uint64_t reserve_reply() { return next_seq_++; }
  bool on_written(const error_code_t& ec) override;
  void on_drained() override { finish_if_done(); }
  void finish_if_done();
  bool backlogged() const;
  void watch_partial_line(bool progressed);
  void handle_auth(std::uint64_t seq, std::string_view candidate);
  void watch_auth_deadline();

  stream stream_;
  bool tls_ready_ = false; // the TLS handshake succeeded
  listener& server_;
  session_context& context_;
  std::uint64_t id_;
  line_splitter lines_;
  read_buffer read_buffer_; // small while idle, grown for a burst

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

  batch_writer writer_;
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
  std::string peer_; // who the client is, for log lines
};

} // namespace redlockd
