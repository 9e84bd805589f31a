#include "redlockd/redis/redis_link.hpp"

#include "redlockd/lock/fencing.hpp"
#include "redlockd/resp/scripts.hpp"
#include "redlockd/lock/status_query.hpp"
#include "redlockd/net/tls.hpp"

#include <boost/asio/connect.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>

namespace redlockd {
namespace {

constexpr std::size_t read_chunk = 64 * 1024;

// tag.generation of load_script: 1 during the handshake, 0 for a reload after NOSCRIPT.
constexpr std::uint32_t handshake_load = 1;

// A connection whose oldest request has gone unanswered this long is dead (a stopped or
// blackholed master): drop it and reconnect rather than wait for TCP to notice.
std::chrono::milliseconds stall_limit(const config& cfg) {
  return std::chrono::milliseconds(redis_stall_limit_ms(cfg));
}

// The value of `name` in an INFO reply ("name:value" lines), or "".
std::string_view info_field(std::string_view info, std::string_view name) {
  std::size_t at = 0;
  while (at < info.size()) {
    const std::size_t end = std::min(info.find('\n', at), info.size());
    std::string_view line = info.substr(at, end - at);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.size() > name.size() && line.starts_with(name) && line[name.size()] == ':')
      return line.substr(name.size() + 1);
    at = end + 1;
  }
  return {};
}

} // namespace

redis_link::redis_link(net::io_context& io, std::size_t index, endpoint address, const config& cfg,
                       std::shared_ptr<spdlog::logger> log)
    : io_(io), index_(index), address_(std::move(address)), cfg_(cfg), log_(std::move(log)),
      socket_(io), connect_timer_(io), health_timer_(io), backoff_timer_(io),
      read_buffer_(read_chunk), jitter_(std::random_device{}()) {}

redis_link::~redis_link() = default;

void redis_link::start() {
  const std::string name = "node " + address_.to_string();
  net::co_spawn(io_, run(), log_failure{log_, name + " connection loop"});
  net::co_spawn(io_, check_health(), log_failure{log_, name + " health check"});
}

void redis_link::stop() {
  stopping_ = true;
  error_code_t ignored;
  socket_.close(ignored);
  connect_timer_.cancel();
  health_timer_.cancel();
  backoff_timer_.cancel();
}

void redis_link::send(const request_tag& tag, std::string_view command) {
  if (pipeline_.empty())
    last_progress_ = clock_type::now(); // the stall clock starts with the first request
  pipeline_.push(tag);
  pending_.append(command);
  schedule_flush();
}

void redis_link::schedule_flush() {
  if (flush_posted_ || write_in_progress_)
    return;
  // Runs after the handlers already queued in this loop turn: their commands join this write.
  flush_posted_ = true;
  net::post(io_, [this] {
    flush_posted_ = false;
    write_pending();
  });
}

void redis_link::write_pending() {
  if (write_in_progress_ || pending_.empty() || !socket_.is_open())
    return;
  writing_.swap(pending_);
  pending_.clear();
  write_in_progress_ = true;
  if (tls_stream_) {
    tls_stream_->async_write(
        net::buffer(writing_),
        [this, connection = connection_](const error_code_t& ec) { on_written(connection, ec); });
    return;
  }
  net::async_write(socket_, net::buffer(writing_),
                   [this, connection = connection_](const error_code_t& ec, std::size_t) {
                     on_written(connection, ec);
                   });
}

void redis_link::on_written(std::uint64_t connection, const error_code_t& ec) {
  write_in_progress_ = false;
  writing_.clear();
  if (connection != connection_)
    return;
  if (ec) {
    drop_connection(ec.message());
    return;
  }
  write_pending(); // what was queued meanwhile
}

void redis_link::queue_script_loads(std::uint32_t handshake) {
  std::string command;
  for (std::uint32_t i = 0; i < script_count; ++i) {
    command.clear();
    append_command(command, {"SCRIPT", "LOAD", script_source(static_cast<script>(i))});
    send(request_tag{request_kind::load_script, i, handshake}, command);
  }
}

void redis_link::reload_scripts() {
  if (reload_in_progress_ || state_ != state::ok)
    return;
  reload_in_progress_ = true;
  log_->warn("node {} lost its scripts; loading them again", address_.to_string());
  queue_script_loads(0);
}

void redis_link::drop_connection(std::string_view why) {
  if (!socket_.is_open())
    return;
  if (state_ == state::ok)
    log_->warn("node {} down: {}", address_.to_string(), why);
  error_code_t ignored;
  socket_.close(ignored); // the reader sees the error and the run loop reconnects
}

std::chrono::milliseconds redis_link::next_backoff() {
  // Exponential, capped, and jittered into [d/2, d] so that daemons do not reconnect in step.
  // 2^20 takes the smallest redis_backoff_min_ms past the largest redis_backoff_max_ms.
  const unsigned shift = std::min(failures_, 20u);
  const auto ceiling = std::min<std::chrono::milliseconds>(
      std::chrono::milliseconds(cfg_.redis_backoff_min_ms) * (1u << shift),
      std::chrono::milliseconds(cfg_.redis_backoff_max_ms));
  std::uniform_int_distribution<long> pick(ceiling.count() / 2, ceiling.count());
  return std::chrono::milliseconds(pick(jitter_));
}

