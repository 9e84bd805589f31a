// The masters' script engine: an embedded Lua 5.1 (Debian's liblua5.1, the Lua Redis embeds),
// with redis.call / redis.pcall bound to the key space (keyspace.hpp), KEYS and ARGV as Redis
// sets them, Redis's conversions of replies to Lua values and back, and its protection of
// globals. One Lua state serves every master of a run: a script is compiled once, when the
// first master loads it, and cached by its SHA-1; which master runs it is the context of the
// call. Which master knows which script (EVALSHA's NOSCRIPT) is the master's own business.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "keyspace.hpp"

struct lua_State;

namespace redlockd::sim {

class lua_engine {
 public:
  lua_engine();
  ~lua_engine();
  lua_engine(const lua_engine&) = delete;
  lua_engine& operator=(const lua_engine&) = delete;

  // Compiles `source` unless its SHA-1 is known. Returns the script's index (for run()) or -1
  // with `error` set (a syntax error, as SCRIPT LOAD reports it).
  int load(std::string_view source, std::string& error);
  // --weaken of a script's rule: every text loaded from now on is compiled with each `from`
  // replaced by `to`, under the SHA-1 of the text as shipped (EVALSHA finds it as before).
  void rewrite(std::string from, std::string to) {
    rewrite_from_ = std::move(from);
    rewrite_to_ = std::move(to);
  }
  // The index of a loaded script by its SHA-1 (40 lowercase hex characters), or -1.
  int find(std::string_view sha) const;
  const std::string& sha(int script) const { return shas_[static_cast<std::size_t>(script)]; }
  std::size_t scripts() const { return shas_.size(); }

  // Runs `script` with KEYS and ARGV on the key space of `ctx`; its reply (or the error that
  // ended it) goes to `out`.
  void run(int script, std::span<const std::string_view> keys,
           std::span<const std::string_view> args, command_context& ctx, reply_writer& out);

 private:
  static void* allocate(void* self, void* block, std::size_t old_size, std::size_t new_size);
  static int redis_call(lua_State* L);
  static int redis_pcall(lua_State* L);
  static int call_command(lua_State* L, bool raise);
  void set_array(int table_ref, std::span<const std::string_view> values, int& previous_size);

  static constexpr std::size_t small_block = 256;
  struct free_block {
    free_block* next;
  };
  // Declared before L_: the state is closed (giving its blocks back) before the lists go.
  std::array<free_block*, small_block / 16 + 1> free_blocks_{};
  lua_State* L_ = nullptr;
  std::unordered_map<std::string, int, text_hash, std::equal_to<>> by_sha_;
  std::unordered_map<std::string, int, text_hash, std::equal_to<>> by_text_; // by source
  std::vector<std::string> shas_;
  std::string rewrite_from_, rewrite_to_;
  std::vector<int> functions_; // registry references of the compiled chunks, by index
  int keys_ref_ = 0;
  int argv_ref_ = 0;
  int keys_size_ = 0;
  int argv_size_ = 0;
  command_context* current_ = nullptr; // the call being run: what redis.call acts on
  int calls_since_collect_ = 0;
};

} // namespace redlockd::sim
