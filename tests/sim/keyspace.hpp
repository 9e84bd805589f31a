// A master's data and the Redis commands that act on it, small enough to read in one sitting:
// strings, hashes and sorted sets with expiry on the master's own clock, and one table of
// commands. Scripts (lua_engine.hpp) and the daemon's plain commands (master.hpp) go through the
// same table, so a script edit or a new command is simulated as Redis runs it. To add a command:
// a handler and a row in the table `commands` (keyspace.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace redlockd::sim {

// Where a command's reply goes: RESP bytes for a connection, Lua values for redis.call. An
// array(n) is followed by its n elements.
class reply_writer {
 public:
  virtual void integer(std::int64_t value) = 0;
  virtual void bulk(std::string_view text) = 0;
  virtual void nil() = 0;
  virtual void status(std::string_view text) = 0;
  virtual void error(std::string_view text) = 0; // "ERR ...", "WRONGTYPE ...", "NOSCRIPT ..."
  virtual void array(std::size_t elements) = 0;

 protected:
  ~reply_writer() = default;
};

// RESP2, as Redis writes it.
class resp_writer final : public reply_writer {
 public:
  explicit resp_writer(std::string& out) : out_(out) {}
  void integer(std::int64_t value) override;
  void bulk(std::string_view text) override;
  void nil() override { out_.append("$-1\r\n"); }
  void status(std::string_view text) override;
  void error(std::string_view text) override;
  void array(std::size_t elements) override;

 private:
  std::string& out_;
};

struct text_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const {
    return std::hash<std::string_view>{}(text);
  }
};

// A member of a sorted set and its score.
struct zset_entry {
  double score = 0;
  std::string member;
};

// One key's value.
struct stored {
  enum class type : std::uint8_t { string, hash, zset };
  type kind = type::string;
  // zset: still in Redis 7.0's small encoding (a listpack), which stores a score of -0 as 0.
  bool listpack = true;
  std::string text;                                        // string
  std::vector<std::pair<std::string, std::string>> fields; // hash, in insertion order
  std::vector<zset_entry> members; // zset, by score, then member byte by byte (as Redis orders)
  std::int64_t expires_at = -1;    // master clock, ms; -1: no TTL
};

class keyspace {
 public:
  // The live value of `key` at `now_ms`; an expired key is deleted here (Redis expires lazily,
  // and a key whose time has come is gone for every command).
  stored* find(std::string_view key, std::int64_t now_ms);
  stored& create(std::string_view key); // replaces any value
  // The value stored under `key`, expired or not, without expiring it (the books' view).
  const stored* peek(std::string_view key) const {
    const auto it = map_.find(key);
    return it == map_.end() ? nullptr : &it->second;
  }
  bool erase(std::string_view key) {
    const auto it = map_.find(key);
    if (it == map_.end())
      return false;
    map_.erase(it);
    return true;
  }
  void clear() { map_.clear(); }
  std::size_t size() const { return map_.size(); }
  // Every key and its value, expired or not (what a fault destroys).
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& [key, value] : map_)
      f(key, value);
  }
  // Drops keys expired at `now_ms` when the table has grown (Redis's active expiry, which only
  // bounds memory: every command sees expired keys as gone anyway).
  void sweep(std::int64_t now_ms);

 private:
  std::unordered_map<std::string, stored, text_hash, std::equal_to<>> map_;
  std::size_t sweep_at_ = 4096;
};

// PUBLISH's way out of the key space: the master's subscribers.
class publisher {
 public:
  // Returns how many subscribers received it.
  virtual std::int64_t publish(std::string_view channel, std::string_view message) = 0;

 protected:
  ~publisher() = default;
};

// What a command sees of the master that runs it.
struct command_context {
  keyspace& keys;
  std::int64_t now_ms; // the master's clock, for expiry
  std::int64_t now_us; // the same, for TIME
  publisher& subscribers;
};

using command_handler = void (*)(command_context& ctx, std::span<const std::string_view> argv,
                                 reply_writer& out);

struct command_spec {
  std::string_view name; // lowercase
  int arity;             // as Redis counts it: the name included; negative: at least -arity
  command_handler run;
};

// The commands a master answers through the key space (not EVAL, SCRIPT, INFO, SUBSCRIBE: the
// master handles those itself). nullptr for an unknown name (any case).
const command_spec* find_command(std::string_view name);

// Runs argv (argv[0] the command name) and writes its reply: the arity check, then the handler.
void run_command(command_context& ctx, std::span<const std::string_view> argv, reply_writer& out);

} // namespace redlockd::sim
