// The status page: the /v1/status document as one HTML page. Plain HTML and CSS, no script; on
// a narrow window every table row becomes a block of "heading value" lines. No I/O.
#include "redlockd/metrics/status_page.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <string>

namespace redlockd {
namespace {

// How a cell shows its value.
enum class format { text, number, duration_ms, yes_no };

struct column {
  std::string_view key;     // the field of each row's object in the document
  std::string_view heading; // the table heading, and the label on a narrow window
  format how;
};

// The locks table: one column per field of a lock in /v1/status (never an owner).
constexpr std::array<column, 6> lock_columns = {{{"resource", "Resource", format::text},
                                                 {"kind", "Kind", format::text},
                                                 {"label", "Label", format::text},
                                                 {"valid_ms", "Time left", format::duration_ms},
                                                 {"fence", "Fence", format::number},
                                                 {"keep", "KEEP", format::yes_no}}};
constexpr std::array<column, 2> waiting_columns = {
    {{"resource", "Resource", format::text}, {"waiters", "Waiters", format::number}}};

constexpr std::string_view style = R"(
:root { color-scheme: light dark; font-family: system-ui, sans-serif; }
body { margin: 0 auto; max-width: 72rem; padding: 1rem; line-height: 1.4; }
h1 { font-size: 1.4rem; margin: 0; }
h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
p { margin: .25rem 0; }
.muted { opacity: .7; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .3rem .6rem; border-bottom: 1px solid #8886;
         white-space: nowrap; vertical-align: top; }
td.resource, td.label, td.address { white-space: normal; overflow-wrap: anywhere; }
th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #1a7f37; } .warn { color: #b35900; } .bad { color: #d1242f; }
dl { display: grid; grid-template-columns: repeat(auto-fill, minmax(14rem, 1fr));
     gap: .25rem 1.5rem; margin: .5rem 0; }
dl div { display: flex; justify-content: space-between; gap: .5rem;
         border-bottom: 1px solid #8883; }
dt { opacity: .75; } dd { margin: 0; font-weight: 600; font-variant-numeric: tabular-nums; }
@media (max-width: 40rem) {
  table, tbody, tr, td { display: block; }
  thead { display: none; }
  tr { border-bottom: 1px solid #8886; padding: .4rem 0; }
  td, td.num { border: 0; padding: .1rem 0; display: flex; justify-content: space-between;
               gap: 1rem; text-align: right; }
  td::before { content: attr(data-label); font-weight: 600; text-align: left;
               flex: none; white-space: nowrap; color: CanvasText; }
}
)";

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string integer_text(const nlohmann::json& value) {
  if (value.is_number_unsigned())
    return std::to_string(value.get<std::uint64_t>());
  if (value.is_number_integer())
    return std::to_string(value.get<std::int64_t>());
  if (value.is_number())
    return fixed(value.get<double>(), 0);
  return "";
}

std::string cell_text(const nlohmann::json& value, format how) {
  if (value.is_null())
    return "";
  switch (how) {
  case format::text:
    return value.is_string() ? value.get<std::string>() : value.dump();
  case format::number:
    return integer_text(value);
  case format::duration_ms:
    return value.is_number() ? duration_text(value.get<double>()) : "";
  case format::yes_no:
    return value.is_boolean() && value.get<bool>() ? "yes" : "no";
  }
  return "";
}

void cell(std::string& out, std::string_view heading, std::string_view text, bool numeric,
          std::string_view css_class = {}) {
  out.append("<td data-label=\"").append(escape_html(heading)).append("\"");
  std::string classes(numeric ? "num" : "");
  if (!css_class.empty())
    classes.append(classes.empty() ? "" : " ").append(css_class);
  if (!classes.empty())
    out.append(" class=\"").append(classes).append("\"");
  out.append(">").append(text.empty() ? "&#8212;" : escape_html(text)).append("</td>");
}

template <std::size_t N>
void table_head(std::string& out, std::string_view id, const std::array<column, N>& columns) {
  out.append("<table id=\"").append(id).append("\"><thead><tr>");
  for (const column& c : columns)
    out.append(c.how == format::text ? "<th>" : "<th class=\"num\">")
        .append(escape_html(c.heading))
        .append("</th>");
  out.append("</tr></thead><tbody>");
}

// A table of the document's array `rows`, one column per entry of `columns`.
template <std::size_t N>
void rows_table(std::string& out, std::string_view id, const nlohmann::json& rows,
                const std::array<column, N>& columns) {
  table_head(out, id, columns);
  for (const auto& row : rows) {
    out.append("<tr>");
    for (const column& c : columns) {
      const auto field = row.find(c.key);
      cell(out, c.heading, field == row.end() ? "" : cell_text(*field, c.how),
           c.how != format::text, c.key);
    }
    out.append("</tr>");
  }
  out.append("</tbody></table>");
}

std::string_view state_class(std::string_view state) {
  if (state == "ok")
    return "ok";
  if (state.starts_with("down") || state.starts_with("refused"))
    return "bad";
  return "warn";
}

void masters_section(std::string& out, const nlohmann::json& doc) {
  const nlohmann::json& nodes = doc.value("nodes", nlohmann::json::array());
  out.append("<section><h2>Masters</h2><p>")
      .append(integer_text(doc.value("nodes_voting", nlohmann::json())))
      .append(" of ")
      .append(std::to_string(nodes.size()))
      .append(" vote; a lock needs ")
      .append(integer_text(doc.value("quorum", nlohmann::json())))
      .append(".</p>");
  out.append("<table id=\"masters\"><thead><tr><th>Address</th><th>State</th>"
             "<th class=\"num\">Round trip</th><th class=\"num\">Quarantine left</th>"
             "<th>Wake channel</th></tr></thead><tbody>");
  for (const auto& node : nodes) {
    const std::string state = node.value("state", "");
    const std::int64_t rtt_us = node.value("rtt_us", std::int64_t{-1});
    const std::int64_t quarantined_ms = node.value("quarantined_ms", std::int64_t{0});
    out.append("<tr>");
    cell(out, "Address", node.value("address", ""), false, "address");
    cell(out, "State", state, false, std::string("state ").append(state_class(state)));
    cell(out, "Round trip", rtt_us < 0 ? "" : duration_text(static_cast<double>(rtt_us) / 1e3),
         true, "rtt");
    cell(out, "Quarantine left",
         quarantined_ms > 0 ? duration_text(static_cast<double>(quarantined_ms)) : "", true,
         "quarantine");
    cell(out, "Wake channel", node.value("wake_subscribed", false) ? "subscribed" : "no", false,
         "wake");
    out.append("</tr>");
  }
  out.append("</tbody></table></section>");
}

void fact(std::string& out, std::string_view id, std::string_view name, std::string_view value) {
  out.append("<div id=\"")
      .append(id)
      .append("\"><dt>")
      .append(escape_html(name))
      .append("</dt><dd>")
      .append(escape_html(value))
      .append("</dd></div>");
}

void daemon_section(std::string& out, const nlohmann::json& doc) {
  const auto number = [&](const char* key) {
    return integer_text(doc.value(key, nlohmann::json()));
  };
  out.append("<section><h2>Daemon</h2><dl>");
  fact(out, "clients", "Clients", number("clients"));
  fact(out, "waiters", "Waiters", number("waiters"));
  fact(out, "keep-locks", "KEEP locks", number("keep_locks"));
  fact(out, "in-flight", "Requests on the masters", number("operations_in_flight"));
  fact(out, "fence-high-water", "Fence high water", number("fence_high_water"));
  fact(out, "max-ttl", "Longest TTL granted", duration_text(doc.value("max_ttl_granted", 0.0)));
  out.append("</dl></section>");
}

void counters_section(std::string& out, const nlohmann::json& doc) {
  const nlohmann::json& counters = doc.value("counters", nlohmann::json::object());
  const nlohmann::json& rates = doc.value("rates", nlohmann::json::object());
  const nlohmann::json& recent = rates.value("per_s", nlohmann::json::object());
  const nlohmann::json& since_start = rates.value("since_start_per_s", nlohmann::json::object());
  const std::string window = duration_text(rates.value("window_s", 0.0) * 1e3);
  out.append("<section><h2>Counters</h2>");
  out.append("<table id=\"counters\"><thead><tr><th>Counter</th><th class=\"num\">Since start</th>"
             "<th class=\"num\">Per second, last ")
      .append(escape_html(window))
      .append("</th><th class=\"num\">Per second since start</th></tr></thead><tbody>");
  const auto rate = [](const nlohmann::json& per_s, const std::string& name) {
    const auto it = per_s.find(name);
    return it == per_s.end() || !it->is_number() ? std::string() : fixed(it->get<double>(), 2);
  };
  for (const auto& [name, value] : counters.items()) {
    out.append("<tr id=\"counter-").append(escape_html(name)).append("\">");
    cell(out, "Counter", name, false, "name");
    cell(out, "Since start", integer_text(value), true, "total");
    cell(out, "Per second, last " + window, rate(recent, name), true, "recent");
    cell(out, "Per second since start", rate(since_start, name), true, "since-start");
    out.append("</tr>");
  }
  out.append("</tbody></table></section>");
}

// A section for one of the document's lists, said empty or cut short when it is.
template <std::size_t N>
void list_section(std::string& out, const nlohmann::json& doc, std::string_view id,
                  std::string_view title, std::string_view total_key, std::string_view empty,
                  const std::array<column, N>& columns) {
  const nlohmann::json& rows = doc.value(std::string(id), nlohmann::json::array());
  const std::uint64_t total = doc.value(std::string(total_key), std::uint64_t{rows.size()});
  out.append("<section><h2>").append(escape_html(title)).append(" (");
  out.append(std::to_string(total)).append(")</h2>");
  if (rows.empty()) {
    out.append("<p class=\"muted\" id=\"").append(id).append("-empty\">");
    out.append(escape_html(empty)).append("</p></section>");
    return;
  }
  if (rows.size() < total)
    out.append("<p class=\"muted\">The first ")
        .append(std::to_string(rows.size()))
        .append(" by name; /v1/status lists the same.</p>");
  rows_table(out, id, rows, columns);
  out.append("</section>");
}

} // namespace

std::string escape_html(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
    case '&':
      out.append("&amp;");
      break;
    case '<':
      out.append("&lt;");
      break;
    case '>':
      out.append("&gt;");
      break;
    case '"':
      out.append("&quot;");
      break;
    case '\'':
      out.append("&#39;");
      break;
    default:
      out.push_back(c);
    }
  }
  return out;
}

