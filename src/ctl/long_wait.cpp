#include "redlockd/ctl/long_wait.hpp"

#include <algorithm>

namespace redlockd::ctl {

using std::chrono::milliseconds;

wait_chunks::wait_chunks(milliseconds total, milliseconds smallest)
    : left_(std::max(milliseconds(0), total)), chunk_(left_),
      smallest_(std::max(milliseconds(1), smallest)) {}

milliseconds wait_chunks::next() const {
  return std::min(left_, chunk_);
}

bool wait_chunks::again(const std::string& reply, milliseconds elapsed) {
  const milliseconds sent = next();
  if (reply.starts_with("ERR BAD_TTL") && sent > smallest_) {
    // Longer than the daemon's max_ttl_ms: try half as long (nothing was queued or locked).
    chunk_ = std::max(smallest_, sent / 2);
    return true;
  }
  // A BUSY before the chunk ran out is the daemon's final word (lock-delay, no queue): only a
  // chunk that was waited for in full is followed by the next one, which queues at the back.
  if (reply.starts_with("BUSY") && elapsed >= sent && left_ > elapsed) {
    left_ -= elapsed;
    return true;
  }
  return false;
}

std::string lock_with_wait(line_connection& connection, const std::string& before_wait,
                           const std::string& after_wait, milliseconds wait, milliseconds smallest,
                           milliseconds timeout) {
  wait_chunks chunks(wait, smallest);
  for (;;) {
    const milliseconds chunk = chunks.next();
    const auto sent = std::chrono::steady_clock::now();
    std::string reply = connection.request(
        before_wait + " WAIT " + std::to_string(chunk.count()) + after_wait, chunk + timeout);
    const auto elapsed =
        std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - sent);
    if (!chunks.again(reply, elapsed))
      return reply;
  }
}

} // namespace redlockd::ctl