awaitable<void> redis_link::run() {
  tcp::resolver resolver(io_);
  while (!stopping_) {
    state_ = state::connecting;
    error_code_t ec;
    auto endpoints = co_await resolver.async_resolve(address_.host, std::to_string(address_.port),
                                                     net::redirect_error(net::use_awaitable, ec));
    std::string why; // for the log, when this attempt fails
    if (!ec) {
      // A master that accepts nothing must not hold us past the connect timeout.
      connect_timer_.expires_after(std::chrono::milliseconds(cfg_.redis_connect_timeout_ms));
      connect_timer_.async_wait([this](const error_code_t& timer_ec) {
        if (!timer_ec) {
          error_code_t ignored;
          socket_.close(ignored);
        }
      });
      co_await net::async_connect(socket_, endpoints, net::redirect_error(net::use_awaitable, ec));
      if (!ec && tls_) {
        // The connect timer bounds the handshake too. TLS state is per connection: a fresh one.
        tls_stream_ = std::make_unique<tls_stream>(socket_, *tls_);
        co_await tls_stream_->connect(tls_server_name_, ec);
        if (ec)
          why = socket_.is_open() ? "TLS handshake failed: " + tls_stream_->describe(ec)
                                  : "TLS handshake timed out";
      }
      connect_timer_.cancel();
      if (!ec && !socket_.is_open())
        ec = net::error::timed_out;
    }
    if (ec || stopping_) {
      if (why.empty())
        why = ec.message();
      if (failures_ == 0 && !stopping_)
        log_->warn("node {} unreachable: {}; retrying", address_.to_string(), why);
      else
        log_->debug("node {} still unreachable: {}", address_.to_string(), why);
      // Down until the next attempt starts, so INFO tells a failing node from one that connects.
      state_ = state::down;
      error_code_t ignored;
      socket_.close(ignored);
      ++failures_;
      backoff_timer_.expires_after(next_backoff());
      co_await backoff_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }

    socket_.set_option(tcp::no_delay(true), ec);
    ++connection_;
    reader_.reset();
    state_ = state::handshaking;
    handshake_left_ = script_count + 4;
    reload_in_progress_ = false;
    ping_outstanding_ = false;
    ping_sent_ = clock_type::now(); // the handshake's round trip is the first RTT sample
    std::string command;
    if (!cfg_.redis_password.empty()) {
      // First on the connection: everything after it runs as this user, or not at all.
      if (cfg_.redis_username.empty())
        append_command(command, {"AUTH", cfg_.redis_password});
      else
        append_command(command, {"AUTH", cfg_.redis_username, cfg_.redis_password});
      send(request_tag{request_kind::auth, 0, 0}, command);
      command.clear();
      ++handshake_left_;
    }
    queue_script_loads(handshake_load);
    append_command(command, {"GET", cfg_.fence_key});
    send(request_tag{request_kind::read_fence, 0, 0}, command);
    command.clear();
    append_command(command, {"GET", cfg_.fence_key + ":max_ttl"});
    send(request_tag{request_kind::read_fence, 1, 0}, command);
    command.clear();
    append_command(command, {"INFO", "server"});
    send(request_tag{request_kind::server_info, 0, 0}, command);
    command.clear();
    append_command(command, {"INFO", "memory", "persistence"});
    send(request_tag{request_kind::server_info, 1, 0}, command);

    co_await read_replies();

    // Connection lost: every outstanding request of the engine counts as a failed vote.
    const bool was_up = state_ == state::ok;
    state_ = state::down;
    error_code_t ignored;
    socket_.close(ignored);
    tls_stream_.reset(); // a write still in flight keeps its TLS state alive until it completes
    pending_.clear();
    pipeline_.fail_all([this](const request_tag& tag) {
      if (tag.kind == request_kind::status) {
        if (status_ != nullptr)
          status_->on_failure(index_, tag);
      } else if (engine_ != nullptr) {
        engine_->on_failure(index_, tag);
      }
    });
    if (was_up)
      failures_ = 0; // a fresh outage: start again from the shortest backoff
    ++failures_;
    if (stopping_)
      break;
    backoff_timer_.expires_after(next_backoff());
    co_await backoff_timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
  }
}

awaitable<void> redis_link::read_replies() {
  for (;;) {
    error_code_t ec;
    const std::size_t n =
        tls_stream_ ? co_await tls_stream_->read_some(net::buffer(read_buffer_), ec)
                    : co_await socket_.async_read_some(net::buffer(read_buffer_),
                                                       net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      if (state_ == state::ok && !stopping_)
        log_->warn("node {} down: {}", address_.to_string(), ec.message());
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
        log_->error("node {}: unparsable or unexpected reply; reconnecting", address_.to_string());
        co_return;
      }
      handle_reply(pipeline_.pop(), *reply);
      if (!socket_.is_open())
        co_return;
    }
  }
}

