#include "redlockd/ctl/duration.hpp"

#include <charconv>
#include <cstdint>
#include <limits>

namespace redlockd::ctl {

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
    ++digits;
  if (digits == 0)
    return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, value);
  if (ec != std::errc{} || end != text.data() + digits)
    return std::nullopt;
  const std::string_view unit = text.substr(digits);
  std::uint64_t scale = 0;
  if (unit == "ms")
    scale = 1;
  else if (unit == "s")
    scale = 1000;
  else if (unit == "m")
    scale = 60'000;
  else if (unit == "h")
    scale = 3'600'000;
  else
    return std::nullopt; // also a bare number: 30 could mean ms or s, so a unit is required
  if (value > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / scale)
    return std::nullopt;
  return std::chrono::milliseconds(static_cast<std::int64_t>(value * scale));
}

bool lacks_unit(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

} // namespace redlockd::ctl
