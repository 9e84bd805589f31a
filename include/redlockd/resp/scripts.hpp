// The Lua scripts the daemon runs on every master, loaded once per connection and called by SHA.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

namespace redlockd {

enum class script : std::size_t {
  acquire = 0,
  release = 1,
  extend = 2,
  fence_bump = 3,
  seed = 4,
  hand_over = 5,
  acquire_wait = 6,
  // The lock family (src/lua/lib/<kind>.lua holds each kind's rules).
  shared_acquire = 7,
  shared_release = 8,
  shared_extend = 9,
  permit_acquire = 10,
  permit_release = 11,
  permit_extend = 12,
  multi_acquire = 13,
  multi_release = 14,
  multi_extend = 15,
  // Removes this daemon's wait mark when its waiters all left (src/lua/unmark.lua).
  unmark = 16,
  // Operating locks: BREAK's deletion and LIST's bounded SCAN step (src/lua/break.lua, list.lua).
  break_hold = 17,
  list_step = 18,
  // STATUS's read: PTTL and the label (src/lua/status.lua).
  status_read = 19,
  // Wakes the heads that yielded their turn to a granted reader or permit
  // (src/lua/wake_yielded.lua).
  wake_yielded = 20,
};
inline constexpr std::size_t script_count = 21;

// Script source text.
std::string_view script_source(script s);
// Its file's name in src/lua without .lua ("acquire", "hand_over", ...): logs and traces.
std::string_view script_name(script s);
// SHA1 hex of the source, as SCRIPT LOAD / EVALSHA name it.
std::string_view script_sha(script s);
// SHA1 of any text as 40 lowercase hex characters: what Redis names a script by (the
// simulator's masters name the scripts they are sent this way).
std::string sha1_hex(std::string_view text);

} // namespace redlockd
