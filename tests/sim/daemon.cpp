#include "daemon.hpp"

#include "redlockd/redis/wake_channel.hpp"
#include "redlockd/resp/script_calls.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace redlockd::sim {
namespace {} // namespace

sim_daemon::sim_daemon(std::size_t index, const config& cfg, scheduler& clock, network& net,
                       prng random, daemon_books& books, std::shared_ptr<spdlog::logger> log,
                       std::int64_t drift_ppm)
    : index_(index), cfg_(cfg), clock_(clock), net_(net), random_(std::move(random)), books_(books),
      log_(std::move(log)), drift_ppm_(drift_ppm),
      // A steady clock that started some hours before the run.
      offset_ns_(random_.between(3'600, 86'400) * 1'000'000'000LL) {
  for (std::size_t m = 0; m < cfg.nodes.size(); ++m) {
    links_.push_back(std::make_unique<link_state>(cfg_));
    subscribers_.push_back(std::make_unique<subscriber_state>());
  }
}

sim_daemon::~sim_daemon() = default;

clock_type::time_point sim_daemon::clock_at(sim_time t) const {
  const std::int64_t ns = offset_ns_ + t * 1000 + t * drift_ppm_ / 1000;
  return clock_type::time_point(std::chrono::nanoseconds(ns));
}

sim_time sim_daemon::true_time_of(clock_type::time_point when) const {
  const std::int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count();
  auto t = static_cast<sim_time>(
      std::floor(static_cast<double>(ns - offset_ns_) / (1000.0 + drift_ppm_ / 1000.0)));
  // The first microsecond at which the daemon's clock reads `when` or later.
  while (clock_at(t) < when)
    ++t;
  while (t > 0 && clock_at(t - 1) >= when)
    --t;
  return t;
}

std::uint64_t sim_daemon::retry_later(unsigned failures, event_type retry, std::size_t master) {
  // As reconnect_backoff (master_connect.cpp): doubling from the minimum, capped, jittered into
  // [d/2, d]. Returns the token the retry event carries.
  const unsigned shift = std::min(failures, 20u);
  const std::uint64_t ceiling = std::min<std::uint64_t>(
      static_cast<std::uint64_t>(cfg_.redis_backoff_min_ms) << shift, cfg_.redis_backoff_max_ms);
  const sim_time wait =
      random_.between(static_cast<std::int64_t>(ceiling / 2), static_cast<std::int64_t>(ceiling)) *
      1000;
  const std::uint64_t token = next_token_++;
  clock_.after(wait, *this, event(retry, master), token);
  return token;
}

void sim_daemon::start() {
  instance_ = books_.new_instance(index_);
  engine_ = std::make_unique<lock_engine>(
      cfg_, *this, log_, [this] { return now(); },
      [this](std::span<std::uint8_t> out) { random_.fill(out); });
  for (std::size_t m = 0; m < links_.size(); ++m) {
    links_[m] = std::make_unique<link_state>(cfg_);
    subscribers_[m] = std::make_unique<subscriber_state>();
    connect_link(m);
    connect_subscriber(m);
    // The health checks tick from the start, each at its own phase.
    const auto interval = static_cast<sim_time>(cfg_.redis_health_interval_ms) * 1000;
    clock_.after(random_.between(1, interval), *this, event(link_health, m), instance_);
    clock_.after(random_.between(1, interval), *this, event(subscriber_health, m), instance_);
  }
}

void sim_daemon::crash() {
  if (!engine_)
    return;
  net_.daemon_crashed(index_);
  for (std::size_t m = 0; m < links_.size(); ++m) {
    if (links_[m]->conn != 0)
      books_.connection_closed(links_[m]->conn);
    if (subscribers_[m]->conn != 0)
      books_.connection_closed(subscribers_[m]->conn);
    links_[m] = std::make_unique<link_state>(cfg_);
    subscribers_[m] = std::make_unique<subscriber_state>();
  }
  auto sessions = std::move(sessions_);
  sessions_.clear();
  engine_.reset(); // in-flight operations go with it; their sinks are the sessions
  for (auto& session : sessions)
    session->daemon_died();
  ++timer_generation_;
}

std::shared_ptr<sim_session> sim_daemon::open_session(client_port& client, std::uint32_t) {
  std::erase_if(sessions_, [](const auto& s) { return !s->open(); });
  auto session = std::make_shared<sim_session>(*this, client);
  sessions_.push_back(session);
  return session;
}

