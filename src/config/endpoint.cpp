// Parsing and printing of "host:port" / "[v6]:port" endpoints; see endpoint.hpp.
#include "redlockd/config/endpoint.hpp"

#include <algorithm>
#include <charconv>

namespace redlockd {

std::string endpoint::to_string() const {
  if (host.find(':') != std::string::npos)
    return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

endpoint parse_endpoint(std::string_view text) {
  const std::string quoted = quote_for_message(text);
  std::string_view host;
  std::string_view port;
  if (text.starts_with('[')) {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':')
      throw config_error("expected [address]:port, got " + quoted);
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos)
      throw config_error("expected host:port, got " + quoted);
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos)
      throw config_error("IPv6 addresses are written [address]:port, got " + quoted);
  }
  // Brackets only frame an IPv6 literal: a host holding one would not print back as it parsed.
  if (host.empty() || !printable_token(host) || host.find_first_of("[]") != std::string_view::npos)
    throw config_error("bad host in " + quoted);
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value == 0 ||
      value > 65535 ||
      !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw config_error("bad port in " + quoted);
  return endpoint{std::string(host), static_cast<std::uint16_t>(value)};
}

} // namespace redlockd
