#include "http_get.hpp"

#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace redlockd::test {

http_response http_get(std::uint16_t port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  REQUIRE(::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  std::string raw;
  char buffer[8192];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0)
      break;
    raw.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  http_response response;
  const auto end_of_headers = raw.find("\r\n\r\n");
  REQUIRE(end_of_headers != std::string::npos);
  response.headers = raw.substr(0, end_of_headers);
  response.body = raw.substr(end_of_headers + 4);
  REQUIRE(response.headers.rfind("HTTP/1.1 ", 0) == 0);
  response.status = std::stoi(response.headers.substr(9, 3));
  return response;
}

} // namespace redlockd::test
