// STATUS: parsing, the decision from the masters' PTTLs, and the reader's rounds.
#include "redlockd/lock/status_query.hpp"
#include "redlockd/protocol/protocol.hpp"
#include "redlockd/resp/resp.hpp"

#include <catch2/catch.hpp>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

using namespace redlockd;
using namespace std::chrono_literals;

namespace {

using answers = std::vector<std::optional<std::int64_t>>;
constexpr std::int64_t none = -2; // PTTL of a missing key
const std::optional<std::int64_t> silent;

status_verdict decide(const answers& a) {
  return decide_status(std::span<const std::optional<std::int64_t>>(a.data(), a.size()));
}

} // namespace

TEST_CASE("STATUS takes exactly one valid resource", "[protocol][status]") {
  const request_limits limits{};
  const std::string line = "status orders:7";
  const auto parsed = parse_request(line, limits);
  REQUIRE(std::holds_alternative<request>(parsed));
  REQUIRE(std::holds_alternative<status_request>(std::get<request>(parsed)));
  CHECK(std::get<status_request>(std::get<request>(parsed)).resource == "orders:7");

  auto error_of = [&](std::string_view text) {
    const auto result = parse_request(text, limits);
    REQUIRE(std::holds_alternative<parse_error>(result));
    return std::get<parse_error>(result);
  };
  CHECK(error_of("STATUS").code == err_code::syntax);
  CHECK(error_of("STATUS").message == "wrong number of arguments for 'STATUS'");
  CHECK(error_of("STATUS a b").code == err_code::syntax);
  CHECK(error_of("STATUS " + std::string(257, 'r')).code == err_code::bad_resource);
  CHECK(error_of("STATUS a\tb").code == err_code::bad_resource);
  CHECK(format_status_free() == "OK FREE\n");
  CHECK(format_status_held(29871) == "OK HELD 29871\n");
}

TEST_CASE("STATUS: held when a LOCK would be BUSY, free when one could succeed", "[status]") {
  // Five masters, quorum 3.
  auto v = decide({1000, 2000, 3000, none, none});
  CHECK(v.outcome == status_verdict::kind::held);
  CHECK(v.pttl_ms == 1000); // the third largest: three masters keep it at least that long
  CHECK(v.needed == 3);

  v = decide({5000, 1000, 4000, 3000, 2000});
  CHECK(v.outcome == status_verdict::kind::held);
  CHECK(v.pttl_ms == 3000);

  v = decide({1000, 2000, none, none, none});
  CHECK(v.outcome == status_verdict::kind::free);
  CHECK(v.agreeing == 3);

  // Silent masters count for neither side.
  v = decide({1000, 2000, 3000, silent, silent});
  CHECK(v.outcome == status_verdict::kind::held);
  CHECK(v.pttl_ms == 1000);
  v = decide({none, none, none, silent, silent});
  CHECK(v.outcome == status_verdict::kind::free);
  v = decide({1000, 2000, none, none, silent});
  CHECK(v.outcome == status_verdict::kind::noquorum);
  CHECK(v.agreeing == 2);
  CHECK(v.needed == 3);
  v = decide({1000, none, silent, silent, silent});
  CHECK(v.outcome == status_verdict::kind::noquorum);
  v = decide({silent, silent, silent, silent, silent});
  CHECK(v.outcome == status_verdict::kind::noquorum);
  CHECK(v.agreeing == 0);

  // A key without expiry is held, with no time known.
  v = decide({-1, -1, -1, none, none});
  CHECK(v.outcome == status_verdict::kind::held);
  CHECK(v.pttl_ms == 0);
}

TEST_CASE("STATUS with an even number of masters follows LOCK's BUSY rule", "[status]") {
  // Four masters, quorum 3: two holders already make a LOCK BUSY (more than N-Q = 1 refuse).
  auto v = decide({1000, 2000, none, none});
  CHECK(v.outcome == status_verdict::kind::held);
  CHECK(v.pttl_ms == 1000);
  v = decide({1000, none, none, none});
  CHECK(v.outcome == status_verdict::kind::free);
  v = decide({1000, none, none, silent});
  CHECK(v.outcome == status_verdict::kind::noquorum);
  // One master: it alone decides.
  CHECK(decide({7}).outcome == status_verdict::kind::held);
  CHECK(decide({none}).outcome == status_verdict::kind::free);
  CHECK(decide({silent}).outcome == status_verdict::kind::noquorum);
}

namespace {

struct fake_io : node_io {
  explicit fake_io(std::size_t n) : up(n, true) {}
  bool usable(std::size_t node) const override { return up[node]; }
  void send(std::size_t node, const request_tag& tag, std::string_view command) override {
    sent.push_back({node, tag, std::string(command)});
  }
  void reload_scripts(std::size_t) override {}
  void arm_timer(clock_type::time_point) override {}
  struct sent_command {
    std::size_t node;
    request_tag tag;
    std::string bytes;
  };
  std::vector<bool> up;
  std::vector<sent_command> sent;
};

struct captured : reply_sink {
  void deliver(std::uint64_t seq, std::string line) override { lines[seq] = std::move(line); }
  void push(std::string, std::uint64_t) override {}
  std::map<std::uint64_t, std::string> lines;
};

reply_ptr integer(std::int64_t value) {
  reply_reader reader;
  reader.feed(":" + std::to_string(value) + "\r\n");
  reply_ptr reply;
  REQUIRE(reader.next(reply) == reply_reader::status::reply);
  return reply;
}

} // namespace

