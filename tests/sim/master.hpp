// A simulated Redis master: a key space with expiry on its own clock, the commands redlockd sends
// (EVAL, EVALSHA with NOSCRIPT, SCRIPT LOAD, GET, MGET, INFO, TIME, PING, SUBSCRIBE, PUBLISH),
// parsed from the engine's real RESP bytes and answered in RESP. Its faults are the ones a real
// master has: a crash and a restart (empty, or with its data as AOF would keep it), FLUSHALL,
// a pause (SIGSTOP: commands wait, then run late), slowness, and a clock that drifts and jumps.
#pragma once

#include "redlockd/resp/scripts.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "keyspace.hpp"
#include "lua_engine.hpp"
#include "prng.hpp"
#include "scheduler.hpp"

namespace redlockd::sim {

// What the network gives a master and takes from it.
class master_port {
 public:
  // A message (a pub/sub push) the master sends on one of its connections.
  virtual void push(std::uint64_t connection, std::string bytes) = 0;

 protected:
  ~master_port() = default;
};

// A command a master ran for a connection, for the simulation's bookkeeping (bounded work,
// key-loss evidence): a script with its KEYS and ARGV, or (no `which`, no keys) anything else.
// `reply` is the RESP the master answered.
struct script_run {
  std::size_t master = 0;
  std::uint64_t connection = 0;
  std::optional<script> which; // nullopt: a script that is not one of redlockd's
  std::span<const std::string_view> keys;
  std::span<const std::string_view> args;
  std::string_view reply;
};

class script_observer {
 public:
  virtual void on_script(const script_run& run) = 0;

 protected:
  ~script_observer() = default;
};

// A hold a fault destroyed (FLUSHALL, an empty restart, a forward clock jump that expired it,
// keys lost with the fence counter kept):
// a string key and its value, or a live member of a sorted set (a reader of 'K readers') and
// the set's key.
struct lost_key {
  std::string key;
  std::string value; // the string, or the member
};

class master final : public publisher {
 public:
  master(std::size_t index, scheduler& clock, lua_engine& lua, prng random, master_port& port,
         script_observer& observer);

  std::size_t index() const { return index_; }

  // The master's wall clock in microseconds (what TIME returns and keys expire by).
  std::int64_t now_us() const;
  std::int64_t now_ms() const { return now_us() / 1000; }
  // Drift: the clock runs `ppm` parts per million fast (negative: slow).
  void set_drift(std::int64_t ppm);
  std::int64_t drift_ppm() const { return ppm_; }
  // A jump of the wall clock (NTP step, an operator). Returns the keys a forward jump expired.
  std::vector<lost_key> jump(std::int64_t us);

  // Runs every command in `bytes` (RESP arrays) from `connection` and appends the replies to
  // `reply`. In subscribed mode (after SUBSCRIBE) only PING and SUBSCRIBE are answered.
  void execute(std::uint64_t connection, std::string_view bytes, std::string& reply);
  // The connection closed: it leaves its channels.
  void disconnected(std::uint64_t connection);

  // Faults.
  bool up() const { return up_; }
  std::uint64_t incarnation() const { return incarnation_; } // changes at each restart
  void crash();                                              // down; connections are the network's
  // Up again: a new run_id, uptime from 0, no scripts. `keep_data`: as AOF reloads it (every
  // write); otherwise empty. Returns what an empty restart lost.
  std::vector<lost_key> restart(bool keep_data);
  std::vector<lost_key> flushall();
  // One key deleted while the rest stays (an operator's DEL, a stray client): what key-loss
  // detection is for, now that a FLUSHALL shows as a missing fence register.
  std::vector<lost_key> lose_key(std::string_view key);
  // Live keys with a TTL deleted, each with probability `share`, the rest kept, the fence
  // counter (no TTL) among them: what an eviction sweep under a `volatile-*` policy set after
  // the daemons' handshake, or an operator's DEL by pattern, leaves.
  std::vector<lost_key> lose_keys_with_ttl(prng& random, double share);
  bool paused() const { return paused_; }
  void set_paused(bool paused) { paused_ = paused; }
  // Extra time before each reply leaves (a slow master), in microseconds.
  sim_time reply_delay() const { return reply_delay_; }
  void set_reply_delay(sim_time delay) { reply_delay_ = delay; }

  const keyspace& keys() const { return keys_; }
  keyspace& keys() { return keys_; }
  std::uint64_t commands_run() const { return commands_run_; }

  // publisher (PUBLISH, from a script or a client)
  std::int64_t publish(std::string_view channel, std::string_view message) override;

 private:
  void run(std::uint64_t connection, std::span<const std::string_view> argv, std::string& reply);
  void eval(std::uint64_t connection, std::span<const std::string_view> argv, bool by_sha,
            std::string& reply);
  void info(std::string& reply) const;
  std::vector<lost_key> take_everything();

  std::size_t index_;
  scheduler& clock_;
  lua_engine& lua_;
  prng random_;
  master_port& port_;
  script_observer& observer_;
  keyspace keys_;
  std::vector<bool> loaded_; // by lua_engine script index: SCRIPT LOADed or EVALed since start
  std::vector<std::optional<script>> which_; // by lua_engine script index
  std::string run_id_;
  sim_time started_at_ = 0;
  bool up_ = true;
  bool paused_ = false;
  std::uint64_t incarnation_ = 1;
  sim_time reply_delay_ = 0;
  // The clock: offset at `anchor_` of true time, and a rate.
  std::int64_t clock_at_anchor_us_ = 0;
  sim_time anchor_ = 0;
  std::int64_t ppm_ = 0;
  std::vector<std::pair<std::string, std::uint64_t>> subscribers_; // (channel, connection)
  std::vector<std::uint64_t> subscribed_mode_;                     // connections in that mode
  std::vector<std::string_view> argv_;                             // parse buffer
  std::uint64_t commands_run_ = 0;
  bool observed_ = false; // the command being run was booked as a script
};

// Reads one command (a RESP array of bulk strings, as clients send) from the front of `bytes`
// into `argv`. Returns the bytes it took, or 0 when `bytes` does not start with a whole command.
std::size_t parse_command(std::string_view bytes, std::vector<std::string_view>& argv);

} // namespace redlockd::sim
