#include "redlockd/redis/wake_subscriber.hpp"

#include "redlockd/redis/wake_channel.hpp"
#include "redlockd/resp/script_calls.hpp"

#include <spdlog/spdlog.h>

#include <array>

namespace redlockd {

using steady = std::chrono::steady_clock;

wake_subscriber::wake_subscriber(net::io_context& io, std::size_t index, endpoint address,
                                 const config& cfg, wake_events& events,
                                 std::shared_ptr<spdlog::logger> log)
    : index_(index), to_{std::move(address), nullptr, {}}, cfg_(cfg), events_(events),
      log_(std::move(log)), channel_(register_keys(cfg.fence_key).wake), stream_(io),
      connect_timer_(io), health_timer_(io), backoff_timer_(io), jitter_(std::random_device{}()) {}

wake_subscriber::~wake_subscriber() = default;

void wake_subscriber::start() {
  const std::string name = "wake channel of node " + to_.address.to_string();
  net::co_spawn(stream_.get_executor(), run(), log_failure{log_, name});
  net::co_spawn(stream_.get_executor(), check_health(), log_failure{log_, name + " health check"});
}

void wake_subscriber::stop() {
  stopping_ = true;
  stream_.close();
  connect_timer_.cancel();
  health_timer_.cancel();
  backoff_timer_.cancel();
}

awaitable<void> wake_subscriber::run() {
  while (!stopping_) {
    const std::string why = co_await connect_to_master(
        stream_, connect_timer_, to_, std::chrono::milliseconds(cfg_.redis_connect_timeout_ms));
    if (why.empty() && !stopping_) {
      reader_.reset();
      ping_outstanding_ = false;
      last_heard_ = steady::now();
      ++connection_;
      queued_.clear();
      const wake_subscription subscription = subscribe_request(cfg_);
      auth_replies_ = subscription.auth_replies;
      subscribing_ = true;
      write(subscription.command);
      co_await read_pushes();
      if (subscribed_)
        failures_ = 0; // a fresh outage: start again from the shortest backoff
      subscribing_ = subscribed_ = false;
      stream_.close();
      stream_.end_tls();
    } else if (!stopping_) {
      // The link to the same master says so at warn level; this is the same outage.
      log_->debug("wake channel of node {} unreachable: {}", to_.address.to_string(), why);
    }
    if (stopping_)
      break;
    ++failures_;
    backoff_timer_.expires_after(reconnect_backoff(cfg_, failures_, jitter_));
    error_code_t ec;
    co_await backoff_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
}

awaitable<void> wake_subscriber::read_pushes() {
  // Pushes are small (a lock key each): a small buffer, drained of every complete reply.
  std::array<char, 4096> buffer;
  for (;;) {
    error_code_t ec;
    const std::size_t n = co_await stream_.read_some(net::buffer(buffer), ec);
    if (ec) {
      if (subscribed_ && !stopping_)
        log_->info("wake channel of node {} closed: {}; waiters there retry on their timers "
                   "until it is back",
                   to_.address.to_string(), ec.message());
      co_return;
    }
    last_heard_ = steady::now();
    reader_.feed({buffer.data(), n});
    for (;;) {
      reply_ptr reply;
      const auto status = reader_.next(reply);
      if (status == reply_reader::status::need_more)
        break;
      if (status == reply_reader::status::protocol_error || !handle(*reply)) {
        stream_.close();
        co_return;
      }
    }
  }
}

bool wake_subscriber::handle(const redisReply& reply) {
  using kind = wake_push::kind;
  const wake_push push = decode_wake_reply(reply, channel_, auth_replies_ > 0);
  switch (push.what) {
  case kind::auth_accepted:
    --auth_replies_;
    return true;
  case kind::refused:
    if (subscribed_) { // a PING the ACL refuses still shows the master is there
      ping_outstanding_ = false;
      return true;
    }
    // An ACL without PUBLISH/SUBSCRIBE or the channel: the daemon works, waiters retry on timers.
    if (!refused_logged_)
      log_->error("wake channel of node {} refused: {}; waiters on this daemon wake on their "
                  "timers only (the ACL needs +subscribe +publish +ping and &{})",
                  to_.address.to_string(), push.text, channel_);
    refused_logged_ = true;
    failures_ = 20; // the longest backoff: the master will say the same until its ACL changes
    return false;
  case kind::subscribed:
    subscribing_ = false;
    subscribed_ = true;
    refused_logged_ = false;
    log_->debug("wake channel of node {} subscribed", to_.address.to_string());
    events_.on_wake_subscribed(index_);
    return true;
  case kind::released:
    events_.on_released(index_, push.text);
    return true;
  case kind::pong:
    ping_outstanding_ = false;
    return true;
  case kind::other:
    return true;
  }
  return true;
}

void wake_subscriber::write(std::string_view bytes) {
  queued_.append(bytes);
  if (!writing_)
    flush();
}

void wake_subscriber::flush() {
  if (queued_.empty())
    return;
  writing_ = true;
  out_.swap(queued_);
  queued_.clear();
  stream_.async_write(net::buffer(out_), [this, connection = connection_](const error_code_t& ec) {
    writing_ = false;
    if (connection != connection_) {
      flush(); // the write of a connection that ended: what was queued since is the new one's
      return;
    }
    if (ec) {
      drop(ec.message());
      return;
    }
    flush();
  });
}

void wake_subscriber::drop(std::string_view why) {
  if (!stream_.is_open())
    return;
  log_->debug("wake channel of node {} dropped: {}", to_.address.to_string(), why);
  stream_.close(); // the reader sees the error and the run loop reconnects
}

awaitable<void> wake_subscriber::check_health() {
  const auto stall = std::chrono::milliseconds(redis_stall_limit_ms(cfg_));
  while (!stopping_) {
    health_timer_.expires_after(std::chrono::milliseconds(cfg_.redis_health_interval_ms));
    error_code_t ec;
    co_await health_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
    if (stopping_)
      co_return;
    // A master that went silent right after the connection (stopped, blackholed) never answers
    // the SUBSCRIBE: the connection is opened again, as for PINGs that go unanswered.
    if (subscribing_ && steady::now() - last_heard_ > stall) {
      drop("no answer to SUBSCRIBE within the stall limit");
      continue;
    }
    if (!subscribed_)
      continue;
    // A master that went silent (stopped, blackholed) is noticed by its PINGs going unanswered.
    if (ping_outstanding_ && steady::now() - last_heard_ > stall) {
      drop("no answer to PING within the stall limit");
      continue;
    }
    if (!ping_outstanding_) {
      ping_outstanding_ = true;
      write(wake_ping());
    }
  }
}

} // namespace redlockd