std::string duration_text(double ms) {
  if (!(ms > 0))
    return "0 ms";
  if (ms < 1000)
    return fixed(ms, ms < 10 ? 2 : 0) + " ms";
  const double seconds = ms / 1000;
  if (seconds < 60)
    return fixed(seconds, 1) + " s";
  const auto whole = static_cast<std::uint64_t>(std::floor(seconds));
  const auto two = [](std::uint64_t n) { return (n < 10 ? "0" : "") + std::to_string(n); };
  if (whole < 3600)
    return std::to_string(whole / 60) + " min " + two(whole % 60) + " s";
  if (whole < 86400)
    return std::to_string(whole / 3600) + " h " + two(whole / 60 % 60) + " min";
  return std::to_string(whole / 86400) + " d " + two(whole / 3600 % 24) + " h";
}

std::string render_status_page(const nlohmann::json& doc) {
  std::string out;
  out.reserve(8192);
  out.append("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
             "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
             "<meta http-equiv=\"refresh\" content=\"")
      .append(std::to_string(status_refresh_s))
      .append("\"><title>redlockd status</title><style>")
      .append(style)
      .append("</style></head><body><header><h1>redlockd ")
      .append(escape_html(doc.value("version", "")))
      .append("</h1><p class=\"muted\">Up ")
      .append(duration_text(doc.value("uptime_s", 0.0) * 1e3))
      .append(". This page refreshes every ")
      .append(std::to_string(status_refresh_s))
      .append(" s and never shows an owner.</p></header>");
  masters_section(out, doc);
  daemon_section(out, doc);
  list_section(out, doc, "locks", "Locks granted here and still valid", "locks_total",
               "No lock granted through this daemon is valid now.", lock_columns);
  list_section(out, doc, "waiting", "Waiters per resource", "waiting_total",
               "No LOCK ... WAIT is queued on this daemon.", waiting_columns);
  counters_section(out, doc);
  out.append("<footer><p class=\"muted\">The same as JSON: <a href=\"/v1/status\">/v1/status</a>"
             " &#183; Prometheus: <a href=\"/metrics\">/metrics</a> &#183; "
             "<a href=\"/healthz\">/healthz</a></p></footer></body></html>\n");
  return out;
}

} // namespace redlockd
