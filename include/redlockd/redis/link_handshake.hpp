// What a Redis link says to a master when it connects, and what the master's answers mean: the
// requests of the handshake (AUTH, SCRIPT LOAD, the fence registers, INFO) composed as bytes, and
// each reply decoded into an event the link acts on. Pure: no I/O, no logging, no engine.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/resp/pipeline.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct redisReply;

namespace redlockd {

// One request for the link to send: what its reply will be matched with, and its RESP bytes.
struct link_request {
  request_tag tag;
  std::string command;
};

// What a master told about itself on connect: its fence registers and its identity.
struct master_facts {
  std::optional<std::uint64_t> fence; // its fencing counter; nullopt: the key is missing
  std::uint64_t max_ttl_ms = 0;       // its record of the longest TTL granted on the fleet
  std::string run_id;
  std::uint64_t uptime_ms = 0;
};

// How a master keeps its data (INFO memory persistence).
struct master_storage {
  std::string maxmemory_policy;
  bool aof_enabled = false;
  // Anything but noeviction may evict lock keys under memory pressure.
  bool evicts_keys() const { return maxmemory_policy != "noeviction"; }
};

// What one reply to a handshake (or script reload) request means.
struct handshake_event {
  enum class kind : std::uint8_t {
    accepted,         // a script loaded or a register read: nothing to tell yet
    auth_accepted,    // AUTH succeeded
    auth_refused,     // `detail`: the master's text, the password scrubbed; drop the connection
    script_refused,   // SCRIPT LOAD failed or named another SHA; `detail`: the reply; drop
    fence_unreadable, // a fence register is not a counter; `detail`: the reply; drop
    identified,       // INFO server answered: `facts` is complete
    storage,          // INFO memory persistence answered: `storage`
    scripts_reloaded, // the last script of a reload (after NOSCRIPT) is loaded again
  };
  kind what = kind::accepted;
  std::string detail;
  master_facts facts;
  master_storage storage;
  // That was the last handshake reply: the master takes requests now.
  bool complete = false;
};

// A TIME reply: the master's clock.
struct master_time {
  std::uint64_t seconds = 0;
  std::uint64_t micros = 0;
};

class link_handshake {
 public:
  // Reads the credentials and the fence key from `cfg` at each begin() (SIGHUP may change them).
  explicit link_handshake(const config& cfg) : cfg_(cfg) {}

  // A connection is up: what to send, in order: AUTH (when a password is set; first, so that
  // everything after it runs as that user), SCRIPT LOAD of each script, GET of the fence key and
  // of its ":max_ttl" register, INFO server, INFO memory persistence. Starts counting replies.
  std::vector<link_request> begin();
  // SCRIPT LOAD of every script again (the master answered NOSCRIPT), tagged reload_script.
  static std::vector<link_request> script_reloads();
  // Whether replies of `kind` are decoded here.
  static bool handles(request_kind kind);
  // What the reply to a request of a kind handles() accepts means.
  handshake_event decode(const request_tag& tag, const redisReply& reply);
  // Replies of begin()'s requests still to come.
  std::size_t replies_left() const { return left_; }

 private:
  handshake_event counted(handshake_event event);

  const config& cfg_;
  std::string password_; // the one sent, scrubbed from a refusal
  std::size_t left_ = 0;
  master_facts facts_; // gathered until INFO server answers
};

// The master's clock from a TIME reply; nullopt when it is not two counters.
std::optional<master_time> decode_time(const redisReply& reply);

// The value of `name` in an INFO reply ("name:value" lines), or "".
std::string_view info_field(std::string_view info, std::string_view name);

} // namespace redlockd