TEST_CASE("status_reader asks every eligible master and answers when all did", "[status]") {
  config cfg;
  cfg.key_prefix = "p:";
  cfg.clock_drift_factor = 0.0;
  fake_io io(cfg.nodes.size());
  REQUIRE(cfg.nodes.size() == 5);
  auto now = clock_type::now();
  std::optional<clock_type::time_point> armed;
  std::vector<bool> eligible{true, true, true, true, false}; // the last one is quarantined
  status_reader reader(
      cfg, io, [&](std::size_t node) { return eligible[node]; },
      [&](clock_type::time_point when) { armed = when; },
      std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>()),
      [&] { return now; });
  auto sink = std::make_shared<captured>();

  reader.query(status_request{"job"}, sink, 1);
  REQUIRE(io.sent.size() == 4);
  CHECK(io.sent[0].bytes.starts_with("*4\r\n$4\r\nEVAL\r\n"));
  CHECK(io.sent[0].bytes.ends_with("\r\n$1\r\n1\r\n$5\r\np:job\r\n"));
  CHECK(reader.in_flight() == 1);
  REQUIRE(armed);
  CHECK(*armed == now + std::chrono::milliseconds(cfg.node_timeout_ms));

  now += 5ms;
  reader.on_reply(0, io.sent[0].tag, decode_script_reply(request_kind::status, *integer(30000)));
  reader.on_reply(1, io.sent[1].tag, decode_script_reply(request_kind::status, *integer(20000)));
  reader.on_reply(2, io.sent[2].tag, decode_script_reply(request_kind::status, *integer(10000)));
  CHECK(sink->lines.empty()); // waits for the fourth: it can only make the bound better
  reader.on_failure(3, io.sent[3].tag);
  REQUIRE(sink->lines.count(1) == 1);
  CHECK(sink->lines[1] == "OK HELD " + std::to_string(10000 - 5 - 2) + "\n"); // elapsed, 2 ms
  CHECK(reader.in_flight() == 0);

  // A late reply of a finished query is ignored.
  reader.on_reply(3, io.sent[3].tag, decode_script_reply(request_kind::status, *integer(-2)));
  CHECK(sink->lines.size() == 1);
}

TEST_CASE("status_reader: silent masters time out, and nobody eligible is NOQUORUM at once",
          "[status]") {
  config cfg;
  fake_io io(cfg.nodes.size());
  auto now = clock_type::now();
  bool all_eligible = true;
  status_reader reader(
      cfg, io, [&](std::size_t) { return all_eligible; }, [](clock_type::time_point) {},
      std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>()),
      [&] { return now; });
  auto sink = std::make_shared<captured>();
  reader.query(status_request{"r"}, sink, 1);
  REQUIRE(io.sent.size() == 5);
  for (std::size_t node = 0; node < 3; ++node)
    reader.on_reply(node, io.sent[node].tag,
                    decode_script_reply(request_kind::status, *integer(-2)));
  CHECK(sink->lines.empty());
  now += std::chrono::milliseconds(cfg.node_timeout_ms);
  reader.on_timer();
  CHECK(sink->lines[1] == "OK FREE\n");

  reader.query(status_request{"r"}, sink, 2);
  reader.on_reply(0, io.sent[5].tag, decode_script_reply(request_kind::status, *integer(100)));
  now += std::chrono::milliseconds(cfg.node_timeout_ms);
  reader.on_timer();
  CHECK(sink->lines[2] == "NOQUORUM 1 3\n");

  all_eligible = false;
  reader.query(status_request{"r"}, sink, 3);
  CHECK(sink->lines[3] == "NOQUORUM 0 3\n");
  CHECK(reader.in_flight() == 0);
}

TEST_CASE("STATUS shows the label most holding masters store, never a free master's", "[status]") {
  CHECK(format_status_held(1500, "web:42") == "OK HELD 1500 label=web:42\n");
  CHECK(format_status_held(1500, "") == "OK HELD 1500\n");
  const answers a = {100, 100, 100, none, silent};
  const std::vector<std::string> labels = {"b", "a", "b", "stale", "x"};
  CHECK(status_label(a, labels) == "b");
  const std::vector<std::string> tie = {"b", "a", "", "", ""};
  CHECK(status_label(a, tie) == "a");
  const std::vector<std::string> unlabelled(5);
  CHECK(status_label(a, unlabelled).empty());
}

TEST_CASE("STATUS counts shared holders and permits as it counts the time: what enough masters "
          "hold to refuse a LOCK",
          "[status]") {
  using answers = std::vector<std::optional<std::int64_t>>;
  const answers all = {1000, 1000, 1000, 1000, 1000};
  const std::vector<std::uint64_t> readers = {3, 3, 2, 1, 0};
  CHECK(status_count(all, readers) == 2); // the 3rd largest of 5
  const answers two_silent = {1000, 1000, 1000, std::nullopt, std::nullopt};
  CHECK(status_count(two_silent, readers) == 2);
  const answers three_silent = {1000, 1000, std::nullopt, std::nullopt, std::nullopt};
  CHECK(status_count(three_silent, readers) == 0); // too few answered to say
  CHECK(format_status_held(900, "", {2, 0, 0}) == "OK HELD 900 readers=2\n");
  CHECK(format_status_free({0, 1, 3}) == "OK FREE permits=1/3\n");
  CHECK(format_status_held(900, "me", {0, 2, 2}) == "OK HELD 900 label=me permits=2/2\n");
}