bool sim_daemon::healthy() const {
  if (!engine_)
    return false;
  for (std::size_t m = 0; m < links_.size(); ++m)
    if (!engine_->votes(m) || !subscribers_[m]->subscribed)
      return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// node_io

bool sim_daemon::usable(std::size_t node) const {
  const link_state& l = *links_[node];
  return l.st == link_state::state::ok && !(l.unsafe && cfg_.refuse_unsafe_nodes);
}

void sim_daemon::send(std::size_t node, const request_tag& tag, std::string_view command) {
  switch (tag.kind) {
  case request_kind::acquire:
  case request_kind::release:
  case request_kind::extend:
  case request_kind::fence_bump:
  case request_kind::hand_over:
    books_.round_sent(*this, tag);
    break;
  default:
    break;
  }
  link_send(node, tag, command);
}

void sim_daemon::reload_scripts(std::size_t node) {
  link_state& l = *links_[node];
  if (l.reload_in_progress || l.st != link_state::state::ok)
    return;
  l.reload_in_progress = true;
  for (const link_request& step : link_handshake::script_reloads())
    link_send(node, step.tag, step.command);
}

void sim_daemon::arm_timer(clock_type::time_point when) {
  // As fleet::arm_timer: the new expiry replaces the armed one.
  clock_.at(true_time_of(when), *this, event(engine_timer, 0), ++timer_generation_);
}

// ---------------------------------------------------------------------------------------------
// Events

void sim_daemon::fire(std::uint32_t kind, std::uint64_t arg) {
  const auto type = static_cast<event_type>(kind >> 8);
  const std::size_t m = kind & 0xff;
  switch (type) {
  case engine_timer:
    if (engine_ && arg == timer_generation_)
      engine_->on_timer();
    return;
  case link_retry:
    if (engine_ && arg == links_[m]->token && links_[m]->st == link_state::state::down)
      connect_link(m);
    return;
  case subscriber_retry:
    if (engine_ && arg == subscribers_[m]->token && subscribers_[m]->conn == 0)
      connect_subscriber(m);
    return;
  case link_health:
    if (engine_ && arg == instance_) {
      check_link(m);
      clock_.after(static_cast<sim_time>(cfg_.redis_health_interval_ms) * 1000, *this, kind, arg);
    }
    return;
  case subscriber_health:
    if (engine_ && arg == instance_) {
      check_subscriber(m);
      clock_.after(static_cast<sim_time>(cfg_.redis_health_interval_ms) * 1000, *this, kind, arg);
    }
    return;
  }
}

// ---------------------------------------------------------------------------------------------
// daemon_port

void sim_daemon::on_connected(const connection_info& c) {
  if (c.kind == channel_kind::link) {
    link_state& l = *links_[c.master];
    if (!engine_ || c.token != l.token || l.st != link_state::state::connecting) {
      net_.close_by_daemon(c.id);
      return;
    }
    l.conn = c.id;
    l.reader.reset();
    l.st = link_state::state::handshaking;
    l.reload_in_progress = false;
    l.ping_outstanding = false;
    l.ping_sent = now(); // the handshake's round trip is the first RTT sample
    // What was sent while no connection was up goes first (batch_writer keeps it).
    if (!l.unsent.empty())
      net_.send(l.conn, std::exchange(l.unsent, {}));
    for (const link_request& step : l.handshake.begin())
      link_send(c.master, step.tag, step.command);
    return;
  }
  subscriber_state& s = *subscribers_[c.master];
  if (!engine_ || c.token != s.token || s.conn != 0) {
    net_.close_by_daemon(c.id);
    return;
  }
  s.conn = c.id;
  s.reader.reset();
  s.ping_outstanding = false;
  s.last_heard = now();
  const wake_subscription subscription = subscribe_request(cfg_);
  s.auth_replies = subscription.auth_replies;
  net_.send(s.conn, subscription.command);
}

void sim_daemon::on_connect_failed(std::size_t master, channel_kind kind, std::uint64_t token) {
  if (!engine_)
    return;
  if (kind == channel_kind::link) {
    link_state& l = *links_[master];
    if (token != l.token || l.st != link_state::state::connecting)
      return;
    l.st = link_state::state::down;
    l.token = retry_later(++l.failures, link_retry, master);
    return;
  }
  subscriber_state& s = *subscribers_[master];
  if (token != s.token || s.conn != 0)
    return;
  s.token = retry_later(++s.failures, subscriber_retry, master);
}

void sim_daemon::on_bytes(const connection_info& c, std::string_view bytes) {
  if (!engine_)
    return;
  if (c.kind == channel_kind::link) {
    if (links_[c.master]->conn == c.id)
      link_bytes(c.master, bytes);
  } else if (subscribers_[c.master]->conn == c.id) {
    subscriber_bytes(c.master, bytes);
  }
}

void sim_daemon::on_closed(const connection_info& c) {
  books_.connection_closed(c.id);
  if (!engine_)
    return;
  if (c.kind == channel_kind::link) {
    if (links_[c.master]->conn == c.id)
      link_lost(c.master);
  } else if (subscribers_[c.master]->conn == c.id) {
    subscriber_lost(c.master);
  }
}

// ---------------------------------------------------------------------------------------------
// The link

void sim_daemon::connect_link(std::size_t master) {
  link_state& l = *links_[master];
  l.st = link_state::state::connecting;
  l.token = next_token_++;
  net_.connect(index_, master, channel_kind::link, l.token);
}

void sim_daemon::link_send(std::size_t master, const request_tag& tag, std::string_view command) {
  link_state& l = *links_[master];
  if (l.pipe.empty())
    l.last_progress = now(); // the stall clock starts with the first request
  l.pipe.push(tag);
  l.sent_at.push_back(clock_.now());
  if (l.conn != 0)
    net_.send(l.conn, std::string(command));
  else
    l.unsent.append(command);
}

void sim_daemon::drop_link(std::size_t master) {
  link_state& l = *links_[master];
  if (l.conn == 0)
    return;
  net_.close_by_daemon(l.conn);
  books_.connection_closed(l.conn);
  link_lost(master);
}

void sim_daemon::link_lost(std::size_t master) {
  if (!engine_)
    return;
  link_state& l = *links_[master];
  const bool was_up = l.st == link_state::state::ok;
  l.st = link_state::state::down;
  l.conn = 0;
  l.unsent.clear();
  l.sent_at.clear();
  // Every outstanding request counts as failed (the fleet hands each to the engine).
  l.pipe.fail_all([&](const request_tag& tag) { engine_->on_failure(master, tag); });
  if (was_up)
    l.failures = 0; // a fresh outage: start again from the shortest backoff
  l.token = retry_later(++l.failures, link_retry, master);
}

void sim_daemon::link_bytes(std::size_t master, std::string_view bytes) {
  link_state& l = *links_[master];
  const std::uint64_t conn = l.conn;
  l.last_progress = now();
  l.reader.feed(bytes);
  for (;;) {
    reply_ptr reply;
    const auto status = l.reader.next(reply);
    if (status == reply_reader::status::need_more)
      return;
    if (status == reply_reader::status::protocol_error || l.pipe.empty()) {
      log_->error("node {}: unparsable or unexpected reply; reconnecting", master);
      drop_link(master);
      return;
    }
    const request_tag tag = l.pipe.pop();
    const sim_time sent_at = l.sent_at.front();
    l.sent_at.pop_front();
    handle_reply(master, tag, *reply, sent_at);
    if (!engine_ || l.conn != conn)
      return; // the reply ended the connection
  }
}

void sim_daemon::handle_reply(std::size_t master, const request_tag& tag, const redisReply& reply,
                              sim_time sent_at) {
  link_state& l = *links_[master];
  // The books keep one record per command run on the connection, in order, as the replies.
  const script_meta* meta = books_.take_meta(l.conn);
  if (tag.kind == request_kind::ping) {
    l.ping_outstanding = false;
    if (const auto time = decode_time(reply)) {
      books_.clock_sample(*this, master, l.conn);
      engine_->on_node_time(master, time->seconds, time->micros, l.ping_sent);
    }
    return;
  }
  if (link_handshake::handles(tag.kind)) {
    handshake_event(master, l.handshake.decode(tag, reply));
    return;
  }
  // As fleet::on_reply: decoded once, here.
  const script_reply decoded = decode_script_reply(tag.kind, reply);
  if (meta != nullptr && meta->which)
    books_.script_answered(*this, master, l.conn, tag, *meta, sent_at);
  log_->debug("daemon {} node {}: reply to {} (op {} generation {})", index_, master,
              static_cast<int>(tag.kind), tag.op, tag.generation);
  engine_->on_reply(master, tag, decoded);
}

void sim_daemon::handshake_event(std::size_t master, const redlockd::handshake_event& event) {
  link_state& l = *links_[master];
  using kind = redlockd::handshake_event::kind;
  switch (event.what) {
  case kind::auth_refused:
  case kind::script_refused:
  case kind::fence_unreadable:
    log_->error("node {}: handshake refused: {}", master, event.detail);
    drop_link(master);
    return;
  case kind::identified: {
    const std::uint64_t high_water = engine_->fence_high_water();
    lock_engine::node_facts facts;
    facts.fence = event.facts.fence;
    facts.max_ttl_ms = event.facts.max_ttl_ms;
    facts.run_id = event.facts.run_id;
    facts.uptime_ms = event.facts.uptime_ms;
    books_.master_identified(*this, master, event.facts, high_water);
    engine_->on_node_connected(master, facts);
    break;
  }
  case kind::storage:
    l.unsafe = event.storage.evicts_keys();
    break;
  case kind::scripts_reloaded:
    l.reload_in_progress = false;
    break;
  case kind::auth_accepted:
  case kind::accepted:
    break;
  }
  if (event.complete) {
    l.st = link_state::state::ok;
    l.failures = 0;
    engine_->on_node_ready(master);
    send_time_probe(master); // as redis_link does once its handshake ends
  }
}

void sim_daemon::send_time_probe(std::size_t master) {
  link_state& l = *links_[master];
  if (l.ping_outstanding || l.st != link_state::state::ok)
    return;
  l.ping_outstanding = true;
  l.ping_sent = now();
  std::string command;
  append_command(command, {"TIME"});
  link_send(master, request_tag{request_kind::ping, 0, 0}, command);
}

void sim_daemon::check_link(std::size_t master) {
  link_state& l = *links_[master];
  if (l.st != link_state::state::ok && l.st != link_state::state::handshaking)
    return;
  const auto now_d = now();
  const auto stall = std::chrono::milliseconds(redis_stall_limit_ms(cfg_));
  if (!l.pipe.empty() && now_d - l.last_progress > stall) {
    log_->warn("node {}: no reply within the stall limit; reconnecting", master);
    drop_link(master);
    return;
  }
  send_time_probe(master);
}

// ---------------------------------------------------------------------------------------------
// The wake subscriber

void sim_daemon::connect_subscriber(std::size_t master) {
  subscriber_state& s = *subscribers_[master];
  s.token = next_token_++;
  net_.connect(index_, master, channel_kind::subscriber, s.token);
}

void sim_daemon::subscriber_lost(std::size_t master) {
  subscriber_state& s = *subscribers_[master];
  if (s.subscribed)
    s.failures = 0; // a fresh outage
  s.subscribed = false;
  s.conn = 0;
  s.token = retry_later(++s.failures, subscriber_retry, master);
}

void sim_daemon::subscriber_bytes(std::size_t master, std::string_view bytes) {
  subscriber_state& s = *subscribers_[master];
  const std::uint64_t conn = s.conn;
  s.last_heard = now();
  s.reader.feed(bytes);
  const std::string channel = register_keys(cfg_.fence_key).wake;
  for (;;) {
    reply_ptr reply;
    const auto status = s.reader.next(reply);
    if (status == reply_reader::status::need_more)
      return;
    bool keep = status == reply_reader::status::reply;
    if (keep) {
      using kind = wake_push::kind;
      const wake_push p = decode_wake_reply(*reply, channel, s.auth_replies > 0);
      switch (p.what) {
      case kind::auth_accepted:
        --s.auth_replies;
        break;
      case kind::refused:
        if (s.subscribed)
          s.ping_outstanding = false;
        else {
          s.failures = 20;
          keep = false;
        }
        break;
      case kind::subscribed:
        s.subscribed = true;
        engine_->on_wake_channel_resumed();
        break;
      case kind::released:
        engine_->on_released(p.text);
        break;
      case kind::pong:
        s.ping_outstanding = false;
        break;
      case kind::other:
        break;
      }
    }
    if (!engine_ || s.conn != conn)
      return;
    if (!keep) {
      net_.close_by_daemon(s.conn);
      books_.connection_closed(s.conn);
      subscriber_lost(master);
      return;
    }
  }
}

void sim_daemon::check_subscriber(std::size_t master) {
  subscriber_state& s = *subscribers_[master];
  if (!s.subscribed)
    return;
  const auto stall = std::chrono::milliseconds(redis_stall_limit_ms(cfg_));
  if (s.ping_outstanding && now() - s.last_heard > stall) {
    net_.close_by_daemon(s.conn);
    books_.connection_closed(s.conn);
    subscriber_lost(master);
    return;
  }
  if (!s.ping_outstanding) {
    s.ping_outstanding = true;
    net_.send(s.conn, wake_ping());
  }
}

} // namespace redlockd::sim
