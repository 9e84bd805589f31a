// The simulated clients: each holds one connection to a daemon at a time and takes locks on
// resources of a small (contended) and a large set: LOCK plain, WAIT and KEEP, EXTEND, UNLOCK,
// several requests pipelined at once, leases left to expire, disconnects and reconnects to any
// daemon (an UNLOCK may then go through another daemon). Of the lock family: shared holds of
// the same resources, permits of a few semaphores (now and then a request with the wrong n,
// while holding a permit), and sets of hot resources named in any order (MLOCK, MEXTEND,
// MUNLOCK, or an UNLOCK of one member first). Every request and reply is recorded with its true
// time (history.hpp).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "daemon.hpp"
#include "history.hpp"
#include "prng.hpp"
#include "scheduler.hpp"
#include "session.hpp"

namespace redlockd::sim {

// What one run's clients do, drawn from the seed (swarm testing: each run its own mix).
struct workload {
  std::uint32_t clients = 8;
  std::uint32_t hot_resources = 2; // the contended set: resources 0 .. hot-1
  std::uint32_t cold_resources = 500;
  double p_hot = 0.7;
  // How often a client goes after a lock whose key a fault just destroyed on some master (the
  // key-loss fault profile): where a second holder would come from if a daemon counted it.
  double p_lost = 0;
  std::uint64_t ttl_min_ms = 200;
  std::uint64_t ttl_max_ms = 5000;
  double p_wait = 0.5;
  std::uint64_t wait_min_ms = 50;
  std::uint64_t wait_max_ms = 3000;
  double p_keep = 0.1;
  double p_extend = 0.15;
  double p_abandon = 0.05; // a lease left to expire, a KEEP lock kept until the client leaves
  double p_pipeline = 0.1; // several LOCKs at once
  double p_disconnect = 0.01;
  double p_elsewhere = 0.2; // an UNLOCK after a reconnect, through whatever daemon it reached
  sim_time think_mean = 5'000;
  double hold_max = 0.8; // of the validity
  // The lock family: the share of each kind among LOCKs (the rest are exclusive).
  double p_shared = 0;
  double p_permit = 0;
  double p_set = 0;
  std::uint32_t set_max = 4;          // members, from 2 (never more than the hot resources)
  std::vector<std::uint32_t> permits; // per semaphore, its n; semaphores follow the cold set
  double p_wrong_permits = 0.05;      // of permit requests while holding one: another n
  double p_unlock_member = 0.2;       // a set released one member first (UNLOCK), then MUNLOCK
};

// What clients need from the run.
class client_world {
 public:
  virtual scheduler& clock() = 0;
  virtual history& records() = 0;
  // A daemon that is up, or nullptr.
  virtual sim_daemon* pick_daemon(prng& random) = 0;
  virtual const request_limits& limits() const = 0;
  virtual bool stopping() const = 0; // the workload is over: only UNLOCKs from now on
  // A LOCK's OK (or an EXTEND's) reached its client: the books learn the lease.
  virtual void granted(std::uint32_t request) = 0;
  virtual void extended(std::uint32_t request) = 0;
  // A grant written too late: its client read NOQUORUM, the masters still hold it.
  virtual void grant_unseen(std::uint32_t request, const owner_id& owner) = 0;
  // Locks (resource indices below hot + cold) whose hold a fault destroyed on some master
  // within the longest TTL: the lost hold may still be valid.
  virtual std::vector<std::uint32_t> recently_lost() const = 0;

 protected:
  ~client_world() = default;
};

class sim_client final : public client_port, public event_target {
 public:
  sim_client(std::uint32_t id, client_world& world, prng random, const workload& w);

  void start(sim_time at);
  void fire(std::uint32_t kind, std::uint64_t arg) override;

  // client_port
  void on_reply(std::uint32_t record, std::string_view line) override;
  void on_decided(std::uint32_t record) override {
    world_.records().requests[record].decided = world_.clock().now();
  }
  void on_extra_reply(std::uint32_t record) override;
  void on_push(std::string_view line) override;
  void on_connection_lost() override;
  void on_grant_expired(std::uint32_t record, std::string_view granted_line) override;

 private:
  struct held {
    std::uint32_t request;    // the granted LOCK
    std::uint32_t connection; // on which connection it was granted
    sim_time release_at;      // when the client means to UNLOCK (or EXTEND) it
    std::uint32_t extends = 0;
    bool abandoned = false; // left to expire (a lease) or kept until the client leaves (KEEP)
    std::uint8_t members_left = 0; // a set: the members (bit k: members[k]) not yet released
  };

  void schedule_act(sim_time after);
  void act();
  bool connect();
  void disconnect();
  void end_keep_locks(sim_time at); // the connection ended: its KEEP locks with it
  // Sends a request; `r` has its kind and arguments, the rest is filled in here.
  std::uint32_t issue(request_record r, const std::string& line);
  void lock_something();
  std::uint32_t pick_resource();
  // The request that releases (or extends) `x` now, and its line.
  std::pair<request_record, std::string> release_or_extend(held& x);
  // The line's names of `members` (set members), in a random order; `r` records them so.
  std::string name_members(request_record& r, std::span<const std::uint32_t> members);

  std::uint32_t id_;
  client_world& world_;
  prng random_;
  const workload& w_;
  std::shared_ptr<sim_session> session_;
  std::uint32_t connection_ = none;
  std::uint32_t daemon_ = 0;
  std::uint32_t instance_ = 0;
  std::deque<std::uint32_t> outstanding_; // requests awaiting their reply, in order
  std::vector<held> holding_;
  std::uint64_t act_generation_ = 0;
};

// Fills in `r` from its reply line, as the client read it at `now`.
void record_reply(request_record& r, std::string_view line, sim_time now);

// A client that sends what it is told (scenarios.hpp), on one connection per client.
class scripted_client final : public client_port {
 public:
  scripted_client(std::uint32_t id, client_world& world) : id_(id), world_(world) {}
  // Sends `r` (its kind and arguments filled in) as `line` through daemon `d`.
  std::uint32_t send(sim_daemon& d, request_record r, const std::string& line);

  void on_reply(std::uint32_t record, std::string_view line) override;
  void on_decided(std::uint32_t record) override {
    world_.records().requests[record].decided = world_.clock().now();
  }
  void on_extra_reply(std::uint32_t record) override;
  void on_push(std::string_view line) override;
  void on_connection_lost() override;
  void on_grant_expired(std::uint32_t record, std::string_view granted_line) override;

 private:
  std::uint32_t id_;
  client_world& world_;
  std::shared_ptr<sim_session> session_;
  std::uint32_t connection_ = none;
};

} // namespace redlockd::sim
