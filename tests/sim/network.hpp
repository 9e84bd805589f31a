// The network between daemons and masters: TCP connections as two ordered byte streams with
// latency, partitions that hold traffic (TCP retransmits; nothing is reordered) or blackhole it
// (a dead proxy: what is sent is lost and the connection with it), and the ways a
// connection ends: closed by one side (what it sent first still arrives), a master that dies
// (what was sent to it is gone), a reset or a crashed daemon (only a prefix of what was in
// flight arrives). It also runs each master's input: a paused master queues its commands and
// runs them, late, when it resumes. Client connections are not here: clients talk to their
// daemon in process, with no latency (sessions and sockets are the integration tests' job).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "master.hpp"
#include "prng.hpp"
#include "scheduler.hpp"

namespace redlockd::sim {

enum class channel_kind : std::uint8_t { link, subscriber };

struct connection_info {
  std::uint64_t id = 0;
  std::size_t daemon = 0;
  std::size_t master = 0;
  channel_kind kind = channel_kind::link;
  std::uint64_t token = 0; // chosen by the daemon when it connected: which link of which run
};

// The daemon's end of its connections.
class daemon_port {
 public:
  virtual void on_connected(const connection_info& c) = 0;
  virtual void on_connect_failed(std::size_t master, channel_kind kind, std::uint64_t token) = 0;
  virtual void on_bytes(const connection_info& c, std::string_view bytes) = 0;
  virtual void on_closed(const connection_info& c) = 0;

 protected:
  ~daemon_port() = default;
};

// The one-way delay of a daemon's traffic with one master.
struct latency_profile {
  sim_time base_us = 200;  // one way
  sim_time jitter_us = 50; // mean of an exponential added to each message
};

class network final : public event_target, public master_port {
 public:
  network(scheduler& clock, prng random, std::size_t daemons, sim_time connect_timeout);
  // The masters, once (they push pub/sub messages through this network).
  void set_masters(std::vector<master*> masters);

  void attach(std::size_t daemon, daemon_port& port) { daemons_[daemon] = &port; }
  void set_latency(std::size_t daemon, std::size_t master, latency_profile profile) {
    latency_[daemon * masters_.size() + master] = profile;
  }

  // A daemon opens a connection; on_connected or on_connect_failed follows.
  void connect(std::size_t daemon, std::size_t master, channel_kind kind, std::uint64_t token);
  // A daemon sends on an open connection.
  void send(std::uint64_t connection, std::string bytes);
  // The daemon closes it: what it sent still reaches the master, nothing reaches the daemon.
  void close_by_daemon(std::uint64_t connection);
  // A daemon dies: each of its connections delivers a random prefix of what was in flight.
  void daemon_crashed(std::size_t daemon);
  // A connection is reset (a middlebox, a flaky NIC): a random prefix of what was in flight
  // toward the master arrives; the daemon learns of the reset at once.
  void reset(std::uint64_t connection);
  // The master dies: its connections end; the daemons read what it had already sent, then EOF.
  void master_crashed(std::size_t master);
  // A paused master resumes: what it queued runs now, in order.
  void master_resumed(std::size_t master);

  // Traffic between a daemon and a master is held (both ways, both kinds of connection) until
  // healed; connects fail after the connect timeout. `blackhole`: what is in flight or sent
  // meanwhile is lost instead, and the connections it was on are reset when the path heals.
  void set_partitioned(std::size_t daemon, std::size_t master, bool partitioned,
                       bool blackhole = false);
  bool partitioned(std::size_t daemon, std::size_t master) const {
    return blocked_[daemon * masters_.size() + master];
  }

  // The open connection of a daemon's link or subscriber to a master, 0 if none.
  std::uint64_t connection_of(std::size_t daemon, std::size_t master, channel_kind kind) const;

  // master_port (pub/sub pushes)
  void push(std::uint64_t connection, std::string bytes) override;
  void fire(std::uint32_t kind, std::uint64_t arg) override;

 private:
  struct message {
    sim_time at;
    std::string bytes;
    bool close = false; // the sender closed after what came before
  };
  struct stream {
    std::deque<message> queue;
    bool scheduled = false; // an event is out for the head
  };
  struct connection {
    connection_info info;
    std::uint64_t incarnation = 0; // the master's when it connected
    bool daemon_open = true;
    bool master_open = true;
    bool broken = false; // a blackhole swallowed some of it
    stream to_master;
    stream to_daemon;
  };
  struct pending_connect {
    std::size_t daemon;
    std::size_t master;
    channel_kind kind;
    std::uint64_t token;
  };
  enum event_kind : std::uint32_t { to_master_event, to_daemon_event, connect_event };

  connection* find(std::uint64_t id) {
    return id == 0 || id >= connections_.size() ? nullptr : &connections_[id];
  }
  sim_time delay(const connection& c, bool to_daemon);
  void enqueue(connection& c, bool to_daemon, message m);
  void schedule(connection& c, bool to_daemon);
  void deliver_to_master(connection& c);
  void deliver_to_daemon(connection& c);
  void run_on_master(connection& c, std::string_view bytes);
  // Keeps a random prefix of the stream toward the master.
  void truncate_randomly(stream& s);

  scheduler& clock_;
  prng random_;
  std::vector<master*> masters_;
  std::vector<daemon_port*> daemons_;
  sim_time connect_timeout_;
  std::vector<latency_profile> latency_;
  std::vector<bool> blocked_;
  std::vector<bool> blackholed_;
  std::deque<connection> connections_; // by id; id 0 is never used; references stay valid
  std::vector<pending_connect> connects_;
  struct queued {
    std::uint64_t connection;
    std::string bytes;
    bool close;
  };
  std::vector<std::deque<queued>> backlog_; // per master, while it is paused
  std::string reply_;
};

} // namespace redlockd::sim
