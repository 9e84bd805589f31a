#include "redlockd/redis/redis_link.hpp"

#include "redlockd/net/tls.hpp"
#include "redlockd/resp/scripts.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace redlockd {
namespace {

constexpr std::size_t read_chunk = 64 * 1024;

// A connection whose oldest request has gone unanswered this long is dead (a stopped or
// blackholed master): drop it and reconnect rather than wait for TCP to notice.
std::chrono::milliseconds stall_limit(const config& cfg) {
  return std::chrono::milliseconds(redis_stall_limit_ms(cfg));
}

} // namespace

redis_link::redis_link(net::io_context& io, std::size_t index, endpoint address, const config& cfg,
                       link_events& events, std::shared_ptr<spdlog::logger> log)
    : io_(io), index_(index), to_{std::move(address), nullptr, {}}, cfg_(cfg), log_(std::move(log)),
      events_(events), stream_(io), connect_timer_(io), health_timer_(io), backoff_timer_(io),
      read_buffer_(read_chunk), writer_(stream_, *this), handshake_(cfg),
      jitter_(std::random_device{}()) {}

redis_link::~redis_link() = default;

void redis_link::start() {
  const std::string name = "node " + to_.address.to_string();
  net::co_spawn(io_, run(), log_failure{log_, name + " connection loop"});
  net::co_spawn(io_, check_health(), log_failure{log_, name + " health check"});
}

void redis_link::stop() {
  stopping_ = true;
  stream_.close();
  connect_timer_.cancel();
  health_timer_.cancel();
  backoff_timer_.cancel();
}

void redis_link::send(const request_tag& tag, std::string_view command) {
  if (pipeline_.empty())
    last_progress_ = clock_type::now(); // the stall clock starts with the first request
  pipeline_.push(tag);
  writer_.append(command);
}

bool redis_link::on_written(const error_code_t& ec) {
  if (ec) {
    drop_connection(ec.message());
    return false;
  }
  return true; // and what was queued meanwhile goes out
}

void redis_link::reload_scripts() {
  if (reload_in_progress_ || state_ != state::ok)
    return;
  reload_in_progress_ = true;
  log_->warn("node {} lost its scripts; loading them again", to_.address.to_string());
  for (const link_request& step : link_handshake::script_reloads())
    send(step.tag, step.command);
}

void redis_link::drop_connection(std::string_view why) {
  if (!stream_.is_open())
    return;
  if (state_ == state::ok)
    log_->warn("node {} down: {}", to_.address.to_string(), why);
  stream_.close(); // the reader sees the error and the run loop reconnects
}

awaitable<void> redis_link::run() {
  while (!stopping_) {
    state_ = state::connecting;
    error_code_t ec;
    const std::string why = co_await connect_to_master(
        stream_, connect_timer_, to_, std::chrono::milliseconds(cfg_.redis_connect_timeout_ms));
    if (!why.empty() || stopping_) {
      if (failures_ == 0 && !stopping_)
        log_->warn("node {} unreachable: {}; retrying", to_.address.to_string(), why);
      else
        log_->debug("node {} still unreachable: {}", to_.address.to_string(), why);
      // Down until the next attempt starts, so INFO tells a failing node from one that connects.
      state_ = state::down;
      stream_.close();
      ++failures_;
      backoff_timer_.expires_after(reconnect_backoff(cfg_, failures_, jitter_));
      co_await backoff_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }

    reader_.reset();
    state_ = state::handshaking;
    reload_in_progress_ = false;
    ping_outstanding_ = false;
    ping_sent_ = clock_type::now(); // the handshake's round trip is the first RTT sample
    for (const link_request& step : handshake_.begin())
      send(step.tag, step.command);

    co_await read_replies();

    // Connection lost: every outstanding request counts as a failed vote.
    const bool was_up = state_ == state::ok;
    state_ = state::down;
    stream_.close();
    stream_.end_tls(); // a write still in flight keeps its TLS state alive until it completes
    writer_.discard(); // and completes unseen: it cannot drop the next connection
    pipeline_.fail_all([this](const request_tag& tag) { events_.on_failure(index_, tag); });
    if (was_up)
      failures_ = 0; // a fresh outage: start again from the shortest backoff
    ++failures_;
    if (stopping_)
      break;
    backoff_timer_.expires_after(reconnect_backoff(cfg_, failures_, jitter_));
    co_await backoff_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
}

awaitable<void> redis_link::read_replies() {
  for (;;) {
    error_code_t ec;
    const std::size_t n = co_await stream_.read_some(net::buffer(read_buffer_), ec);
    if (ec) {
      if (state_ == state::ok && !stopping_)
        log_->warn("node {} down: {}", to_.address.to_string(), ec.message());
      co_return;
    }
    last_progress_ = clock_type::now();
    reader_.feed({read_buffer_.data(), n});
    // Drain every complete reply of this read before waiting again.
    for (;;) {
      reply_ptr reply;
      const auto status = reader_.next(reply);
      if (status == reply_reader::status::need_more)
        break;
      if (status == reply_reader::status::protocol_error || pipeline_.empty()) {
        log_->error("node {}: unparsable or unexpected reply; reconnecting",
                    to_.address.to_string());
        co_return;
      }
      handle_reply(pipeline_.pop(), *reply);
      if (!stream_.is_open())
        co_return;
    }
  }
}

void redis_link::handle_reply(const request_tag& tag, const redisReply& reply) {
  if (tag.kind == request_kind::ping)
    on_time_reply(reply);
  else if (link_handshake::handles(tag.kind))
    on_handshake_event(handshake_.decode(tag, reply));
  else
    events_.on_reply(index_, tag, reply);
}

void redis_link::on_time_reply(const redisReply& reply) {
  ping_outstanding_ = false;
  rtt_us_ =
      std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - ping_sent_).count();
  if (const auto time = decode_time(reply))
    events_.on_time_sample(index_, time->seconds, time->micros, ping_sent_);
}