void redis_link::handle_reply(const request_tag& tag, const redisReply& reply) {
  switch (tag.kind) {
  case request_kind::auth:
    if (is_error(reply)) {
      // Redis's own text ("WRONGPASS ...") says why; it never holds the password, but it is
      // scrubbed anyway in case a future server echoes its argument.
      std::string why(as_string(reply));
      for (auto at = why.find(cfg_.redis_password); at != std::string::npos;
           at = why.find(cfg_.redis_password, at + 3))
        why.replace(at, cfg_.redis_password.size(), "***");
      if (!auth_refused_)
        log_->error("node {}: AUTH refused{}: {}; node down, retrying", address_.to_string(),
                    cfg_.redis_username.empty() ? "" : " for user '" + cfg_.redis_username + "'",
                    why);
      else
        log_->debug("node {}: AUTH refused again: {}", address_.to_string(), why);
      auth_refused_ = true;
      drop_connection("AUTH refused");
      return;
    }
    auth_refused_ = false;
    break;
  case request_kind::load_script:
    if (is_error(reply) || as_string(reply) != script_sha(static_cast<script>(tag.op))) {
      log_->error("node {}: SCRIPT LOAD failed: {}", address_.to_string(), as_string(reply));
      drop_connection("cannot load scripts");
      return;
    }
    if (tag.generation != handshake_load) {
      if (tag.op + 1 == script_count)
        reload_in_progress_ = false;
      return;
    }
    break;
  case request_kind::read_fence: {
    // Facts for the engine, handed over with the master's identity (INFO server, next).
    std::uint64_t value = 0;
    const std::string_view text = as_string(reply);
    if (!is_error(reply) && parse_counter(text.data(), text.size(), value)) {
      if (tag.op == 0)
        facts_.fence = is_nil(reply) ? std::nullopt : std::optional<std::uint64_t>(value);
      else
        facts_.max_ttl_ms = value;
    } else {
      log_->error("node {}: cannot read fence key '{}': {}; reconnecting", address_.to_string(),
                  cfg_.fence_key, text);
      drop_connection("unreadable fence key");
      return;
    }
    break;
  }
  case request_kind::ping: {
    ping_outstanding_ = false;
    rtt_us_ = std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - ping_sent_)
                  .count();
    if (array_size(reply) == 2 && engine_ != nullptr) {
      std::uint64_t seconds = 0;
      std::uint64_t micros = 0;
      const auto s_text = as_string(array_at(reply, 0));
      const auto us_text = as_string(array_at(reply, 1));
      if (parse_counter(s_text.data(), s_text.size(), seconds) &&
          parse_counter(us_text.data(), us_text.size(), micros))
        engine_->on_node_time(index_, seconds, micros, ping_sent_);
    }
    return;
  }
  case request_kind::server_info:
    if (tag.op == 0) {
      facts_.run_id = info_field(as_string(reply), "run_id");
      std::uint64_t uptime_s = 0;
      const std::string_view uptime = info_field(as_string(reply), "uptime_in_seconds");
      parse_counter(uptime.data(), uptime.size(), uptime_s);
      facts_.uptime_ms = uptime_s * 1000;
      if (engine_ != nullptr)
        engine_->on_node_connected(index_, facts_);
      facts_ = {};
    } else {
      const std::string_view policy = info_field(as_string(reply), "maxmemory_policy");
      // What survives a restart decides how often quarantine will be needed.
      if (info_field(as_string(reply), "aof_enabled") == "1")
        log_->info("node {}: appendonly on", address_.to_string());
      else
        log_->info("node {}: appendonly off: a restart loses its locks (it is then quarantined)",
                   address_.to_string());
      unsafe_ = policy != "noeviction";
      if (unsafe_)
        log_->error("node {}: maxmemory-policy is '{}': lock keys can be evicted{}",
                    address_.to_string(), policy,
                    cfg_.refuse_unsafe_nodes ? "; kept out of quorums (refuse_unsafe_nodes)"
                                             : "; set it to noeviction");
    }
    break;
  case request_kind::status:
    if (status_ != nullptr)
      status_->on_reply(index_, tag, reply);
    return;
  default:
    if (engine_ != nullptr)
      engine_->on_reply(index_, tag, reply);
    return;
  }
  // A handshake reply.
  if (handshake_left_ > 0 && --handshake_left_ == 0) {
    state_ = state::ok;
    rtt_us_ = std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - ping_sent_)
                  .count();
    if (failures_ > 0)
      log_->info("node {} up (after {} failed attempts)", address_.to_string(), failures_);
    else
      log_->info("node {} up", address_.to_string());
    failures_ = 0;
    if (engine_ != nullptr)
      engine_->on_node_ready(index_);
  }
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
    if (!ping_outstanding_ && state_ == state::ok) {
      ping_outstanding_ = true;
      ping_sent_ = now;
      // TIME rather than PING: the same round trip also samples the master's clock, so that a
      // jump is seen within a health interval even when no lock is taken.
      std::string command;
      append_command(command, {"TIME"});
      send(request_tag{request_kind::ping, 0, 0}, command);
    }
  }
}

} // namespace redlockd
