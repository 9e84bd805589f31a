// What a Redis link tells the rest of the daemon: the interface the app layer implements (see
// app/fleet.hpp). The link knows nothing of the engine or the status reader behind it.
#pragma once

#include "redlockd/redis/link_handshake.hpp"
#include "redlockd/resp/pipeline.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>

struct redisReply;

namespace redlockd {

using clock_type = std::chrono::steady_clock; // the same alias as lock_engine.hpp's

class link_events {
 public:
  virtual ~link_events() = default;
  // Node `node` connected and told its facts; it does not take requests until on_ready.
  virtual void on_connected(std::size_t node, const master_facts& facts) = 0;
  // Its handshake is complete: it takes requests now.
  virtual void on_ready(std::size_t node) = 0;
  // It answered a request that is not the link's own (its handshake, reloads and TIME probes).
  virtual void on_reply(std::size_t node, const request_tag& tag, const redisReply& reply) = 0;
  // A request sent to it will never be answered (its connection was lost).
  virtual void on_failure(std::size_t node, const request_tag& tag) = 0;
  // The health probe read its clock; the probe was sent at `sent_at`.
  virtual void on_time_sample(std::size_t node, std::uint64_t seconds, std::uint64_t micros,
                              clock_type::time_point sent_at) = 0;
};

} // namespace redlockd
