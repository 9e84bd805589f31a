// A network address as the configuration writes it ("host:port", "[v6]:port"): the value type,
// its parser and its printer. No I/O, no name resolution.
#pragma once

#include "redlockd/config/config_error.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace redlockd {

// A "host:port" pair; IPv6 literals are written "[::1]:7400".
struct endpoint {
  std::string host;
  std::uint16_t port = 0;

  std::string to_string() const; // "host:port", brackets for IPv6 literals
  friend bool operator==(const endpoint&, const endpoint&) = default;
};

// Parses "host:port" or "[v6]:port". Throws config_error (message without key name).
endpoint parse_endpoint(std::string_view text);

} // namespace redlockd
