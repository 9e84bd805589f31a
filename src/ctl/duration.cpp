#include "redlockd/ctl/duration.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>

namespace redlockd::ctl {
namespace {

struct unit {
  std::string_view name;
  std::int64_t ms;
};
// Largest first: the order the parts of a duration must come in.
constexpr std::array<unit, 4> units = {{{"h", 3'600'000}, {"m", 60'000}, {"s", 1000}, {"ms", 1}}};

constexpr std::int64_t max_ms = std::numeric_limits<std::int64_t>::max();

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Reads digits[.digits] from the front of `text`; false when there is no digit at all.
bool take_number(std::string_view& text, std::string_view& whole, std::string_view& fraction) {
  std::size_t i = 0;
  while (i < text.size() && is_digit(text[i]))
    ++i;
  whole = text.substr(0, i);
  fraction = {};
  if (i < text.size() && text[i] == '.') {
    const std::size_t start = ++i;
    while (i < text.size() && is_digit(text[i]))
      ++i;
    fraction = text.substr(start, i - start);
  }
  if (whole.empty() && fraction.empty())
    return false;
  text.remove_prefix(i);
  return true;
}

// whole.fraction × scale in ms; std::nullopt on overflow or a part of a millisecond left over.
std::optional<std::int64_t> scaled(std::string_view whole, std::string_view fraction,
                                   std::int64_t scale) {
  std::uint64_t value = 0;
  if (!whole.empty()) {
    const auto [end, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), value);
    if (ec != std::errc{} || value > static_cast<std::uint64_t>(max_ms / scale))
      return std::nullopt;
  }
  std::int64_t ms = static_cast<std::int64_t>(value) * scale;
  // At most 9 fraction digits: enough for a millisecond of an hour, and no overflow below.
  if (fraction.size() > 9)
    return std::nullopt;
  std::int64_t numerator = 0;
  std::int64_t denominator = 1;
  for (char digit : fraction) {
    numerator = numerator * 10 + (digit - '0');
    denominator *= 10;
  }
  // numerator < 10^9 and scale <= 3.6e6: the product fits in 63 bits.
  if ((numerator * scale) % denominator != 0)
    return std::nullopt; // finer than a millisecond
  const std::int64_t part = numerator * scale / denominator;
  if (ms > max_ms - part)
    return std::nullopt;
  return ms + part;
}

} // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  std::int64_t total = 0;
  std::size_t next_unit = 0; // the parts must come largest unit first
  bool any = false;
  while (!text.empty()) {
    std::string_view whole, fraction;
    if (!take_number(text, whole, fraction))
      return std::nullopt;
    std::size_t matched = units.size();
    for (std::size_t i = 0; i < units.size(); ++i) {
      const auto name = units[i].name;
      const bool fits = text.starts_with(name) &&
                        (name != "m" || !text.starts_with("ms")); // "ms" is not "m" then "s"
      if (fits) {
        matched = i;
        break;
      }
    }
    if (matched == units.size() || matched < next_unit)
      return std::nullopt; // no unit, an unknown one, or out of order / repeated
    text.remove_prefix(units[matched].name.size());
    next_unit = matched + 1;
    const auto part = scaled(whole, fraction, units[matched].ms);
    if (!part || total > max_ms - *part)
      return std::nullopt;
    total += *part;
    any = true;
  }
  if (!any)
    return std::nullopt;
  return std::chrono::milliseconds(total);
}

bool lacks_unit(std::string_view text) {
  std::string_view whole, fraction;
  return take_number(text, whole, fraction) && text.empty();
}

} // namespace redlockd::ctl
