#include "redlockd/metrics/counter_rates.hpp"
#include "redlockd/metrics/status_page.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace redlockd;
using namespace std::chrono_literals;

namespace {

// A /v1/status document as status_info.cpp builds it, shortened.
nlohmann::json document() {
  return nlohmann::json::parse(R"({
    "version": "1.2.3", "uptime_s": 3725, "quorum": 2, "nodes_voting": 2,
    "nodes": [
      {"address": "10.0.0.1:6379", "state": "ok", "rtt_us": 210, "quarantined_ms": 0,
       "evicts_keys": false, "wake_subscribed": true},
      {"address": "10.0.0.2:6379", "state": "quarantined:restart", "rtt_us": -1,
       "quarantined_ms": 29500, "evicts_keys": false, "wake_subscribed": false},
      {"address": "10.0.0.3:6379", "state": "ok", "rtt_us": 1500, "quarantined_ms": 0,
       "evicts_keys": false, "wake_subscribed": true}],
    "counters": {"acquired": 12, "busy": 3},
    "rates": {"window_s": 7.5, "per_s": {"acquired": 0.4, "busy": 0},
              "since_start_per_s": {"acquired": 0.0032, "busy": 0.0008}},
    "clients": 4, "waiters": 3, "keep_locks": 1, "operations_in_flight": 0,
    "fence_high_water": 88, "max_ttl_granted": 30000,
    "locks": [
      {"resource": "<b>x&y</b>", "kind": "exclusive", "label": "", "keep": false,
       "fence": 87, "valid_ms": 4200},
      {"resource": "jobs", "kind": "shared", "label": "host-7:4711", "keep": true,
       "fence": 88, "valid_ms": 125000}],
    "locks_total": 2,
    "waiting": [{"resource": "jobs", "waiters": 3}], "waiting_total": 1,
    "refresh_s": 5})");
}

} // namespace

TEST_CASE("HTML escaping covers the five special characters", "[status]") {
  CHECK(escape_html("plain") == "plain");
  CHECK(escape_html("<a href=\"x\">'&'</a>") ==
        "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
}

TEST_CASE("durations read in the largest sensible unit", "[status]") {
  CHECK(duration_text(0) == "0 ms");
  CHECK(duration_text(0.21) == "0.21 ms");
  CHECK(duration_text(850) == "850 ms");
  CHECK(duration_text(29'140) == "29.1 s");
  CHECK(duration_text(245'000) == "4 min 05 s");
  CHECK(duration_text(3 * 3'600'000.0 + 120'000) == "3 h 02 min");
  CHECK(duration_text(2 * 86'400'000.0 + 4 * 3'600'000.0) == "2 d 04 h");
}

TEST_CASE("the status page shows the document's masters, locks, waiters and counters", "[status]") {
  const std::string page = render_status_page(document());
  CHECK(page.starts_with("<!DOCTYPE html>"));
  CHECK(page.find("<meta http-equiv=\"refresh\" content=\"5\">") != std::string::npos);
  CHECK(page.find("<script") == std::string::npos);
  CHECK(page.find("10.0.0.2:6379") != std::string::npos);
  CHECK(page.find("class=\"state warn\">quarantined:restart</td>") != std::string::npos);
  CHECK(page.find(">29.5 s</td>") != std::string::npos);  // quarantine left
  CHECK(page.find(">0.21 ms</td>") != std::string::npos); // round trip
  // A resource name is text, never markup.
  CHECK(page.find("<b>x&y</b>") == std::string::npos);
  CHECK(page.find("&lt;b&gt;x&amp;y&lt;/b&gt;") != std::string::npos);
  // Kind and label come from the document, whatever they are.
  CHECK(page.find("<td data-label=\"Kind\" class=\"kind\">shared</td>") != std::string::npos);
  CHECK(page.find("<td data-label=\"Label\" class=\"label\">host-7:4711</td>") !=
        std::string::npos);
  CHECK(page.find("<td data-label=\"Time left\" class=\"num valid_ms\">2 min 05 s</td>") !=
        std::string::npos);
  CHECK(page.find("<td data-label=\"Fence\" class=\"num fence\">88</td>") != std::string::npos);
  CHECK(page.find("<td data-label=\"Waiters\" class=\"num waiters\">3</td>") != std::string::npos);
  CHECK(page.find("Per second, last 7.5 s") != std::string::npos);
  CHECK(page.find("<td data-label=\"Since start\" class=\"num total\">12</td>") !=
        std::string::npos);
  CHECK(page.find(">0.40</td>") != std::string::npos);
}

TEST_CASE("empty lists are said to be empty", "[status]") {
  nlohmann::json doc = document();
  doc["locks"] = nlohmann::json::array();
  doc["locks_total"] = 0;
  doc["waiting"] = nlohmann::json::array();
  doc["waiting_total"] = 0;
  const std::string page = render_status_page(doc);
  CHECK(page.find("id=\"locks-empty\"") != std::string::npos);
  CHECK(page.find("id=\"waiting-empty\"") != std::string::npos);
  CHECK(page.find("<table id=\"locks\"") == std::string::npos);
}

TEST_CASE("counter rates compare with a reading kept 5 to 10 s before", "[status]") {
  const clock_type::time_point start = clock_type::time_point{} + 1h;
  counter_rates rates(start, 5s);
  // Before any kept reading: since the start, from zero.
  auto r = rates.observe(start + 2s, {{"acquired", 10}});
  CHECK(r.window_s == Approx(2));
  CHECK(r.per_s.at("acquired") == Approx(5));
  r = rates.observe(start + 5s, {{"acquired", 20}}); // kept: 5 s after the start
  CHECK(r.per_s.at("acquired") == Approx(4));
  r = rates.observe(start + 8s, {{"acquired", 29}, {"busy", 8}}); // not kept: 3 s later
  CHECK(r.window_s == Approx(8));
  CHECK(r.per_s.at("busy") == Approx(1)); // a counter the kept reading lacks counts from 0
  r = rates.observe(start + 10s, {{"acquired", 40}}); // kept; the start is dropped
  CHECK(r.window_s == Approx(10));
  r = rates.observe(start + 12s, {{"acquired", 48}});
  CHECK(r.window_s == Approx(7)); // against the reading at 5 s
  CHECK(r.per_s.at("acquired") == Approx(4));
}
