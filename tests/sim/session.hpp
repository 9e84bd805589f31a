// A client's connection to a daemon, as src/server/client_session.cpp keeps it: requests parsed
// by the real protocol parser and dispatched to the engine, replies written in request order, a
// grant written late has its validity refreshed (or becomes an expired line, and a KEEP lock
// gets grant_expired), LOST goes out after the OK it is about, and a close ends the client's
// waiters and KEEP locks (client_gone). Lines reach the client at once: there is no socket.
#pragma once

#include "redlockd/lock/engine_io.hpp"
#include "redlockd/protocol/protocol.hpp"

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlockd::sim {

class sim_daemon;

// The client end of a session.
class client_port {
 public:
  // The reply to the request recorded as `record`, a line with its LF.
  virtual void on_reply(std::uint32_t record, std::string_view line) = 0;
  // The engine answered the request recorded as `record` (written at once or, behind earlier
  // replies, later).
  virtual void on_decided(std::uint32_t record) = 0;
  // A second reply to a request that had one.
  virtual void on_extra_reply(std::uint32_t record) = 0;
  // A LOST line.
  virtual void on_push(std::string_view line) = 0;
  // The daemon died: the connection is gone.
  virtual void on_connection_lost() = 0;
  // A grant written too late to have any validity (its client read NOQUORUM or NOTHELD);
  // `granted_line` is the OK it would have been.
  virtual void on_grant_expired(std::uint32_t record, std::string_view granted_line) = 0;

 protected:
  ~client_port() = default;
};

class sim_session final : public reply_sink, public std::enable_shared_from_this<sim_session> {
 public:
  sim_session(sim_daemon& daemon, client_port& client) : daemon_(daemon), client_(client) {}

  // A request line (without its LF), recorded as `record` by the client.
  void request(std::uint32_t record, std::string_view line, const request_limits& limits);
  // The client closes the connection.
  void close();
  // The daemon died.
  void daemon_died();
  bool open() const { return !closed_; }

  // reply_sink
  void deliver(std::uint64_t seq, std::string line) override;
  void deliver_grant(std::uint64_t seq, grant_reply grant, clock_type::time_point now) override;
  void push(std::string line, std::uint64_t after_seq) override;

 private:
  struct pending_reply {
    std::optional<std::string> line;
    std::optional<grant_reply> grant;
    std::string pushes; // LOST lines that go out right after this reply
    bool ready() const { return line || grant; }
  };
  pending_reply* reply_slot(std::uint64_t seq);
  void write_ready_replies();
  void report_unseen_grants();

  sim_daemon& daemon_;
  client_port& client_;
  std::deque<pending_reply> replies_;
  std::vector<std::uint32_t> records_; // by seq
  std::uint64_t first_seq_ = 0;
  std::uint64_t next_seq_ = 0;
  bool closed_ = false;
  bool used_engine_state_ = false;
};

} // namespace redlockd::sim
