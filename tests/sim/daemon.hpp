// A simulated redlockd: the real lock_engine with its own clock (an offset and a drift), driven
// the way src/app/fleet.cpp drives it. Each master gets a link modelled on redis_link (the real
// link_handshake over the real RESP bytes, EVALSHA replies read back with the project's
// reply_reader and decoded once with decode_script_reply, the TIME probe, stall detection,
// reconnect backoff) and a wake subscriber modelled on wake_subscriber (the real
// subscribe_request and decode_wake_reply). A crash loses everything in flight; the next start
// is a new engine with a new daemon id.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/lock/lock_engine.hpp"
#include "redlockd/redis/link_handshake.hpp"
#include "redlockd/resp/pipeline.hpp"
#include "redlockd/resp/resp.hpp"

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "history.hpp"
#include "network.hpp"
#include "prng.hpp"
#include "scheduler.hpp"
#include "session.hpp"

namespace redlockd::sim {

class sim_daemon;

// What a master's script did, as the simulation books it, handed along with its reply.
struct script_meta {
  std::optional<script> which;
  std::uint32_t resource = sim::none; // the first of KEYS that is a resource's, if one is
  owner_id owner{};          // ARGV[1]: the new owner (acquire, hand_over) or the named one
  owner_id releasing{};      // hand_over: ARGV[8]
  std::int64_t slot = -1;    // permit_acquire: the slot it took
  std::int64_t result = 0;   // the first integer of the reply (release: the reply)
  std::int64_t released = 0; // hand_over: the releasing owner's result
  std::uint64_t ttl_ms = 0;  // ARGV[2] of acquire, hand_over, extend
  bool error = false;
};

// The simulation's books, told what a daemon's links see (see simulation.cpp).
class daemon_books {
 public:
  virtual std::uint32_t new_instance(std::size_t daemon) = 0;
  // The bookkeeping of the command whose reply is about to be read on `connection` (one per
  // command, in order; nullptr if there is none). Valid until the next call.
  virtual const script_meta* take_meta(std::uint64_t connection) = 0;
  // That reply, on `connection`, is handed to the engine next; `sent_at` is when its request
  // was sent (true time).
  virtual void script_answered(const sim_daemon& d, std::size_t master, std::uint64_t connection,
                               const request_tag& tag, const script_meta& meta,
                               sim_time sent_at) = 0;
  // The answer to the link's TIME probe on `connection` is handed to the engine next.
  virtual void clock_sample(const sim_daemon& d, std::size_t master, std::uint64_t connection) = 0;
  // A link's handshake told the engine what the master holds; `high_water` is the engine's
  // fence high-water mark before.
  virtual void master_identified(const sim_daemon& d, std::size_t master, const master_facts& facts,
                                 std::uint64_t high_water) = 0;
  virtual void connection_closed(std::uint64_t connection) = 0;
  // The engine sent a request of one of its operations' rounds (a new generation makes the
  // replies of the operation's earlier rounds stale).
  virtual void round_sent(const sim_daemon& d, const request_tag& tag) = 0;

 protected:
  ~daemon_books() = default;
};

class sim_daemon final : public node_io, public daemon_port, public event_target {
 public:
  sim_daemon(std::size_t index, const config& cfg, scheduler& clock, network& net, prng random,
             daemon_books& books, std::shared_ptr<spdlog::logger> log, std::int64_t drift_ppm);
  ~sim_daemon() override;

  std::size_t index() const { return index_; }
  // Starts a new run of the daemon: a fresh engine; links and subscribers connect.
  void start();
  // The process dies: the engine and everything in flight are gone, clients see their
  // connections end.
  void crash();
  bool alive() const { return engine_ != nullptr; }
  std::uint32_t instance() const { return instance_; }
  lock_engine& engine() { return *engine_; }
  const lock_engine& engine() const { return *engine_; }

  // The daemon's steady clock, and the true time at which it reads `when`.
  clock_type::time_point now() const { return clock_at(clock_.now()); }
  sim_time true_time_of(clock_type::time_point when) const;

