// /metrics in the Prometheus text format: the histograms, the result counters, and rendering a
// metrics_snapshot family by family. No I/O.
#include "redlockd/metrics/metrics.hpp"

#include <array>
#include <cstdint>
#include <cstdio>
#include <utility>

namespace redlockd {
namespace {

// Shortest text that reads back as the same double (Prometheus accepts any float syntax).
std::string number(double value) {
  // Integral values (byte counts, descriptors, epoch seconds) as integers, not as 8e+06.
  if (value == static_cast<double>(static_cast<std::int64_t>(value)) &&
      value < 9007199254740992.0 && value > -9007199254740992.0)
    return std::to_string(static_cast<std::int64_t>(value));
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

// redlockd_build_info and redlockd_results_total.
void render_results(std::string& out, const metrics_snapshot& s) {
  family(out, "redlockd_build_info", "gauge", "Always 1; the version of the running daemon.");
  sample(out, "redlockd_build_info", label("version", s.version), "1");

  family(out, "redlockd_results_total", "counter",
         "Replies to LOCK, UNLOCK and EXTEND by op and outcome; op=\"other\" counts ERR replies "
         "to anything else (bad requests, refused AUTH).");
  constexpr std::array<std::pair<result_op, std::string_view>, 3> ops = {
      {{result_op::lock, "lock"}, {result_op::unlock, "unlock"}, {result_op::extend, "extend"}}};
  constexpr std::array<std::pair<result_outcome, std::string_view>, 5> outcomes = {
      {{result_outcome::ok, "ok"},
       {result_outcome::busy, "busy"},
       {result_outcome::noquorum, "noquorum"},
       {result_outcome::notheld, "notheld"},
       {result_outcome::error, "error"}}};
  for (const auto& [op, op_name] : ops)
    for (const auto& [outcome, outcome_name] : outcomes) {
      // LOCK cannot be NOTHELD, UNLOCK and EXTEND cannot be BUSY: no series that is always 0.
      if ((op == result_op::lock && outcome == result_outcome::notheld) ||
          (op != result_op::lock && outcome == result_outcome::busy))
        continue;
      sample(out, "redlockd_results_total",
             label("op", op_name) + "," + label("outcome", outcome_name),
             std::to_string(s.results.get(op, outcome)));
    }
  sample(out, "redlockd_results_total", label("op", "other") + "," + label("outcome", "error"),
         std::to_string(s.other_errors));
}

// The engine's event counters: LOST, renewals, fence conflicts, master faults and backward clock
// jumps, refused AUTH, lock-delay refusals, hand-overs and wake-ups.
void render_engine_counters(std::string& out, const metrics_snapshot& s) {
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
  family(out, "redlockd_master_clock_jumps_backward_total", "counter",
         "Backward clock jumps of a master beyond clock_jump_ms: logged, not quarantined.");
  sample(out, "redlockd_master_clock_jumps_backward_total", "",
         std::to_string(s.master_clock_jumps_backward));
  family(out, "redlockd_auth_failures_total", "counter",
         "AUTH attempts refused (wrong client secret).");
  sample(out, "redlockd_auth_failures_total", "", std::to_string(s.auth_failures));
  family(out, "redlockd_lock_delay_refusals_total", "counter",
         "LOCK attempts refused by lock-delay (a WAIT counts each refused attempt).");
  sample(out, "redlockd_lock_delay_refusals_total", "", std::to_string(s.delayed));
  family(out, "redlockd_handovers_total", "counter",
         "UNLOCKs that handed the lock to a waiter's round.");
  sample(out, "redlockd_handovers_total", "", std::to_string(s.handovers));
  family(out, "redlockd_wakeups_total", "counter",
         "Head waiters woken by a release a master published (through any daemon).");
  sample(out, "redlockd_wakeups_total", "", std::to_string(s.wakeups));
  family(out, "redlockd_grants_total", "counter",
         "LOCK and MLOCK grants by lock kind (exclusive, shared, permit, multi).");
  for (const auto& [kind, count] : s.grants)
    sample(out, "redlockd_grants_total", "kind=\"" + std::string(kind) + "\"",
           std::to_string(count));
}

// A histogram family: cumulative buckets, then sum and count.
void render_histogram(std::string& out, std::string_view name, std::string_view help,
                      const latency_histogram& h) {
  family(out, name, "histogram", help);
  const std::string bucket = std::string(name) + "_bucket";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < latency_histogram::bounds.size(); ++i) {
    cumulative += h.buckets()[i];
    sample(out, bucket, label("le", number(latency_histogram::bounds[i])),
           std::to_string(cumulative));
  }
  cumulative += h.buckets().back();
  sample(out, bucket, label("le", "+Inf"), std::to_string(cumulative));
  sample(out, std::string(name) + "_sum", "", number(h.sum_seconds()));
  sample(out, std::string(name) + "_count", "", std::to_string(h.count()));
}

// The LOCK latencies: what the client sees, and its two parts (the round and the wait).
void render_acquire_latencies(std::string& out, const metrics_snapshot& s) {
  if (s.acquire_latency != nullptr)
    render_histogram(out, "redlockd_acquire_duration_seconds",
                     "Time from a LOCK request to its reply, WAIT included.", *s.acquire_latency);
  if (s.acquire_round != nullptr)
    render_histogram(out, "redlockd_acquire_round_duration_seconds",
                     "Time from the start of a LOCK attempt to its decision (granted, BUSY or "
                     "NOQUORUM), fencing rounds included: the masters' work, one per attempt.",
                     *s.acquire_round);
  if (s.acquire_wait != nullptr)
    render_histogram(out, "redlockd_acquire_wait_duration_seconds",
                     "Time from a granted LOCK's request to the start of the attempt that won: "
                     "queueing under WAIT (0 without one), one per granted LOCK.",
                     *s.acquire_wait);
}

// Per master: up, round trip, state and quarantine; and the quorum against the masters voting.
void render_nodes(std::string& out, const metrics_snapshot& s) {
  family(out, "redlockd_node_up", "gauge", "1 when the master is connected and usable.");
  for (const auto& n : s.nodes)
    sample(out, "redlockd_node_up", label("node", n.address), n.up ? "1" : "0");
  family(out, "redlockd_node_rtt_seconds", "gauge", "Last measured round trip to the master.");
  for (const auto& n : s.nodes)
    if (n.rtt_us >= 0)
      sample(out, "redlockd_node_rtt_seconds", label("node", n.address),
             number(static_cast<double>(n.rtt_us) / 1e6));
  family(out, "redlockd_node_state", "gauge",
         "1 for the master's current state (as in INFO), 0 for the others.");
  for (const auto& n : s.nodes)
    for (const std::string_view state : node_states)
      sample(out, "redlockd_node_state", label("node", n.address) + "," + label("state", state),
             state == n.state ? "1" : "0");
  std::size_t voting = 0;
  for (const auto& n : s.nodes)
    voting += n.state == "ok" ? 1 : 0;
  family(out, "redlockd_quorum", "gauge", "Votes a lock needs: a majority of the masters.");
  sample(out, "redlockd_quorum", "", std::to_string(s.quorum));
  family(out, "redlockd_nodes_voting", "gauge",
         "Masters whose votes count now (state ok); below redlockd_quorum no lock is granted.");
  sample(out, "redlockd_nodes_voting", "", std::to_string(voting));
  family(out, "redlockd_node_quarantine_seconds", "gauge",
         "Time left before the master's votes count again (0: not quarantined).");
  for (const auto& n : s.nodes)
    sample(out, "redlockd_node_quarantine_seconds", label("node", n.address),
           number(static_cast<double>(n.quarantined_ms) / 1e3));
}

// The daemon's own gauges: KEEP locks, waiters, clients, operations in flight, fence high water,
// longest TTL, uptime.
void render_daemon_gauges(std::string& out, const metrics_snapshot& s) {
  family(out, "redlockd_keep_locks", "gauge", "KEEP locks held and renewed by the daemon.");
  sample(out, "redlockd_keep_locks", "", std::to_string(s.keep_locks));
  family(out, "redlockd_waiters", "gauge", "LOCK ... WAIT requests queued.");
  sample(out, "redlockd_waiters", "", std::to_string(s.waiters));
  family(out, "redlockd_clients", "gauge", "Client connections.");
  sample(out, "redlockd_clients", "", std::to_string(s.clients));
  family(out, "redlockd_operations_in_flight", "gauge",
         "Requests waiting on the masters (LOCK, UNLOCK, EXTEND and KEEP renewals).");
  sample(out, "redlockd_operations_in_flight", "", std::to_string(s.operations_in_flight));
  family(out, "redlockd_fence_high_water", "gauge", "Highest fencing token seen or handed out.");
  sample(out, "redlockd_fence_high_water", "", std::to_string(s.fence_high_water));
  family(out, "redlockd_max_ttl_granted_seconds", "gauge",
         "The longest TTL granted on the fleet, as recorded on the masters.");
  sample(out, "redlockd_max_ttl_granted_seconds", "",
         number(static_cast<double>(s.max_ttl_granted_ms) / 1e3));
  family(out, "redlockd_uptime_seconds", "gauge", "Seconds since the daemon started.");
  sample(out, "redlockd_uptime_seconds", "", number(s.uptime_seconds));
}

// The process_* metrics every Prometheus client library exports.
void render_process(std::string& out, const process_metrics& p) {
  family(out, "process_cpu_seconds_total", "counter",
         "Total user and system CPU time spent in seconds.");
  sample(out, "process_cpu_seconds_total", "", number(p.cpu_seconds));
  family(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  sample(out, "process_resident_memory_bytes", "", number(p.resident_bytes));
  family(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
  sample(out, "process_virtual_memory_bytes", "", number(p.virtual_bytes));
  family(out, "process_open_fds", "gauge", "Number of open file descriptors.");
  sample(out, "process_open_fds", "", number(p.open_fds));
  family(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
  sample(out, "process_max_fds", "", number(p.max_fds));
  family(out, "process_start_time_seconds", "gauge",
         "Start time of the process since unix epoch in seconds.");
  sample(out, "process_start_time_seconds", "", number(p.start_time_seconds));
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

void result_counters::add_reply(result_op op, std::string_view line) {
  const std::string_view word = line.substr(0, line.find_first_of(" \r\n"));
  if (word == "OK")
    add(op, result_outcome::ok);
  else if (word == "BUSY")
    add(op, result_outcome::busy);
  else if (word == "NOQUORUM")
    add(op, result_outcome::noquorum);
  else if (word == "NOTHELD")
    add(op, result_outcome::notheld);
  else
    add(op, result_outcome::error);
}

std::string render_metrics(const metrics_snapshot& s) {
  std::string out;
  render_results(out, s);
  render_engine_counters(out, s);
  render_acquire_latencies(out, s);
  render_nodes(out, s);
  render_daemon_gauges(out, s);
  if (s.process.valid)
    render_process(out, s.process);
  return out;
}

} // namespace redlockd
