// A minimal HTTP/1.1 GET over loopback, for the daemon's metrics port (/metrics, /healthz, the
// status page).
#pragma once

#include <cstdint>
#include <string>

namespace redlockd::test {

struct http_response {
  int status = 0;
  std::string headers; // the status line and the header lines, CRLF-separated
  std::string body;
};

// One GET with Connection: close; reads until the server closes. A failure to connect or a reply
// that is not HTTP/1.1 fails the running test case (REQUIRE).
http_response http_get(std::uint16_t port, const std::string& path);

} // namespace redlockd::test