  std::shared_ptr<sim_session> open_session(client_port& client, std::uint32_t connection);
  // Every master usable and voting, every wake channel subscribed.
  bool healthy() const;
  std::uint64_t link_connection(std::size_t master) const { return links_[master]->conn; }
  std::uint64_t subscriber_connection(std::size_t master) const {
    return subscribers_[master]->conn;
  }

  // node_io
  bool usable(std::size_t node) const override;
  void send(std::size_t node, const request_tag& tag, std::string_view command) override;
  void reload_scripts(std::size_t node) override;
  void arm_timer(clock_type::time_point when) override;

  // daemon_port
  void on_connected(const connection_info& c) override;
  void on_connect_failed(std::size_t master, channel_kind kind, std::uint64_t token) override;
  void on_bytes(const connection_info& c, std::string_view bytes) override;
  void on_closed(const connection_info& c) override;

  void fire(std::uint32_t kind, std::uint64_t arg) override;

 private:
  struct link_state {
    enum class state : std::uint8_t { down, connecting, handshaking, ok };
    explicit link_state(const config& cfg) : handshake(cfg) {}
    state st = state::down;
    std::uint64_t conn = 0;
    std::uint64_t token = 0;
    pipeline pipe;
    std::deque<sim_time> sent_at; // beside pipe: when each request was sent
    reply_reader reader;
    link_handshake handshake;
    std::string unsent; // sent while no connection was up: written first on the next one
    unsigned failures = 0;
    clock_type::time_point last_progress{};
    clock_type::time_point ping_sent{};
    bool ping_outstanding = false;
    bool reload_in_progress = false;
    bool unsafe = false;
  };
  struct subscriber_state {
    std::uint64_t conn = 0;
    std::uint64_t token = 0;
    reply_reader reader;
    bool subscribed = false;
    bool ping_outstanding = false;
    std::size_t auth_replies = 0;
    unsigned failures = 0;
    clock_type::time_point last_heard{};
  };
  enum event_type : std::uint32_t {
    engine_timer = 1,
    link_retry,
    link_health,
    subscriber_retry,
    subscriber_health,
  };
  static std::uint32_t event(event_type type, std::size_t master) {
    return static_cast<std::uint32_t>(type) << 8 | static_cast<std::uint32_t>(master);
  }

  clock_type::time_point clock_at(sim_time t) const;
  // Schedules the next connection attempt after the backoff for `failures`; its token.
  std::uint64_t retry_later(unsigned failures, event_type retry, std::size_t master);

  // The link (redis_link's loop, event by event).
  void connect_link(std::size_t master);
  void link_lost(std::size_t master); // the connection ended: fail what is out
  void drop_link(std::size_t master); // the daemon closes it, then link_lost
  void link_bytes(std::size_t master, std::string_view bytes);
  void handle_reply(std::size_t master, const request_tag& tag, const redisReply& reply,
                    sim_time sent_at);
  void handshake_event(std::size_t master, const redlockd::handshake_event& event);
  void link_send(std::size_t master, const request_tag& tag, std::string_view command);
  void check_link(std::size_t master);
  void send_time_probe(std::size_t master); // TIME, unless one is outstanding

  // The wake subscriber.
  void connect_subscriber(std::size_t master);
  void subscriber_lost(std::size_t master);
  void subscriber_bytes(std::size_t master, std::string_view bytes);
  void check_subscriber(std::size_t master);

  std::size_t index_;
  const config& cfg_;
  scheduler& clock_;
  network& net_;
  prng random_;
  daemon_books& books_;
  std::shared_ptr<spdlog::logger> log_;
  std::int64_t drift_ppm_;
  std::int64_t offset_ns_;
  std::uint32_t instance_ = 0;
  std::unique_ptr<lock_engine> engine_;
  std::vector<std::unique_ptr<link_state>> links_;
  std::vector<std::unique_ptr<subscriber_state>> subscribers_;
  std::vector<std::shared_ptr<sim_session>> sessions_;
  std::uint64_t timer_generation_ = 0;
  std::uint64_t next_token_ = 0;
};

} // namespace redlockd::sim
