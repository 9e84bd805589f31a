#include "redlockd/metrics/metrics.hpp"

#include <catch2/catch.hpp>

#include <sstream>

using namespace redlockd;
using namespace std::chrono_literals;

TEST_CASE("label values escape backslash, quote and line feed", "[metrics]") {
  CHECK(escape_label("plain:7001") == "plain:7001");
  CHECK(escape_label("a\\b") == "a\\\\b");
  CHECK(escape_label("say \"hi\"") == "say \\\"hi\\\"");
  CHECK(escape_label("two\nlines") == "two\\nlines");
}

TEST_CASE("the latency histogram puts each sample in the first bucket that holds it", "[metrics]") {
  latency_histogram h;
  h.record(50us);  // <= 0.0001
  h.record(100us); // == 0.0001: bounds are inclusive
  h.record(700us); // <= 0.001
  h.record(100s);  // +Inf
  CHECK(h.buckets()[0] == 2);
  CHECK(h.buckets()[3] == 1);
  CHECK(h.buckets().back() == 1);
  CHECK(h.count() == 4);
  CHECK(h.sum_seconds() == Approx(100.00085));
}

TEST_CASE("the exposition has HELP and TYPE per family and cumulative buckets", "[metrics]") {
  latency_histogram h;
  h.record(200us);
  h.record(3ms);
  h.record(3ms);
  metrics_snapshot s;
  s.version = "1.2.3";
  for (int i = 0; i < 7; ++i)
    s.results.add_reply(result_op::lock, "OK 9f1c 1 29696\n");
  s.results.add_reply(result_op::extend, "NOQUORUM 2 3\n");
  s.results.add_reply(result_op::unlock, "NOTHELD\n");
  s.results.add_reply(result_op::lock, "ERR TOO_MANY too many waiters\n");
  s.other_errors = 1;
  s.quorum = 2;
  s.master_key_losses = 2;
  s.auth_failures = 4;
  s.nodes = {{"127.0.0.1:7001", true, 350, 0, "ok"},
             {"we\"ird\\node", false, -1, 1500, "quarantined:restart"}};
  s.acquire_latency = &h;
  s.process = {true, 1.5, 8e6, 2e8, 12, 65536, 1763900000.25};
  const std::string text = render_metrics(s);

  CHECK(text.find("redlockd_build_info{version=\"1.2.3\"} 1\n") != std::string::npos);
  CHECK(text.find("# TYPE redlockd_results_total counter\n") != std::string::npos);
  CHECK(text.find("redlockd_results_total{op=\"lock\",outcome=\"ok\"} 7\n") != std::string::npos);
  CHECK(text.find("redlockd_results_total{op=\"lock\",outcome=\"error\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("redlockd_results_total{op=\"extend\",outcome=\"noquorum\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("redlockd_results_total{op=\"unlock\",outcome=\"notheld\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("redlockd_results_total{op=\"unlock\",outcome=\"ok\"} 0\n") != std::string::npos);
  CHECK(text.find("redlockd_results_total{op=\"other\",outcome=\"error\"} 1\n") !=
        std::string::npos);
  // No series that cannot move: LOCK is never NOTHELD, UNLOCK never BUSY.
  CHECK(text.find("{op=\"lock\",outcome=\"notheld\"}") == std::string::npos);
  CHECK(text.find("{op=\"unlock\",outcome=\"busy\"}") == std::string::npos);
  CHECK(text.find("redlockd_node_state{node=\"127.0.0.1:7001\",state=\"ok\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("redlockd_node_state{node=\"127.0.0.1:7001\",state=\"down\"} 0\n") !=
        std::string::npos);
  CHECK(text.find(
            "redlockd_node_state{node=\"we\\\"ird\\\\node\",state=\"quarantined:restart\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("redlockd_quorum 2\n") != std::string::npos);
  CHECK(text.find("redlockd_nodes_voting 1\n") != std::string::npos);
  CHECK(text.find("process_cpu_seconds_total 1.5\n") != std::string::npos);
  CHECK(text.find("process_resident_memory_bytes 8000000\n") != std::string::npos);
  CHECK(text.find("process_open_fds 12\n") != std::string::npos);
  CHECK(text.find("process_max_fds 65536\n") != std::string::npos);
  CHECK(text.find("process_start_time_seconds 1763900000.25\n") != std::string::npos);
  CHECK(text.find("redlockd_master_faults_total{kind=\"key_loss\"} 2\n") != std::string::npos);
  CHECK(text.find("redlockd_master_faults_total{kind=\"restart\"} 0\n") != std::string::npos);
  CHECK(text.find("# TYPE redlockd_auth_failures_total counter\n") != std::string::npos);
  CHECK(text.find("redlockd_auth_failures_total 4\n") != std::string::npos);
  CHECK(text.find("redlockd_acquire_duration_seconds_bucket{le=\"0.00025\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("redlockd_acquire_duration_seconds_bucket{le=\"0.0025\"} 1\n") !=
        std::string::npos);
  CHECK(text.find("redlockd_acquire_duration_seconds_bucket{le=\"0.005\"} 3\n") !=
        std::string::npos);
  CHECK(text.find("redlockd_acquire_duration_seconds_bucket{le=\"+Inf\"} 3\n") !=
        std::string::npos);
  CHECK(text.find("redlockd_acquire_duration_seconds_count 3\n") != std::string::npos);
  CHECK(text.find("redlockd_node_up{node=\"we\\\"ird\\\\node\"} 0\n") != std::string::npos);
  CHECK(text.find("redlockd_node_rtt_seconds{node=\"127.0.0.1:7001\"} 0.00035\n") !=
        std::string::npos);
  // A node never measured has no RTT sample rather than a made-up one.
  CHECK(text.find("redlockd_node_rtt_seconds{node=\"we") == std::string::npos);
  CHECK(text.find("redlockd_node_quarantine_seconds{node=\"we\\\"ird\\\\node\"} 1.5\n") !=
        std::string::npos);

  // Every family is declared once, before its samples.
  std::istringstream lines(text);
  std::string line;
  std::string declared;
  while (std::getline(lines, line)) {
    if (line.rfind("# TYPE ", 0) == 0) {
      declared = line.substr(7, line.find(' ', 7) - 7);
      continue;
    }
    if (line.rfind("# HELP ", 0) == 0)
      continue;
    INFO(line);
    CHECK(line.rfind(declared, 0) == 0);
  }
}

TEST_CASE("every INFO counter has its family, and the round and wait histograms are rendered",
          "[metrics]") {
  latency_histogram total, round, wait;
  total.record(400ms);
  round.record(2ms);
  round.record(3ms);
  wait.record(395ms);
  metrics_snapshot s;
  s.version = "1.2.3";
  s.delayed = 3;
  s.handovers = 4;
  s.wakeups = 5;
  s.master_clock_jumps_backward = 6;
  s.operations_in_flight = 7;
  s.max_ttl_granted_ms = 30000;
  s.acquire_latency = &total;
  s.acquire_round = &round;
  s.acquire_wait = &wait;
  const std::string text = render_metrics(s);
  for (const char* line :
       {"redlockd_lock_delay_refusals_total 3\n", "redlockd_handovers_total 4\n",
        "redlockd_wakeups_total 5\n", "redlockd_master_clock_jumps_backward_total 6\n",
        "redlockd_operations_in_flight 7\n", "redlockd_max_ttl_granted_seconds 30\n",
        "# TYPE redlockd_acquire_round_duration_seconds histogram\n",
        "redlockd_acquire_round_duration_seconds_bucket{le=\"0.0025\"} 1\n",
        "redlockd_acquire_round_duration_seconds_bucket{le=\"0.005\"} 2\n",
        "redlockd_acquire_round_duration_seconds_count 2\n",
        "# TYPE redlockd_acquire_wait_duration_seconds histogram\n",
        "redlockd_acquire_wait_duration_seconds_bucket{le=\"0.25\"} 0\n",
        "redlockd_acquire_wait_duration_seconds_bucket{le=\"0.5\"} 1\n",
        "redlockd_acquire_wait_duration_seconds_bucket{le=\"60\"} 1\n",
        "redlockd_acquire_wait_duration_seconds_sum 0.395\n",
        "redlockd_acquire_duration_seconds_count 1\n"}) {
    INFO(line);
    CHECK(text.find(line) != std::string::npos);
  }
}
