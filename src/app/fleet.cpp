// The fleet: the links' events routed to the engine and the status reader, and the engine's
// node_io carried out over the links.
#include "redlockd/app/fleet.hpp"

#include "redlockd/lock/lock_operator.hpp"
#include "redlockd/lock/status_query.hpp"
#include "redlockd/resp/script_calls.hpp"

#include <algorithm>

namespace redlockd {

fleet::fleet(net::io_context& io, const config& cfg, std::shared_ptr<spdlog::logger> log)
    : engine_timer_(io), status_timer_(io), operations_timer_(io) {
  for (std::size_t i = 0; i < cfg.nodes.size(); ++i) {
    links_.push_back(std::make_unique<redis_link>(io, i, cfg.nodes[i], cfg, *this, log));
    wakes_.push_back(std::make_unique<wake_subscriber>(io, i, cfg.nodes[i], cfg, *this, log));
  }
}

void fleet::use_tls(std::size_t node, const std::shared_ptr<tls_context>& context,
                    const std::string& server_name) {
  links_[node]->use_tls(context, server_name);
  wakes_[node]->use_tls(context, server_name);
}

void fleet::route_to(lock_engine& engine, status_reader& status, lock_operator& operations) {
  engine_ = &engine;
  status_ = &status;
  operations_ = &operations;
}

namespace {
bool for_operations(const request_tag& tag) {
  return tag.kind == request_kind::break_hold || tag.kind == request_kind::list_step;
}
} // namespace

void fleet::start() {
  for (auto& link : links_)
    link->start();
  for (auto& wake : wakes_)
    wake->start();
}

void fleet::stop() {
  for (auto& link : links_)
    link->stop();
  for (auto& wake : wakes_)
    wake->stop();
  engine_timer_.cancel();
  status_timer_.cancel();
  operations_timer_.cancel();
}

std::size_t fleet::usable_count() const {
  return static_cast<std::size_t>(
      std::count_if(links_.begin(), links_.end(), [](const auto& link) { return link->usable(); }));
}

bool fleet::idle() const {
  return std::all_of(links_.begin(), links_.end(), [](const auto& link) { return link->idle(); });
}

void fleet::arm_timer(clock_type::time_point when) {
  engine_timer_.expires_at(when); // cancels the earlier wait, whose handler then does nothing
  engine_timer_.async_wait([this](const error_code_t& ec) {
    if (!ec)
      engine_->on_timer();
  });
}

void fleet::arm_status_timer(clock_type::time_point when) {
  status_timer_.expires_at(when);
  status_timer_.async_wait([this](const error_code_t& ec) {
    if (!ec)
      status_->on_timer();
  });
}

void fleet::arm_operations_timer(clock_type::time_point when) {
  operations_timer_.expires_at(when);
  operations_timer_.async_wait([this](const error_code_t& ec) {
    if (!ec)
      operations_->on_timer();
  });
}

void fleet::on_connected(std::size_t node, const master_facts& facts) {
  lock_engine::node_facts engine_facts;
  engine_facts.fence = facts.fence;
  engine_facts.max_ttl_ms = facts.max_ttl_ms;
  engine_facts.run_id = facts.run_id; // the engine copies what it keeps
  engine_facts.uptime_ms = facts.uptime_ms;
  engine_->on_node_connected(node, engine_facts);
}

void fleet::on_ready(std::size_t node) {
  engine_->on_node_ready(node);
}

void fleet::on_reply(std::size_t node, const request_tag& tag, const redisReply& reply) {
  // Decoded once, here: the engine and the status reader see typed replies only.
  const script_reply decoded = decode_script_reply(tag.kind, reply);
  if (tag.kind == request_kind::status)
    status_->on_reply(node, tag, decoded);
  else if (for_operations(tag))
    operations_->on_reply(node, tag, decoded);
  else
    engine_->on_reply(node, tag, decoded);
}

void fleet::on_failure(std::size_t node, const request_tag& tag) {
  if (tag.kind == request_kind::status)
    status_->on_failure(node, tag);
  else if (for_operations(tag))
    operations_->on_failure(node, tag);
  else
    engine_->on_failure(node, tag);
}

void fleet::on_time_sample(std::size_t node, std::uint64_t seconds, std::uint64_t micros,
                           clock_type::time_point sent_at) {
  engine_->on_node_time(node, seconds, micros, sent_at);
}

void fleet::on_released(std::size_t, std::string_view key) {
  engine_->on_released(key);
}

void fleet::on_wake_subscribed(std::size_t) {
  engine_->on_wake_channel_resumed();
}

} // namespace redlockd
