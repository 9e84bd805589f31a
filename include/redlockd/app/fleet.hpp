// The daemon's Redis masters as the engine sees them: owns one redis_link per node, gives the
// engine and the status reader their node_io (send, usable, reload, the engine's timer), and
// routes what the links report (link_events) back to them.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/lock/lock_engine.hpp"
#include "redlockd/net/net.hpp"
#include "redlockd/redis/link_events.hpp"
#include "redlockd/redis/redis_link.hpp"
#include "redlockd/redis/wake_subscriber.hpp"

#include <memory>
#include <vector>

namespace spdlog {
class logger;
}

namespace redlockd {

class status_reader;
class lock_operator;

class fleet final : public node_io, public link_events, public wake_events {
 public:
  fleet(net::io_context& io, const config& cfg, std::shared_ptr<spdlog::logger> log);

  // Where replies go: STATUS reads to `status`, LIST and BREAK to `operations`, everything else
  // to `engine`. Call once, before start(); all outlive the fleet's links.
  void route_to(lock_engine& engine, status_reader& status, lock_operator& operations);
  void start();
  // Closes every link and cancels the timers.
  void stop();

  std::size_t size() const { return links_.size(); }
  const redis_link& link(std::size_t node) const { return *links_[node]; }
  // Both connections to a master (the link and the wake subscriber) use TLS, verified against
  // `server_name` (before start()).
  void use_tls(std::size_t node, const std::shared_ptr<tls_context>& context,
               const std::string& server_name);
  // Masters whose wake channel is subscribed now.
  bool wake_subscribed(std::size_t node) const { return wakes_[node]->subscribed(); }
  // Links that take requests now.
  std::size_t usable_count() const;
  // Nothing queued or unanswered on any link.
  bool idle() const;
  // Asks for status_reader::on_timer() at `when` (the status reader's arm function).
  void arm_status_timer(clock_type::time_point when);
  // Asks for lock_operator::on_timer() at `when`.
  void arm_operations_timer(clock_type::time_point when);

  // node_io, for the engine and the status reader.
  bool usable(std::size_t node) const override { return links_[node]->usable(); }
  void send(std::size_t node, const request_tag& tag, std::string_view command) override {
    links_[node]->send(tag, command);
  }
  void reload_scripts(std::size_t node) override { links_[node]->reload_scripts(); }
  void arm_timer(clock_type::time_point when) override;

  // link_events, from the links.
  void on_connected(std::size_t node, const master_facts& facts) override;
  void on_ready(std::size_t node) override;
  void on_reply(std::size_t node, const request_tag& tag, const redisReply& reply) override;
  void on_failure(std::size_t node, const request_tag& tag) override;
  void on_time_sample(std::size_t node, std::uint64_t seconds, std::uint64_t micros,
                      clock_type::time_point sent_at) override;

  // wake_events, from the subscribers.
  void on_released(std::size_t node, std::string_view key) override;
  void on_wake_subscribed(std::size_t node) override;

 private:
  std::vector<std::unique_ptr<redis_link>> links_;
  std::vector<std::unique_ptr<wake_subscriber>> wakes_;
  net::steady_timer engine_timer_;
  net::steady_timer status_timer_;
  net::steady_timer operations_timer_;
  lock_engine* engine_ = nullptr;   // set by route_to(), before any link starts
  status_reader* status_ = nullptr; // likewise
  lock_operator* operations_ = nullptr;
};

} // namespace redlockd
