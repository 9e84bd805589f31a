// Endpoints as the configuration writes them: "host:port" and "[v6]:port", parsed and printed.
#include "redlockd/config/endpoint.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace redlockd;

namespace {

std::string endpoint_message(std::string_view text) {
  try {
    parse_endpoint(text);
  } catch (const config_error& e) {
    return e.what();
  }
  FAIL("accepted endpoint: " << text);
  return {};
}

} // namespace

TEST_CASE("parse_endpoint reads host:port and [v6]:port", "[config][endpoint]") {
  CHECK(parse_endpoint("127.0.0.1:7001") == endpoint{"127.0.0.1", 7001});
  CHECK(parse_endpoint("redis-1.internal:6379") == endpoint{"redis-1.internal", 6379});
  CHECK(parse_endpoint("h:1") == endpoint{"h", 1});
  CHECK(parse_endpoint("h:65535") == endpoint{"h", 65535});
  CHECK(parse_endpoint("[::1]:7400") == endpoint{"::1", 7400});
  CHECK(parse_endpoint("[fe80::1%eth0]:7400") == endpoint{"fe80::1%eth0", 7400});

  CHECK(endpoint_message("127.0.0.1:99999") == "bad port in '127.0.0.1:99999'");
  CHECK(endpoint_message("h:0") == "bad port in 'h:0'");
  CHECK(endpoint_message("h:65536") == "bad port in 'h:65536'");
  for (const std::string& bad : std::vector<std::string>{
           "", "h", "h:", ":7001", "h:+1", "h:-1", "h:1x", "h: 1", "a b:1", "::1:7001", "[::1]",
           "[::1]7400", "[::1:7400", "[]:7400", "h:99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_endpoint(bad), config_error);
  }
}

TEST_CASE("endpoint::to_string brackets IPv6 literals", "[config][endpoint]") {
  CHECK(endpoint{"127.0.0.1", 7001}.to_string() == "127.0.0.1:7001");
  CHECK(endpoint{"redis", 6379}.to_string() == "redis:6379");
  CHECK(endpoint{"::1", 7400}.to_string() == "[::1]:7400");
  for (const std::string& text :
       std::vector<std::string>{"127.0.0.1:7001", "[::1]:7400", "[2001:db8::2]:1"})
    CHECK(parse_endpoint(text).to_string() == text);
}