void redis_link::on_handshake_event(const handshake_event& event) {
  using kind = handshake_event::kind;
  const std::string node = to_.address.to_string();
  switch (event.what) {
  case kind::auth_refused:
    if (!auth_refused_)
      log_->error("node {}: AUTH refused{}: {}; node down, retrying", node,
                  cfg_.redis_username.empty() ? "" : " for user '" + cfg_.redis_username + "'",
                  event.detail);
    else
      log_->debug("node {}: AUTH refused again: {}", node, event.detail);
    auth_refused_ = true;
    drop_connection("AUTH refused");
    return;
  case kind::script_refused:
    log_->error("node {}: SCRIPT LOAD failed: {}", node, event.detail);
    drop_connection("cannot load scripts");
    return;
  case kind::fence_unreadable:
    log_->error("node {}: cannot read fence key '{}': {}; reconnecting", node, cfg_.fence_key,
                event.detail);
    drop_connection("unreadable fence key");
    return;
  case kind::auth_accepted:
    auth_refused_ = false;
    break;
  case kind::identified:
    events_.on_connected(index_, event.facts);
    break;
  case kind::storage:
    // What survives a restart decides how often quarantine will be needed.
    if (event.storage.aof_enabled)
      log_->info("node {}: appendonly on", node);
    else
      log_->info("node {}: appendonly off: a restart loses its locks (it is then quarantined)",
                 node);
    unsafe_ = event.storage.evicts_keys();
    if (unsafe_)
      log_->error("node {}: maxmemory-policy is '{}': lock keys can be evicted{}", node,
                  event.storage.maxmemory_policy,
                  cfg_.refuse_unsafe_nodes ? "; kept out of quorums (refuse_unsafe_nodes)"
                                           : "; set it to noeviction");
    break;
  case kind::scripts_reloaded:
    reload_in_progress_ = false;
    break;
  case kind::accepted:
    break;
  }
  if (event.complete)
    mark_up();
}

// The last handshake reply came: the master takes requests.
void redis_link::mark_up() {
  state_ = state::ok;
  rtt_us_ =
      std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - ping_sent_).count();
  if (failures_ > 0)
    log_->info("node {} up (after {} failed attempts)", to_.address.to_string(), failures_);
  else
    log_->info("node {} up", to_.address.to_string());
  failures_ = 0;
  events_.on_ready(index_);
  // A clock sample at once rather than a health interval later: a grant proposed without the
  // masters' clock takes a second round, and a jump while the link was down shows sooner.
  send_time_probe();
}

void redis_link::send_time_probe() {
  if (ping_outstanding_ || state_ != state::ok)
    return;
  ping_outstanding_ = true;
  ping_sent_ = clock_type::now();
  // TIME rather than PING: the same round trip also samples the master's clock, so that a jump
  // is seen within a health interval even when no lock is taken.
  std::string command;
  append_command(command, {"TIME"});
  send(request_tag{request_kind::ping, 0, 0}, command);
}

awaitable<void> redis_link::check_health() {
  while (!stopping_) {
    health_timer_.expires_after(std::chrono::milliseconds(cfg_.redis_health_interval_ms));
    error_code_t ec;
    co_await health_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
    if (stopping_)
      co_return;
    if (state_ != state::ok && state_ != state::handshaking)
      continue;
    const auto now = clock_type::now();
    if (!pipeline_.empty() && now - last_progress_ > stall_limit(cfg_)) {
      drop_connection("no reply within the stall limit");
      continue;
    }
    send_time_probe();
  }
}

} // namespace redlockd
