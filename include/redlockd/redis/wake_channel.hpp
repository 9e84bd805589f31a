// The wake channel of a master, as the subscriber connection speaks it: what to send when it
// connects (AUTH when a password is set, then SUBSCRIBE to the channel the release script
// publishes on) and what each reply or push means. Pure: no I/O, no logging.
#pragma once

#include "redlockd/config/config.hpp"

#include <cstddef>
#include <string>
#include <string_view>

struct redisReply;

namespace redlockd {

// RESP bytes to send on a fresh subscriber connection, and how many replies precede the
// subscription's confirmation.
struct wake_subscription {
  std::string command;
  std::size_t auth_replies = 0; // 1 when AUTH is sent first
};
wake_subscription subscribe_request(const config& cfg);
// A PING on the subscribed connection (answered ["pong", ""]): the link is alive.
std::string wake_ping();

// What one reply on the subscriber connection means.
struct wake_push {
  enum class kind : std::uint8_t {
    auth_accepted, // the answer to AUTH
    refused,       // an error (AUTH or SUBSCRIBE refused, e.g. by the ACL); `text` says why
    subscribed,    // SUBSCRIBE confirmed
    released,      // a message: `text` is the lock key that a release found free
    pong,          // the answer to wake_ping()
    other,         // anything else (a message on another channel): ignored
  };
  kind what = kind::other;
  std::string_view text; // points into the reply
};
// `channel`: the wake channel (register_keys::wake); `expect_auth`: the AUTH reply is still due.
wake_push decode_wake_reply(const redisReply& reply, std::string_view channel, bool expect_auth);

} // namespace redlockd
