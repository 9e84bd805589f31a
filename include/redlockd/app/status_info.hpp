// What the daemon reports about itself: the INFO command's JSON document, the /metrics
// snapshot, and each master's state as both show it.
#pragma once

#include "redlockd/app/daemon_parts.hpp"
#include "redlockd/metrics/metrics.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace redlockd {

// The master's state: one of node_states ("ok", "connecting", "down", "down:auth",
// "quarantined:restart", ...).
std::string_view node_state(const daemon_parts& parts, std::size_t node);
// The INFO reply's JSON document.
std::string info_json(const daemon_parts& parts);
// Everything /metrics exposes, read now.
metrics_snapshot snapshot(const daemon_parts& parts);

} // namespace redlockd
