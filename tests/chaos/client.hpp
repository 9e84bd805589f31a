// The client processes of the chaos suite (`redlockd-chaos client ...`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace redlockd::chaos {

// How a client uses its locks:
//   lease   LOCK, READ, sleep, WRITE, UNLOCK
//   extend  LOCK, then twice READ, sleep, EXTEND, WRITE (only if EXTEND said OK), then UNLOCK:
//           the holds add up to more than the TTL, so the EXTENDs are what keep it
//   wait    as lease, but LOCK ... WAIT: hand-overs inside the daemon's queue
//   keep    LOCK ... KEEP on its own connection, then rounds of READ, sleep (watching for LOST),
//           PING on that connection, WRITE for longer than the TTL: the renewals keep it. It
//           stops writing once it saw LOST or the connection broke.
// and the lock family (protocol v1.1):
//   shared  LOCK ... SHARED, then SREAD (a reader's read), sleep, SREAD, UNLOCK, rest
//   permit  LOCK <semaphore> ... PERMITS n, then READ, sleep, WRITE on the register of the
//           permit's slot ("<semaphore>#<slot>": each slot is a mutex), UNLOCK, rest
//           (100-500 ms, so that another contender takes its turn)
//   set     MLOCK of 2 or 3 of the resources named in a random order, WAIT half of the time,
//           then READ every member's register, sleep, WRITE each with the set's fence, MUNLOCK
//           naming them in another random order
struct client_options {
  std::string name; // "c3": the process name in the history
  std::string mode = "lease";
  int daemon_index = 0;
  std::uint16_t daemon_port = 0;
  std::string register_socket;
  std::string history_file;
  std::vector<std::string> resources; // permit: the semaphores
  int permits = 2;                    // permit: n
  std::int64_t ttl_ms = 10000;
  std::int64_t hold_min_ms = 100; // sleep between the register read and write
  std::int64_t hold_max_ms = 1000;
  std::int64_t until_ns = 0; // CLOCK_MONOTONIC: stop starting operations after this
  std::string stop_file;     // or once this file exists
  std::int64_t reply_timeout_ms = 3000;

  std::vector<std::string> to_args() const;
};

std::optional<client_options> parse_client_options(const std::vector<std::string>& args);
// Runs the client loop until `until_ns`; returns the exit code.
int run_client(const client_options& options);

} // namespace redlockd::chaos
