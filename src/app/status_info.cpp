// INFO, /metrics and the status page: read from the links, the engine, the client server and the
// session counters; nothing here changes any of them.
#include "redlockd/app/status_info.hpp"

#include "redlockd/app/fleet.hpp"
#include "redlockd/lock/lock_kind.hpp"
#include "redlockd/lock/redlock.hpp"
#include "redlockd/metrics/counter_rates.hpp"
#include "redlockd/metrics/metrics_server.hpp"
#include "redlockd/metrics/status_page.hpp"
#include "redlockd/server/listener.hpp"

#include <nlohmann/json.hpp>

namespace redlockd {
namespace {

// The most locks and waiting resources the status page and /v1/status list (by name).
constexpr std::size_t status_rows = 1000;

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

// Grants by lock kind, named as the kinds table names them (they add up to `acquired`).
nlohmann::json grants_json(const engine_counters& c) {
  nlohmann::json out = nlohmann::json::object();
  for (std::size_t i = 0; i < lock_kind_count; ++i)
    out[std::string(traits_of(static_cast<lock_kind>(i)).name)] = c.granted_by_kind[i];
  return out;
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

namespace {

// The INFO document; /v1/status adds to it.
nlohmann::json info_document(const daemon_parts& parts) {
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
  return {
      {"version", REDLOCKD_VERSION},
      {"uptime_s",
       std::chrono::duration_cast<std::chrono::seconds>(clock_type::now() - parts.started).count()},
      {"quorum", quorum(parts.cfg.nodes.size())},
      {"nodes", nodes},
      {"counters", counters_json(parts)},
      {"grants", grants_json(engine.counters())},
      {"fence_high_water", engine.fence_high_water()},
      {"max_ttl_granted", engine.max_ttl_granted()},
      {"clients", parts.server.clients()},
      {"operations_in_flight", engine.operations_in_flight()},
      {"waiters", engine.waiters()},
      {"keep_locks", engine.keep_locks()},
  };
}

// The locks granted here that are still valid and the waiters per resource, at most
// status_rows of each (by resource name), with their totals.
void add_locks_and_waiters(nlohmann::json& doc, const lock_engine& engine) {
  const clock_type::time_point now = clock_type::now();
  const std::vector<held_lock> held = engine.held_locks();
  nlohmann::json locks = nlohmann::json::array();
  for (std::size_t i = 0; i < held.size() && i < status_rows; ++i) {
    const held_lock& lock = held[i];
    locks.push_back({{"resource", lock.resource},
                     {"kind", lock.kind},
                     {"label", lock.label},
                     {"keep", lock.keep},
                     {"fence", lock.fence},
                     {"valid_ms", ms_until(now, lock.valid_until)}});
  }
  doc["locks"] = std::move(locks);
  doc["locks_total"] = held.size();
  const std::vector<resource_waiters> queues = engine.waiting();
  nlohmann::json waiting = nlohmann::json::array();
  for (std::size_t i = 0; i < queues.size() && i < status_rows; ++i)
    waiting.push_back({{"resource", queues[i].resource}, {"waiters", queues[i].waiters}});
  doc["waiting"] = std::move(waiting);
  doc["waiting_total"] = queues.size();
}

// The counters' rates over the last few seconds and since the start.
nlohmann::json rates_json(const nlohmann::json& counters, double uptime_s, counter_rates& rates) {
  counter_rates::counters current;
  for (const auto& [name, value] : counters.items())
    current.emplace(name, value.get<std::uint64_t>());
  const counter_rates::rates recent = rates.observe(clock_type::now(), current);
  nlohmann::json since_start = nlohmann::json::object();
  for (const auto& [name, value] : current)
    since_start[name] = uptime_s > 0 ? static_cast<double>(value) / uptime_s : 0.0;
  return {{"window_s", recent.window_s},
          {"per_s", recent.per_s},
          {"since_start_per_s", std::move(since_start)}};
}

nlohmann::json status_document(const daemon_parts& parts, counter_rates& rates) {
  nlohmann::json doc = info_document(parts);
  std::size_t voting = 0;
  for (std::size_t i = 0; i < parts.masters.size(); ++i)
    voting += node_state(parts, i) == "ok" ? 1 : 0;
  doc["nodes_voting"] = voting;
  const double uptime_s = std::chrono::duration<double>(clock_type::now() - parts.started).count();
  doc["rates"] = rates_json(doc["counters"], uptime_s, rates);
  add_locks_and_waiters(doc, parts.engine);
  doc["refresh_s"] = status_refresh_s;
  return doc;
}

} // namespace

std::string info_json(const daemon_parts& parts) {
  return info_document(parts).dump();
}

std::string status_json(const daemon_parts& parts, counter_rates& rates) {
  return status_document(parts, rates).dump();
}

std::string status_page(const daemon_parts& parts, counter_rates& rates) {
  return render_status_page(status_document(parts, rates));
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
  s.master_clock_jumps_backward = c.clock_jumps_backward;
  s.auth_failures = parts.context.auth_failures;
  s.delayed = c.delayed;
  s.handovers = c.handovers;
  s.wakeups = c.wakeups;
  for (std::size_t i = 0; i < lock_kind_count; ++i)
    s.grants.emplace_back(traits_of(static_cast<lock_kind>(i)).name, c.granted_by_kind[i]);
  s.keep_locks = engine.keep_locks();
  s.waiters = engine.waiters();
  s.clients = parts.server.clients();
  s.operations_in_flight = engine.operations_in_flight();
  s.fence_high_water = engine.fence_high_water();
  s.max_ttl_granted_ms = engine.max_ttl_granted();
  s.uptime_seconds = std::chrono::duration<double>(clock_type::now() - parts.started).count();
  for (std::size_t i = 0; i < parts.masters.size(); ++i) {
    const redis_link& link = parts.masters.link(i);
    s.nodes.push_back({link.address().to_string(), link.usable(), link.rtt_us(),
                       engine.status_of(i).remaining_ms, node_state(parts, i)});
  }
  s.acquire_latency = &engine.acquire_latency();
  s.acquire_round = &engine.acquire_round_latency();
  s.acquire_wait = &engine.acquire_wait_latency();
  s.process = read_process_metrics();
  return s;
}

} // namespace redlockd
