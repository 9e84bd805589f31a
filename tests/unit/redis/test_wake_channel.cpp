// The wake channel's requests as bytes, and real RESP pushes decoded.
#include "redlockd/redis/wake_channel.hpp"
#include "redlockd/resp/resp.hpp"

#include <catch2/catch.hpp>

using namespace redlockd;

namespace {

reply_ptr resp(std::string_view bytes) {
  reply_reader reader;
  reader.feed(bytes);
  reply_ptr reply;
  REQUIRE(reader.next(reply) == reply_reader::status::reply);
  return reply;
}

constexpr std::string_view channel = "redlockd:fence:wake";

} // namespace

TEST_CASE("the subscriber subscribes to the fence key's wake channel, after AUTH if set",
          "[wake_channel]") {
  config cfg;
  wake_subscription plain = subscribe_request(cfg);
  CHECK(plain.auth_replies == 0);
  CHECK(plain.command == "*2\r\n$9\r\nSUBSCRIBE\r\n$19\r\nredlockd:fence:wake\r\n");

  cfg.redis_password = "pw";
  cfg.redis_username = "redlockd";
  wake_subscription with_user = subscribe_request(cfg);
  CHECK(with_user.auth_replies == 1);
  CHECK(with_user.command.starts_with("*3\r\n$4\r\nAUTH\r\n$8\r\nredlockd\r\n$2\r\npw\r\n*2\r\n"));
  CHECK(wake_ping() == "*1\r\n$4\r\nPING\r\n");
}

TEST_CASE("pushes on the wake channel decode to what they mean", "[wake_channel]") {
  using kind = wake_push::kind;
  auto subscribed = resp("*3\r\n$9\r\nsubscribe\r\n$19\r\nredlockd:fence:wake\r\n:1\r\n");
  CHECK(decode_wake_reply(*subscribed, channel, false).what == kind::subscribed);

  auto message = resp("*3\r\n$7\r\nmessage\r\n$19\r\nredlockd:fence:wake\r\n$8\r\norders:1\r\n");
  const wake_push released = decode_wake_reply(*message, channel, false);
  CHECK(released.what == kind::released);
  CHECK(released.text == "orders:1");

  auto elsewhere = resp("*3\r\n$7\r\nmessage\r\n$5\r\nother\r\n$8\r\norders:1\r\n");
  CHECK(decode_wake_reply(*elsewhere, channel, false).what == kind::other);

  auto pong = resp("*2\r\n$4\r\npong\r\n$0\r\n\r\n");
  CHECK(decode_wake_reply(*pong, channel, false).what == kind::pong);

  auto ok = resp("+OK\r\n");
  CHECK(decode_wake_reply(*ok, channel, true).what == kind::auth_accepted);
  CHECK(decode_wake_reply(*ok, channel, false).what == kind::other);

  auto noperm = resp("-NOPERM this user has no permissions to access the channel\r\n");
  const wake_push refused = decode_wake_reply(*noperm, channel, false);
  CHECK(refused.what == kind::refused);
  CHECK(refused.text.starts_with("NOPERM"));
  CHECK(decode_wake_reply(*noperm, channel, true).what == kind::refused);
}
