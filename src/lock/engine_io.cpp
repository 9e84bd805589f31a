#include "redlockd/lock/engine_io.hpp"

#include "redlockd/protocol/protocol.hpp"

#include <charconv>

namespace redlockd {

bool grant_reply::refresh(clock_type::time_point now, clock_type::time_point until) {
  if (until <= now)
    return false;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
  if (left < 1)
    return false;
  char text[24];
  const auto end = std::to_chars(text, text + sizeof text, static_cast<std::uint64_t>(left)).ptr;
  line.resize(validity_at); // in place: no allocation on the common path
  line.append(text, end).push_back('\n');
  return true;
}

std::string grant_reply::expired_line() const {
  return needed == 0 ? format_notheld() : format_noquorum(0, needed);
}

} // namespace redlockd
