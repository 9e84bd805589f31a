#include "redlockd/redis/wake_channel.hpp"

#include "redlockd/resp/resp.hpp"
#include "redlockd/resp/script_calls.hpp"

namespace redlockd {

wake_subscription subscribe_request(const config& cfg) {
  wake_subscription out;
  if (!cfg.redis_password.empty()) {
    if (cfg.redis_username.empty())
      append_command(out.command, {"AUTH", cfg.redis_password});
    else
      append_command(out.command, {"AUTH", cfg.redis_username, cfg.redis_password});
    out.auth_replies = 1;
  }
  append_command(out.command, {"SUBSCRIBE", register_keys(cfg.fence_key).wake});
  return out;
}

std::string wake_ping() {
  std::string out;
  append_command(out, {"PING"});
  return out;
}

wake_push decode_wake_reply(const redisReply& reply, std::string_view channel, bool expect_auth) {
  using kind = wake_push::kind;
  if (is_error(reply))
    return {kind::refused, as_string(reply)};
  if (expect_auth)
    return {kind::auth_accepted, {}};
  // Pushes in subscribed mode are arrays: [message, channel, payload], [subscribe, channel, n],
  // [pong, ""].
  const std::size_t size = array_size(reply);
  if (size == 0)
    return {};
  const std::string_view type = as_string(array_at(reply, 0));
  if (type == "pong")
    return {kind::pong, {}};
  if (size != 3 || as_string(array_at(reply, 1)) != channel)
    return {};
  if (type == "message")
    return {kind::released, as_string(array_at(reply, 2))};
  if (type == "subscribe")
    return {kind::subscribed, {}};
  return {};
}

} // namespace redlockd
