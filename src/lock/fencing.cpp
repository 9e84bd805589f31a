#include "redlockd/lock/fencing.hpp"

#include <charconv>

namespace redlockd {

bool parse_counter(const char* text, std::size_t length, std::uint64_t& value) {
  if (length == 0) {
    value = 0;
    return true;
  }
  for (std::size_t i = 0; i < length; ++i)
    if (text[i] < '0' || text[i] > '9')
      return false;
  const auto [end, ec] = std::from_chars(text, text + length, value);
  return ec == std::errc{} && end == text + length;
}

} // namespace redlockd
