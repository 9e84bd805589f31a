// Fuzzes the configuration parser: any bytes either give a config that passes validate() or
// throw config_error with a one-line message; no other exception may escape. parse_endpoint is
// fuzzed on the same bytes: what it accepts must print back to text it parses the same way.
#include "redlockd/config/config.hpp"

#include <string>

#include "fuzz_input.hpp"

namespace {

using namespace redlockd;
using redlockd::fuzz::require;

void check_message(const config_error& e) {
  const std::string_view what = e.what();
  require(!what.empty(), "an empty config_error message");
  require(what.find('\n') == std::string_view::npos, "a config_error message of several lines");
}

void check_endpoint_round_trip(const endpoint& parsed) {
  require(!parsed.host.empty() && parsed.port != 0, "an empty endpoint was accepted");
  endpoint again;
  try {
    again = parse_endpoint(parsed.to_string());
  } catch (const config_error&) {
    redlockd::fuzz::fail("an accepted endpoint prints as text that does not parse");
  }
  require(again == parsed, "an accepted endpoint prints as text that parses otherwise");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = fuzz::as_text(data, size);
  try {
    const config cfg = parse_config(text);
    validate(cfg); // what parse_config returns is valid by construction
    require(!cfg.nodes.empty() && cfg.nodes.size() <= max_nodes, "node count out of range");
    check_endpoint_round_trip(cfg.listen);
    for (const endpoint& node : cfg.nodes)
      check_endpoint_round_trip(node);
  } catch (const config_error& e) {
    check_message(e);
  }
  if (size <= 300) {
    try {
      check_endpoint_round_trip(parse_endpoint(text));
    } catch (const config_error& e) {
      check_message(e);
    }
  }
  return 0;
}
