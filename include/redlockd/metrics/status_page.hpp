// The status page (GET / on the metrics port): one HTML document rendered on the server from the
// same JSON document as GET /v1/status, with no script, refreshing itself. No I/O.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>

namespace redlockd {

// Seconds between the page's own refreshes (<meta http-equiv="refresh">).
inline constexpr int status_refresh_s = 5;

// The page for a /v1/status document: masters, the daemon's figures, counters and their rates,
// the locks granted here that are still valid, the waiters per resource. Every column of the
// locks table comes from the fields of each lock in the document.
std::string render_status_page(const nlohmann::json& status);

// Text for HTML element content and attribute values: & < > " ' escaped.
std::string escape_html(std::string_view text);
// A duration for people: "850 ms", "29.1 s", "4 min 05 s", "3 h 02 min", "2 d 04 h".
std::string duration_text(double ms);

} // namespace redlockd
