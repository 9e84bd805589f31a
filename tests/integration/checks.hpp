// Assertions shared by the integration tests (Catch; the harness in tests/support stays free of
// it, so that the chaos suite can use that without a Catch session).
#pragma once

#include <catch2/catch.hpp>

#include <string>

#include "test_env.hpp"

namespace redlockd::test {

// LOCK that must succeed: the request and reply are in the failure message.
inline lock_grant must_lock(line_client& client, const std::string& line) {
  const std::string reply = client.request(line);
  INFO("request: " << line << "  reply: " << reply);
  const auto grant = parse_lock_ok(reply);
  REQUIRE(grant);
  return *grant;
}

// Every master's wake channel is subscribed (INFO nodes[].wake_subscribed).
inline bool all_wake_subscribed(const daemon_process& daemon) {
  const nlohmann::json info = daemon.info(); // kept: the loop below refers into it
  for (const auto& node : info.at("nodes"))
    if (!node.value("wake_subscribed", false))
      return false;
  return true;
}

} // namespace redlockd::test
