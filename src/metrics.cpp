#include "redlockd/metrics.hpp"

#include <cstdio>

namespace redlockd {
namespace {

// Shortest text that reads back as the same double (Prometheus accepts any float syntax).
std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  // Prefer the short form when it is exact.
  char shorter[32];
  std::snprintf(shorter, sizeof shorter, "%g", value);
  double back = 0;
  std::sscanf(shorter, "%lf", &back);
  return back == value ? shorter : text;
}

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void sample(std::string& out, std::string_view name, std::string_view labels,
            std::string_view value) {
  out.append(name);
  if (!labels.empty())
    out.append("{").append(labels).append("}");
  out.append(" ").append(value).append("\n");
}

std::string label(std::string_view key, std::string_view value) {
  return std::string(key) + "=\"" + escape_label(value) + "\"";
}

} // namespace

void latency_histogram::record(std::chrono::nanoseconds elapsed) {
  const double seconds = std::chrono::duration<double>(elapsed).count();
  std::size_t i = 0;
  while (i < bounds.size() && seconds > bounds[i])
    ++i;
  ++buckets_[i];
  sum_seconds_ += seconds;
  ++count_;
}

std::string escape_label(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out.append("\\\\");
    else if (c == '"')
      out.append("\\\"");
    else if (c == '\n')
      out.append("\\n");
    else
      out.push_back(c);
  }
  return out;
}

std::string render_metrics(const metrics_snapshot& s) {
  std::string out;
  family(out, "redlockd_results_total", "counter",
         "Requests answered, by outcome (ok covers LOCK, UNLOCK and EXTEND successes).");
  sample(out, "redlockd_results_total", label("outcome", "ok"), std::to_string(s.results_ok));
  sample(out, "redlockd_results_total", label("outcome", "busy"), std::to_string(s.results_busy));
  sample(out, "redlockd_results_total", label("outcome", "noquorum"),
         std::to_string(s.results_noquorum));
  sample(out, "redlockd_results_total", label("outcome", "notheld"),
         std::to_string(s.results_notheld));
  sample(out, "redlockd_results_total", label("outcome", "error"), std::to_string(s.results_error));

  family(out, "redlockd_lost_total", "counter", "KEEP locks that could not be renewed (LOST).");
  sample(out, "redlockd_lost_total", "", std::to_string(s.lost));
  family(out, "redlockd_renewals_total", "counter", "KEEP renewals that reached a quorum.");
  sample(out, "redlockd_renewals_total", "", std::to_string(s.renewed));
  family(out, "redlockd_fence_conflicts_total", "counter",
         "Acquisitions that needed a second fencing round.");
  sample(out, "redlockd_fence_conflicts_total", "", std::to_string(s.fence_conflicts));
  family(out, "redlockd_master_faults_total", "counter",
         "Master faults detected, each of which quarantined the master.");
  sample(out, "redlockd_master_faults_total", label("kind", "restart"),
         std::to_string(s.master_restarts));
  sample(out, "redlockd_master_faults_total", label("kind", "clock_jump"),
         std::to_string(s.master_clock_jumps));
  sample(out, "redlockd_master_faults_total", label("kind", "key_loss"),
         std::to_string(s.master_key_losses));
  family(out, "redlockd_auth_failures_total", "counter",
         "AUTH attempts refused (wrong client secret).");
  sample(out, "redlockd_auth_failures_total", "", std::to_string(s.auth_failures));

  if (s.acquire_latency != nullptr) {
    const latency_histogram& h = *s.acquire_latency;
    family(out, "redlockd_acquire_duration_seconds", "histogram",
           "Time from a LOCK request to its reply, WAIT included.");
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < latency_histogram::bounds.size(); ++i) {
      cumulative += h.buckets()[i];
      sample(out, "redlockd_acquire_duration_seconds_bucket",
             label("le", number(latency_histogram::bounds[i])), std::to_string(cumulative));
    }
    cumulative += h.buckets().back();
    sample(out, "redlockd_acquire_duration_seconds_bucket", label("le", "+Inf"),
           std::to_string(cumulative));
    sample(out, "redlockd_acquire_duration_seconds_sum", "", number(h.sum_seconds()));
    sample(out, "redlockd_acquire_duration_seconds_count", "", std::to_string(h.count()));
  }

  family(out, "redlockd_node_up", "gauge", "1 when the master is connected and usable.");
  for (const auto& n : s.nodes)
    sample(out, "redlockd_node_up", label("node", n.address), n.up ? "1" : "0");
  family(out, "redlockd_node_rtt_seconds", "gauge", "Last measured round trip to the master.");
  for (const auto& n : s.nodes)
    if (n.rtt_us >= 0)
      sample(out, "redlockd_node_rtt_seconds", label("node", n.address),
             number(static_cast<double>(n.rtt_us) / 1e6));
  family(out, "redlockd_node_quarantine_seconds", "gauge",
         "Time left before the master's votes count again (0: not quarantined).");
  for (const auto& n : s.nodes)
    sample(out, "redlockd_node_quarantine_seconds", label("node", n.address),
           number(static_cast<double>(n.quarantined_ms) / 1e3));

  family(out, "redlockd_keep_locks", "gauge", "KEEP locks held and renewed by the daemon.");
  sample(out, "redlockd_keep_locks", "", std::to_string(s.keep_locks));
  family(out, "redlockd_waiters", "gauge", "LOCK ... WAIT requests queued.");
  sample(out, "redlockd_waiters", "", std::to_string(s.waiters));
  family(out, "redlockd_clients", "gauge", "Client connections.");
  sample(out, "redlockd_clients", "", std::to_string(s.clients));
  family(out, "redlockd_fence_high_water", "gauge", "Highest fencing token seen or handed out.");
  sample(out, "redlockd_fence_high_water", "", std::to_string(s.fence_high_water));
  family(out, "redlockd_uptime_seconds", "gauge", "Seconds since the daemon started.");
  sample(out, "redlockd_uptime_seconds", "", number(s.uptime_seconds));
  return out;
}

} // namespace redlockd
