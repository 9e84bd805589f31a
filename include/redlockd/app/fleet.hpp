// The daemon's Redis masters as the engine sees them: owns one redis_link per node, gives the
// engine and the status reader their node_io (send, usable, reload, the engine's timer), and
// routes what the links report (link_events) back to them.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/lock/lock_engine.hpp"
#include "redlockd/net/net.hpp"
#include "redlockd/redis/link_events.hpp"
#include "redlockd/redis/redis_link.hpp"

#include <memory>
#include <vector>

namespace spdlog {
class logger;
}

namespace redlockd {

class status_reader;

class fleet final : public node_io, public link_events {
 public:
  fleet(net::io_context& io, const config& cfg, std::shared_ptr<spdlog::logger> log);

  // Where replies go: STATUS reads to `status`, everything else to `engine`. Call once, before
  // start(); both outlive the fleet's links.
  void route_to(lock_engine& engine, status_reader& status);
  void start();
  // Closes every link and cancels the timers.
  void stop();

  std::size_t size() const { return links_.size(); }
  const redis_link& link(std::size_t node) const { return *links_[node]; }
  redis_link& link(std::size_t node) { return *links_[node]; }
  // Links that take requests now.
  std::size_t usable_count() const;
  // Nothing queued or unanswered on any link.
  bool idle() const;
  // Asks for status_reader::on_timer() at `when` (the status reader's arm function).
  void arm_status_timer(clock_type::time_point when);

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

 private:
  std::vector<std::unique_ptr<redis_link>> links_;
  net::steady_timer engine_timer_;
  net::steady_timer status_timer_;
  lock_engine* engine_ = nullptr;   // set by route_to(), before any link starts
  status_reader* status_ = nullptr; // likewise
};

} // namespace redlockd
