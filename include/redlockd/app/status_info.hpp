// What the daemon reports about itself: the INFO command's JSON document, the /metrics
// snapshot, the status page and its JSON (/v1/status), and each master's state as they show it.
#pragma once

#include "redlockd/app/daemon_parts.hpp"
#include "redlockd/metrics/metrics.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace redlockd {

class counter_rates;

// The master's state: one of node_states ("ok", "connecting", "down", "down:auth",
// "quarantined:restart", ...).
std::string_view node_state(const daemon_parts& parts, std::size_t node);
// The INFO reply's JSON document.
std::string info_json(const daemon_parts& parts);
// Everything /metrics exposes, read now.
metrics_snapshot snapshot(const daemon_parts& parts);
// GET /v1/status: INFO's document plus the counters' rates (kept in `rates`), the locks granted
// here that are still valid and the waiters per resource; never an owner.
std::string status_json(const daemon_parts& parts, counter_rates& rates);
// GET /: the same as an HTML page.
std::string status_page(const daemon_parts& parts, counter_rates& rates);

} // namespace redlockd
