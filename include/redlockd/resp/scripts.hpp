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
  acquire_wait = 6
};
inline constexpr std::size_t script_count = 7;

// Script source text.
std::string_view script_source(script s);
// SHA1 hex of the source, as SCRIPT LOAD / EVALSHA name it.
std::string_view script_sha(script s);
// SHA1 of any text as 40 lowercase hex characters: what Redis names a script by (the
// simulator's masters name the scripts they are sent this way).
std::string sha1_hex(std::string_view text);

} // namespace redlockd
