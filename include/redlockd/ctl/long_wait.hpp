// LOCK ... WAIT for as long as the user asked. The daemon takes a WAIT of at most its
// max_ttl_ms (a longer one is ERR BAD_TTL), which a client does not know: a longer wait is sent
// as several LOCK ... WAIT requests, one after the other, each as long as the daemon accepts.
#pragma once

#include "redlockd/ctl/line_connection.hpp"

#include <chrono>
#include <string>

namespace redlockd::ctl {

// Which WAIT to send next, and whether a reply ends the wait (pure: no I/O, no clock).
class wait_chunks {
 public:
  // `total`: the wait asked for; `smallest`: a WAIT the daemon surely accepts when it accepts the
  // request at all (the TTL: both have the same upper bound).
  wait_chunks(std::chrono::milliseconds total, std::chrono::milliseconds smallest);

  // The WAIT of the next request.
  std::chrono::milliseconds next() const;

  // The reply to the request sent with next(), `elapsed` after it was sent. True: send another
  // request with next(); false: `reply` is the answer to give. ERR BAD_TTL halves the chunk
  // (down to `smallest`); BUSY after the whole chunk was waited for goes on with what is left of
  // `total`. Anything else (OK, NOQUORUM, an early BUSY, other errors) ends the wait.
  bool again(const std::string& reply, std::chrono::milliseconds elapsed);

 private:
  std::chrono::milliseconds left_;
  std::chrono::milliseconds chunk_;
  std::chrono::milliseconds smallest_;
};

// Sends `before_wait` + " WAIT <ms>" + `after_wait` (e.g. "LOCK res 10000", " KEEP") as often as
// wait_chunks says, each reply awaited for its WAIT plus `timeout`, and returns the last reply.
// Throws connection_error.
std::string lock_with_wait(line_connection& connection, const std::string& before_wait,
                           const std::string& after_wait, std::chrono::milliseconds wait,
                           std::chrono::milliseconds smallest, std::chrono::milliseconds timeout);

} // namespace redlockd::ctl
