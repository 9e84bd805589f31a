// seed.lua, the steps of a quarantined master (node_health), run as the daemon sends them
// (append_quarantine_mark, append_seed) on a real redis-server.
#include "redlockd/resp/script_calls.hpp"
#include "redlockd/resp/scripts.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "redis_fleet.hpp"

using namespace redlockd;
using namespace redlockd::test;

namespace {

const std::string mark_key = "redlockd:fence:quarantine:d1";

// The arguments of one RESP command as append_command writes it (*N, then $len and bytes).
std::vector<std::string> arguments_of(const std::string& bytes) {
  std::vector<std::string> out;
  std::size_t at = bytes.find("\r\n") + 2;
  while (at < bytes.size()) {
    const std::size_t end = bytes.find("\r\n", at);
    const std::size_t length = std::stoul(bytes.substr(at + 1, end - at - 1));
    out.push_back(bytes.substr(end + 2, length));
    at = end + 2 + length + 2;
  }
  return out;
}

// Runs one step with the bytes the daemon sends (node_health::send_mark, send_seed): `again` is
// a mark sent once this quarantine's mark was set, at a reconnection.
long long step(const redis_fleet& fleet, bool seed, bool again = false) {
  const register_keys keys("redlockd:fence");
  std::string bytes;
  if (seed)
    append_seed(bytes, keys, mark_key, 41, 30000);
  else
    append_quarantine_mark(bytes, keys, mark_key, 70000, again);
  const redis_reply reply = fleet.command(0, arguments_of(bytes));
  INFO("script error: " << reply.str);
  REQUIRE(reply.type == redis_reply::kind::integer);
  return reply.integer;
}

} // namespace

TEST_CASE("a quarantine mark found gone at a reconnection stays a loss, though that answer is "
          "lost with the connection",
          "[scripts][quarantine]") {
  redis_fleet fleet{1};
  CHECK(step(fleet, false) == 0);       // the quarantine starts: first set
  CHECK(step(fleet, false, true) == 1); // a reconnection: still there
  fleet.run(0, "FLUSHALL");             // the master loses its data again
  CHECK(step(fleet, false, true) == 0); // the next reconnection's answer says so...
  // ...and if that answer never reaches the daemon, the one after still does: 'mark' set the
  // mark again and the next reconnection found it there, as if nothing had been lost.
  CHECK(step(fleet, false, true) == 0);
  CHECK(step(fleet, true) == 0); // nor is the master seeded on it
  CHECK(fleet.get(0, "redlockd:fence") == std::nullopt);
  // The new quarantine's mark starts it over; a seed after it re-seeds the master.
  step(fleet, false);
  CHECK(step(fleet, false, true) == 1);
  CHECK(step(fleet, true) == 1);
  CHECK(fleet.get(0, "redlockd:fence") == std::optional<std::string>("41"));
  CHECK(fleet.get(0, mark_key) == std::nullopt);
}
