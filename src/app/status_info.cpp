// INFO and /metrics: read from the links, the engine, the client server and the session
// counters; nothing here changes any of them.
#include "redlockd/app/status_info.hpp"

#include "redlockd/app/fleet.hpp"
#include "redlockd/lock/redlock.hpp"
#include "redlockd/metrics/metrics_server.hpp"
#include "redlockd/server/listener.hpp"

#include <nlohmann/json.hpp>

namespace redlockd {
namespace {

std::string_view state_name(redis_link::state s) {
  switch (s) {
  case redis_link::state::ok:
    return "ok";
  case redis_link::state::down:
    return "down";
  case redis_link::state::connecting:
  case redis_link::state::handshaking:
    return "connecting";
  }
  return "unknown";
}

nlohmann::json counters_json(const daemon_parts& parts) {
  const engine_counters& c = parts.engine.counters();
  return {{"acquired", c.acquired},
          {"busy", c.busy},
          {"noquorum", c.noquorum},
          {"released", c.released},
          {"extended", c.extended},
          {"notheld", c.notheld},
          {"lost", c.lost},
          {"renewed", c.renewed},
          {"delayed", c.delayed},
          {"fence_conflicts", c.fence_conflicts},
          {"handovers", c.handovers},
          {"wakeups", c.wakeups},
          {"restarts", c.restarts},
          {"clock_jumps", c.clock_jumps},
          {"clock_jumps_backward", c.clock_jumps_backward},
          {"key_losses", c.key_losses},
          {"auth_failures", parts.context.auth_failures}};
}

} // namespace

std::string_view node_state(const daemon_parts& parts, std::size_t node) {
  const redis_link& link = parts.masters.link(node);
  const auto status = parts.engine.status_of(node);
  const std::string_view state = state_name(link.current_state());
  if (state == "ok" && status.reason == lock_engine::quarantine_reason::restart)
    return "quarantined:restart";
  if (state == "ok" && status.reason == lock_engine::quarantine_reason::keyloss)
    return "quarantined:keyloss";
  if (state == "ok" && status.reason == lock_engine::quarantine_reason::clock)
    return "quarantined:clock";
  if (state == "ok" && !link.usable())
    return "refused:eviction";
  if (state != "ok" && link.auth_refused())
    return "down:auth";
  return state;
}

std::string info_json(const daemon_parts& parts) {
  nlohmann::json nodes = nlohmann::json::array();
  for (std::size_t i = 0; i < parts.masters.size(); ++i) {
    const redis_link& link = parts.masters.link(i);
    const auto status = parts.engine.status_of(i);
    nodes.push_back({{"address", link.address().to_string()},
                     {"state", std::string(node_state(parts, i))},
                     {"rtt_us", link.rtt_us()},
                     {"quarantined_ms", status.remaining_ms},
                     {"evicts_keys", link.unsafe()},
                     {"wake_subscribed", parts.masters.wake_subscribed(i)}});
  }
  const lock_engine& engine = parts.engine;
  const nlohmann::json doc = {
      {"version", REDLOCKD_VERSION},
      {"uptime_s",
       std::chrono::duration_cast<std::chrono::seconds>(clock_type::now() - parts.started).count()},
      {"quorum", quorum(parts.cfg.nodes.size())},
      {"nodes", nodes},
      {"counters", counters_json(parts)},
      {"fence_high_water", engine.fence_high_water()},
      {"max_ttl_granted", engine.max_ttl_granted()},
      {"clients", parts.server.clients()},
      {"operations_in_flight", engine.operations_in_flight()},
      {"waiters", engine.waiters()},
      {"keep_locks", engine.keep_locks()},
  };
  return doc.dump();
}

metrics_snapshot snapshot(const daemon_parts& parts) {
  lock_engine& engine = parts.engine;
  const engine_counters& c = engine.counters();
  metrics_snapshot s;
  s.version = REDLOCKD_VERSION;
  s.results = parts.context.results;
  s.other_errors = parts.context.errors;
  s.quorum = quorum(parts.cfg.nodes.size());
  s.lost = c.lost;
  s.renewed = c.renewed;
  s.fence_conflicts = c.fence_conflicts;
  s.master_restarts = c.restarts;
  s.master_clock_jumps = c.clock_jumps;
  s.master_key_losses = c.key_losses;
  s.auth_failures = parts.context.auth_failures;
  s.keep_locks = engine.keep_locks();
  s.waiters = engine.waiters();
  s.clients = parts.server.clients();
  s.fence_high_water = engine.fence_high_water();
  s.uptime_seconds = std::chrono::duration<double>(clock_type::now() - parts.started).count();
  for (std::size_t i = 0; i < parts.masters.size(); ++i) {
    const redis_link& link = parts.masters.link(i);
    s.nodes.push_back({link.address().to_string(), link.usable(), link.rtt_us(),
                       engine.status_of(i).remaining_ms, node_state(parts, i)});
  }
  s.acquire_latency = &engine.acquire_latency();
  s.process = read_process_metrics();
  return s;
}

} // namespace redlockd
