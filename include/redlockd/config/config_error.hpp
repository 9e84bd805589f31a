// The error every configuration check throws, and the two text rules those checks share (the
// endpoint parser and the key parser): what counts as a printable token, and how user text is
// quoted into a message.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace redlockd {

// A config problem; what() names the key, e.g. "node_timeout_ms: must be between 1 and 10000".
class config_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Printable ASCII without spaces (hosts, key names, user names).
inline bool printable_token(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x21 && c <= 0x7e; });
}

// Quotes user text for a message: one line, printable, bounded, whatever the input holds.
inline std::string quote_for_message(std::string_view text) {
  constexpr std::size_t max_quoted = 128;
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < max_quoted; ++i)
    out.push_back(text[i] >= 0x20 && text[i] <= 0x7e ? text[i] : '?');
  if (text.size() > max_quoted)
    out.append("...");
  out.push_back('\'');
  return out;
}

} // namespace redlockd
