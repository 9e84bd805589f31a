// The engine against scripted node answers: the Redis replies are real RESP bytes run through the
// hiredis reader; only the transport is replaced.
#include "redlockd/lock/lock_engine.hpp"
#include "redlockd/lock/redlock.hpp"
#include "redlockd/resp/resp.hpp"
#include "redlockd/resp/script_calls.hpp"
#include "redlockd/resp/scripts.hpp"

#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

#include <map>
#include <string>
#include <vector>

using namespace redlockd;
using namespace std::chrono_literals;

namespace {

struct sent_command {
  std::size_t node;
  request_tag tag;
  std::string bytes;
};

struct fake_nodes : node_io {
  explicit fake_nodes(std::size_t n) : up(n, true) {}
  bool usable(std::size_t node) const override { return up[node]; }
  void send(std::size_t node, const request_tag& tag, std::string_view command) override {
    sent.push_back({node, tag, std::string(command)});
  }
  void reload_scripts(std::size_t node) override { reloads.push_back(node); }
  void arm_timer(clock_type::time_point when) override { armed = when; }

  // Commands of one kind, in the order they were sent.
  std::vector<sent_command> of(request_kind kind) const {
    std::vector<sent_command> out;
    for (const auto& c : sent)
      if (c.tag.kind == kind)
        out.push_back(c);
    return out;
  }

  std::vector<bool> up;
  std::vector<sent_command> sent;
  std::vector<std::size_t> reloads;
  std::optional<clock_type::time_point> armed;
};

struct captured_replies : reply_sink {
  void deliver(std::uint64_t seq, std::string line) override { lines[seq] = std::move(line); }
  void push(std::string line, std::uint64_t) override { pushed.push_back(std::move(line)); }
  std::map<std::uint64_t, std::string> lines;
  std::vector<std::string> pushed;
};

reply_ptr resp(std::string_view bytes) {
  reply_reader reader;
  reader.feed(bytes);
  reply_ptr reply;
  REQUIRE(reader.next(reply) == reply_reader::status::reply);
  return reply;
}

// The engine takes replies decoded the way the daemon's fleet decodes them.
script_reply decode(const request_tag& tag, const redisReply& reply) {
  return decode_script_reply(tag.kind, reply);
}

// A master's TIME as the scripts return it (a fixed clock: it never jumps forward).
const std::string master_time = "$10\r\n1700000000\r\n$1\r\n0\r\n";

std::string granted(std::uint64_t previous) {
  const std::string text = std::to_string(previous);
  return "*4\r\n:1\r\n$" + std::to_string(text.size()) + "\r\n" + text + "\r\n" + master_time;
}
// acquire_wait's grant, with its fifth field: the largest ticket of another daemon's head marked
// on that master ('0': none).
std::string granted_beside(std::uint64_t previous, std::uint64_t rival) {
  const std::string text = std::to_string(previous);
  const std::string ticket = std::to_string(rival);
  return "*5\r\n:1\r\n$" + std::to_string(text.size()) + "\r\n" + text + "\r\n" + master_time +
         "$" + std::to_string(ticket.size()) + "\r\n" + ticket + "\r\n";
}
// The hand_over script's answer: granted to the new owner (or refused), and the releasing
// owner's key replaced (1), held by another (0) or gone (-1).
std::string handed(std::uint64_t previous, int released) {
  const std::string text = std::to_string(previous);
  return "*6\r\n:1\r\n$" + std::to_string(text.size()) + "\r\n" + text + "\r\n" + master_time +
         ":" + std::to_string(released) + "\r\n$1\r\n0\r\n";
}
// permit_acquire's grant: {1, previous counter, TIME, largest rival ticket, the slot it took}.
std::string granted_slot(std::uint64_t previous, int slot) {
  const std::string text = std::to_string(previous);
  return "*6\r\n:1\r\n$" + std::to_string(text.size()) + "\r\n" + text + "\r\n" + master_time +
         "$1\r\n0\r\n:" + std::to_string(slot) + "\r\n";
}
std::string not_handed(std::int64_t pttl) {
  return "*6\r\n:0\r\n:" + std::to_string(pttl) + "\r\n" + master_time + ":0\r\n$1\r\n0\r\n";
}
std::string refused(std::int64_t pttl) {
  return "*4\r\n:0\r\n:" + std::to_string(pttl) + "\r\n" + master_time;
}
std::string extended(int result) {
  return "*3\r\n:" + std::to_string(result) + "\r\n" + master_time;
}
// A reply carrying a given TIME, to show a clock jump.
std::string granted_at(std::uint64_t seconds) {
  const std::string text = std::to_string(seconds);
  return "*4\r\n:1\r\n$1\r\n0\r\n$" + std::to_string(text.size()) + "\r\n" + text +
         "\r\n$1\r\n0\r\n";
}

config five_nodes() {
  config cfg;
  cfg.nodes = {
      {"127.0.0.1", 1}, {"127.0.0.1", 2}, {"127.0.0.1", 3}, {"127.0.0.1", 4}, {"127.0.0.1", 5}};
  return cfg;
}

struct fixture {
  explicit fixture(std::uint64_t lock_delay_ms = 0, bool handshake = true, bool clocks = true)
      : cfg(with_delay(lock_delay_ms)), nodes(5), engine(cfg, nodes, log, [this] { return now; }) {
    if (!handshake)
      return;
    // As every link's handshake reports: a fence counter, the longest TTL ever granted (high
    // enough that no test raises it) and a master that has been up for a day.
    for (std::size_t node = 0; node < 5; ++node)
      connect(node, "run" + std::to_string(node), 86'400'000);
    if (clocks)
      know_master_time(); // as the TIME probe at each handshake's end brings
  }

  static config with_delay(std::uint64_t lock_delay_ms) {
    config c = five_nodes();
    c.lock_delay_ms = lock_delay_ms;
    return c;
  }
  // A link's handshake: what it read from master `node`.
  void connect(std::size_t node, const std::string& run_id, std::uint64_t uptime_ms,
               std::optional<std::uint64_t> fence = 0, std::uint64_t max_ttl_ms = 3'600'000) {
    engine.on_node_connected(node, {fence, max_ttl_ms, run_id, uptime_ms});
  }
  // The masters' clocks, as every reply carries them (master_time): the floor of proposals.
  void know_master_time() {
    for (std::size_t node = 0; node < 5; ++node)
      engine.on_node_time(node, 1'700'000'000, 0);
  }
  // Moves the clock and fires the engine's timer if it is due.
  void advance(std::chrono::microseconds by) {
    now += by;
    if (nodes.armed && *nodes.armed <= now) {
      nodes.armed.reset();
      engine.on_timer();
    }
  }
  // Answers the latest round of a kind on the first `count` nodes.
  void answer_all(request_kind kind, std::string_view bytes, std::size_t count = 5) {
    for (std::size_t node = 0; node < count; ++node)
      answer(node, kind, bytes);
  }
  std::size_t count_sent(request_kind kind) const { return nodes.of(kind).size(); }

  void answer(std::size_t node, request_kind kind, std::string_view bytes) {
    const request_tag tag = last_tag(node, kind);
    if (tag.generation == 0)
      FAIL("no " << static_cast<int>(kind) << " command was sent to node " << node);
    auto reply = resp(bytes);
    engine.on_reply(node, tag, decode(tag, *reply));
  }
  // The tag of the last command of a kind sent to a node.
  request_tag last_tag(std::size_t node, request_kind kind) const {
    request_tag tag;
    for (const auto& c : nodes.of(kind))
      if (c.node == node && c.tag.generation != 0)
        tag = c.tag;
    return tag;
  }

  config cfg;
  std::shared_ptr<spdlog::logger> log = std::make_shared<spdlog::logger>("test");
  clock_type::time_point now = clock_type::time_point{} + 1h;
  fake_nodes nodes;
  lock_engine engine;
  std::shared_ptr<captured_replies> client = std::make_shared<captured_replies>();
};

lock_request lock_of(std::string_view resource, std::uint64_t ttl) {
  lock_request req;
  req.resource = resource;
  req.ttl_ms = ttl;
  return req;
}

lock_request with_permits(lock_request req, std::uint32_t n) {
  req.mode = lock_mode::permits;
  req.permits = n;
  return req;
}

std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::string word;
  for (char c : line) {
    if (c == ' ' || c == '\n') {
      if (!word.empty())
        out.push_back(word);
      word.clear();
    } else {
      word.push_back(c);
    }
  }
  return out;
}

// The arguments of one RESP command (an array of bulk strings).
std::vector<std::string> args_of(std::string_view command) {
  std::vector<std::string> out;
  std::size_t at = command.find("\r\n") + 2; // past "*<n>"
  while (at < command.size()) {
    const std::size_t end = command.find("\r\n", at);
    const std::size_t length = std::stoul(std::string(command.substr(at + 1, end - at - 1)));
    out.emplace_back(command.substr(end + 2, length));
    at = end + 2 + length + 2;
  }
  return out;
}

// The proposed token of the last command of a kind (EVALSHA sha numkeys KEYS... ARGV...: ARGV[3]
// for the grants, ARGV[1] for fence_bump).
std::uint64_t proposal_in(const fake_nodes& nodes, request_kind kind) {
  const std::vector<std::string> args = args_of(nodes.of(kind).back().bytes);
  const std::size_t first_argv = 3 + std::stoul(args.at(2));
  return std::stoull(args.at(first_argv + (kind == request_kind::fence_bump ? 0 : 2)));
}
std::uint64_t proposal_in(const fixture& f, request_kind kind) {
  return proposal_in(f.nodes, kind);
}
// A counter as a bulk string, as fence_bump answers.
std::string bulk(std::uint64_t n) {
  const std::string s = std::to_string(n);
  return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
}
} // namespace

TEST_CASE("LOCK goes to every node at once and answers at quorum", "[engine]") {
  fixture f;
  f.engine.lock(lock_of("orders:1", 10000), f.client, 7);
  const auto acquires = f.nodes.of(request_kind::acquire);
  REQUIRE(acquires.size() == 5);
  for (const auto& c : acquires) {
    CHECK(c.bytes.find(std::string(script_sha(script::acquire))) != std::string::npos);
    CHECK(c.bytes.find("$8\r\norders:1\r\n") != std::string::npos);
    CHECK(c.bytes.find("$14\r\nredlockd:fence\r\n") != std::string::npos);
  }
  CHECK(f.nodes.armed == f.now + 50ms);

  f.now += 2ms;
  f.answer(0, request_kind::acquire, granted(0));
  f.answer(3, request_kind::acquire, granted(0));
  CHECK(f.client->lines.empty());
  f.answer(1, request_kind::acquire, granted(0));
  REQUIRE(f.client->lines.count(7) == 1);
  const auto reply = words(f.client->lines[7]);
  REQUIRE(reply.size() == 4);
  CHECK(reply[0] == "OK");
  CHECK(reply[1].size() == 40);
  CHECK(reply[1].find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(reply[2] == "1700000000000000"); // the masters' clock in µs, as sampled at the handshake
  CHECK(reply[3] == "9896");             // 10000 - 2 elapsed - 102 drift
  // The owner on the wire is the one handed out.
  CHECK(acquires[0].bytes.find(reply[1]) != std::string::npos);
  CHECK(f.nodes.of(request_kind::release).empty());
  CHECK(f.engine.counters().acquired == 1);

  // The 4th and 5th answers arrive late and change nothing for the client; the slot is given
  // back once every node has answered.
  CHECK(f.engine.operations_in_flight() == 1);
  f.answer(2, request_kind::acquire, granted(0));
  f.answer(4, request_kind::acquire, refused(50));
  CHECK(f.client->lines.size() == 1);
  CHECK(f.engine.operations_in_flight() == 0);
  CHECK(f.nodes.of(request_kind::release).empty());
}

TEST_CASE("LOCK fails as soon as a majority refused, and releases wherever its key may be",
          "[engine]") {
  fixture f;
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  f.answer(0, request_kind::acquire, refused(4000));
  f.answer(1, request_kind::acquire, granted(0));
  f.answer(2, request_kind::acquire, refused(2500));
  CHECK(f.client->lines.empty());
  f.answer(3, request_kind::acquire, refused(3000));
  CHECK(f.client->lines[1] == "BUSY 2500\n");
  // Node 1 granted, node 4 has not answered: its SET may happen yet. The refusing nodes did not
  // set it.
  const auto releases = f.nodes.of(request_kind::cleanup);
  REQUIRE(releases.size() == 2);
  CHECK(releases[0].node == 1);
  CHECK(releases[1].node == 4);
  // The owner is the last 40-byte argument (the first is the script's SHA).
  const std::string acquire = f.nodes.of(request_kind::acquire)[0].bytes;
  const std::string owner = acquire.substr(acquire.rfind("$40\r\n") + 5, 40);
  for (const auto& c : releases) {
    CHECK(c.tag.kind == request_kind::cleanup); // nobody waits for it
    CHECK(c.bytes.find(owner) != std::string::npos);
  }
  CHECK(f.engine.counters().busy == 1);
}

TEST_CASE("LOCK with too few nodes up fails at once with NOQUORUM", "[engine]") {
  fixture f;
  f.nodes.up = {true, false, true, false, false};
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  CHECK(f.client->lines[1] == "NOQUORUM 0 3\n");
  CHECK(f.nodes.of(request_kind::cleanup).size() == 2);
}

TEST_CASE("LOCK with 2 of 5 nodes down still succeeds", "[engine]") {
  fixture f;
  f.nodes.up = {true, false, true, true, false};
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  CHECK(f.nodes.of(request_kind::acquire).size() == 3);
  f.answer(0, request_kind::acquire, granted(0));
  f.answer(2, request_kind::acquire, granted(0));
  f.answer(3, request_kind::acquire, granted(0));
  CHECK(f.client->lines[1].starts_with("OK "));
}

TEST_CASE("nodes silent past the node timeout count as no - late replies are discarded",
          "[engine]") {
  fixture f;
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  f.answer(0, request_kind::acquire, granted(0));
  f.answer(1, request_kind::acquire, granted(0));
  f.now += 49ms;
  f.engine.on_timer();
  CHECK(f.client->lines.empty());
  f.now += 1ms;
  f.engine.on_timer();
  CHECK(f.client->lines[1] == "NOQUORUM 2 3\n");
  CHECK(f.nodes.of(request_kind::cleanup).size() == 5);
  f.answer(2, request_kind::acquire, granted(0)); // kept its slot on the wire; ignored
  CHECK(f.client->lines.size() == 1);
  CHECK(f.engine.counters().noquorum == 1);
}

TEST_CASE("the node timeout is at most a tenth of the ttl", "[engine]") {
  fixture f;
  f.engine.lock(lock_of("r", 100), f.client, 1);
  CHECK(f.nodes.armed == f.now + 10ms);
}

TEST_CASE("a lost connection counts as a failed vote", "[engine]") {
  fixture f;
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  f.answer(0, request_kind::acquire, granted(0));
  for (std::size_t node : {1u, 2u, 3u})
    f.engine.on_failure(node, f.last_tag(node, request_kind::acquire));
  CHECK(f.client->lines[1] == "NOQUORUM 1 3\n");
}

TEST_CASE("a fencing conflict takes a second round above everything seen", "[engine]") {
  fixture f;
  f.know_master_time(); // as after any earlier round: proposals are at least it
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  const std::uint64_t p = proposal_in(f, request_kind::acquire);
  f.answer(0, request_kind::acquire, granted(0));
  f.answer(1, request_kind::acquire, granted(p + 499)); // another daemon handed out p + 499
  f.answer(2, request_kind::acquire, granted(0));
  CHECK(f.client->lines.empty());
  REQUIRE(f.nodes.of(request_kind::fence_bump).size() == 5);
  CHECK(proposal_in(f, request_kind::fence_bump) == p + 500);
  // Late answers of the first round do not count in the second.
  f.answer(3, request_kind::acquire, granted(0));
  CHECK(f.client->lines.empty());
  f.answer(0, request_kind::fence_bump, bulk(1));
  f.answer(1, request_kind::fence_bump, bulk(p + 499));
  f.answer(4, request_kind::fence_bump, bulk(0));
  REQUIRE(f.client->lines.count(1) == 1);
  CHECK(words(f.client->lines[1])[2] == std::to_string(p + 500));
  CHECK(f.engine.fence_high_water() == p + 500);
  CHECK(f.engine.counters().fence_conflicts == 1);

  // The next acquisition proposes above the mark and needs one round.
  f.engine.lock(lock_of("s", 10000), f.client, 2);
  CHECK(proposal_in(f, request_kind::acquire) == p + 501);
}

TEST_CASE("a fencing round's answer from a master without its register is no vote (seed 255)",
          "[engine]") {
  fixture f;
  f.know_master_time(); // as after any earlier round: proposals are at least it
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  const std::uint64_t p = proposal_in(f, request_kind::acquire);
  f.answer(0, request_kind::acquire, granted(0));
  f.answer(1, request_kind::acquire, granted(p + 499));
  f.answer(2, request_kind::acquire, granted(0));
  REQUIRE(f.nodes.of(request_kind::fence_bump).size() == 5);
  REQUIRE(proposal_in(f, request_kind::fence_bump) == p + 500);
  f.answer(0, request_kind::fence_bump, bulk(p + 499)); // yes
  f.answer(1, request_kind::fence_bump, bulk(p + 500)); // another daemon took p + 500: no
  f.answer(2, request_kind::fence_bump, ":-2\r\n");     // FLUSHALL: no register
  f.answer(3, request_kind::fence_bump, bulk(p + 500)); // no
  f.answer(4, request_kind::fence_bump, bulk(p + 499)); // yes
  // Two yes of three needed: p + 500 is not this lock's token (another daemon has it). Before
  // the fix the -2 read as a counter of 0, a third yes, and the LOCK answered OK.
  for (const auto& line : f.client->lines)
    CHECK(words(line.second)[0] != "OK");
  CHECK(f.nodes.of(request_kind::fence_bump).size() >= 9); // a third round, above p + 500
}

TEST_CASE("without a conflict the proposal is the token, and tokens increase", "[engine]") {
  fixture f;
  f.connect(0, "run0", 86'400'000, 41); // a reconnect reads a larger counter
  std::uint64_t last = 0;
  for (std::uint64_t seq = 0; seq < 3; ++seq) {
    f.nodes.sent.clear();
    f.engine.lock(lock_of("r" + std::to_string(seq), 10000), f.client, seq);
    for (std::size_t node = 0; node < 3; ++node)
      f.answer(node, request_kind::acquire, granted(last));
    const auto token = std::stoull(words(f.client->lines[seq])[2]);
    CHECK(token > last);
    CHECK(token > 41);
    last = token;
  }
  CHECK(f.nodes.of(request_kind::fence_bump).empty());
}

TEST_CASE("proposals are at least the time a majority of the masters has reached (seed 170613)",
          "[engine]") {
  // Three daemons that each proposed one above the counter they last saw tied and leapfrogged:
  // every round lost to the others' rounds in flight, and a waiter on a free lock gave up after
  // four fencing rounds, again and again. Proposals that follow the masters' clock do not tie.
  fixture f(0, true, false); // no clock sample yet
  const auto proposal = [&](std::string_view resource, std::uint64_t seq) {
    f.engine.lock(lock_of(resource, 10000), f.client, seq);
    return proposal_in(f, request_kind::acquire);
  };
  // Two samples: no majority yet, so the proposal is one above the counter.
  CHECK(f.engine.on_node_time(0, 1000, 0));
  CHECK(f.engine.on_node_time(1, 9000, 0)); // a clock set far ahead
  CHECK(proposal("a", 1) == 1);
  // Three: the time that three of them have reached, carried on by the daemon's clock.
  CHECK(f.engine.on_node_time(2, 1000, 500));
  f.advance(10ms);
  const std::uint64_t first = proposal("b", 2);
  CHECK(first == 1000'010'000);
  // Proposals stay unique and above everything seen within the same microsecond.
  CHECK(proposal("c", 3) == first + 1);

  // A quarantined master's clock does not count: two trusted samples are no majority.
  fixture quarantined(0, true, false);
  for (std::size_t node = 0; node < 3; ++node)
    CHECK(quarantined.engine.on_node_time(node, 1000, 0));
  quarantined.advance(1ms);
  CHECK_FALSE(quarantined.engine.on_node_time(2, 5000, 0)); // a forward jump: quarantined
  quarantined.engine.lock(lock_of("q", 10000), quarantined.client, 1);
  CHECK(proposal_in(quarantined, request_kind::acquire) == 1);

  // Clocks beyond 2^53 µs on a majority are no floor (a client's doubles would round the token).
  fixture far(0, true, false);
  for (std::size_t node = 0; node < 3; ++node)
    CHECK(far.engine.on_node_time(node, 9'100'000'000, 0));
  far.engine.lock(lock_of("d", 10000), far.client, 1);
  CHECK(proposal_in(far, request_kind::acquire) == 1);

  // Clocks behind on a majority hold the floor back to theirs: the majority-th latest counts.
  fixture behind(0, true, false);
  CHECK(behind.engine.on_node_time(0, 1000, 0));
  CHECK(behind.engine.on_node_time(1, 400, 0));
  CHECK(behind.engine.on_node_time(2, 400, 0));
  behind.engine.lock(lock_of("e", 10000), behind.client, 1);
  CHECK(proposal_in(behind, request_kind::acquire) == 400'000'000);
}

TEST_CASE("UNLOCK answers OK when a majority deleted, NOTHELD otherwise", "[engine]") {
  fixture f;
  unlock_request req{"r", "0123456789abcdef0123456789abcdef01234567"};
  f.engine.unlock(req, f.client, 1);
  const auto releases = f.nodes.of(request_kind::release);
  REQUIRE(releases.size() == 5);
  CHECK(releases[0].bytes.find(req.owner) != std::string::npos);
  f.answer(0, request_kind::release, ":1\r\n");
  f.answer(1, request_kind::release, ":0\r\n");
  f.answer(2, request_kind::release, ":1\r\n");
  f.answer(3, request_kind::release, ":1\r\n");
  CHECK(f.client->lines[1] == "OK\n");

  f.nodes.sent.clear();
  f.engine.unlock(req, f.client, 2);
  f.answer(0, request_kind::release, ":0\r\n");
  f.answer(1, request_kind::release, ":0\r\n");
  f.answer(2, request_kind::release, ":0\r\n");
  CHECK(f.client->lines[2] == "NOTHELD\n");
  CHECK(f.engine.counters().released == 1);
  CHECK(f.engine.counters().notheld == 1);
}

TEST_CASE("EXTEND answers OK with validity, NOTHELD or NOQUORUM", "[engine]") {
  fixture f;
  extend_request req{"r", "0123456789abcdef0123456789abcdef01234567", 20000};
  f.engine.extend(req, f.client, 1);
  REQUIRE(f.nodes.of(request_kind::extend).size() == 5);
  CHECK(f.nodes.of(request_kind::extend)[0].bytes.find("$5\r\n20000\r\n") != std::string::npos);
  f.now += 1ms;
  for (std::size_t node = 0; node < 3; ++node)
    f.answer(node, request_kind::extend, extended(1));
  CHECK(f.client->lines[1] == "OK 19797\n"); // 20000 - 1 - 202

  f.nodes.sent.clear();
  f.engine.extend(req, f.client, 2);
  for (std::size_t node = 0; node < 3; ++node)
    f.answer(node, request_kind::extend, extended(0));
  CHECK(f.client->lines[2] == "NOTHELD\n");

  f.nodes.sent.clear();
  f.nodes.up = {true, true, false, false, false};
  f.engine.extend(req, f.client, 3);
  CHECK(f.client->lines[3] == "NOQUORUM 0 3\n");
}

TEST_CASE("a node that forgot its scripts gets the command by source and a reload", "[engine]") {
  fixture f;
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  f.answer(2, request_kind::acquire, "-NOSCRIPT No matching script. Please use EVAL.\r\n");
  REQUIRE(f.nodes.reloads == std::vector<std::size_t>{2});
  const auto resent = f.nodes.of(request_kind::acquire).back();
  CHECK(resent.node == 2);
  CHECK(resent.bytes.starts_with("*8\r\n$4\r\nEVAL\r\n"));
  auto reply = resp(granted(0));
  f.engine.on_reply(2, resent.tag, decode(resent.tag, *reply));
  f.answer(0, request_kind::acquire, granted(0));
  f.answer(1, request_kind::acquire, granted(0));
  CHECK(f.client->lines[1].starts_with("OK "));
}

TEST_CASE("an error reply is a failed vote", "[engine]") {
  fixture f;
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  for (std::size_t node = 0; node < 3; ++node)
    f.answer(node, request_kind::acquire, "-OOM command not allowed\r\n");
  CHECK(f.client->lines[1] == "NOQUORUM 0 3\n");
}

TEST_CASE("operation slots are reused", "[engine]") {
  fixture f;
  for (std::uint64_t seq = 0; seq < 100; ++seq) {
    f.nodes.sent.clear();
    f.engine.lock(lock_of("r", 10000), f.client, seq);
    for (std::size_t node = 0; node < 3; ++node)
      f.answer(node, request_kind::acquire, granted(0));
    // Answered; the slot waits for the two silent nodes until the node timeout.
    CHECK(f.engine.operations_in_flight() == 1);
    f.advance(51ms);
  }
  CHECK(f.client->lines.size() == 100);
  CHECK(f.engine.operations_in_flight() == 0);
}

namespace {
lock_request waiting_lock(std::string_view resource, std::uint64_t ttl, std::uint64_t wait) {
  lock_request req = lock_of(resource, ttl);
  req.wait_ms = wait;
  return req;
}
std::string owner_in(const std::string& reply) {
  return words(reply)[1];
}
} // namespace

TEST_CASE("a permit try-lock behind waiters of another n asks the masters in a round that takes "
          "nothing",
          "[engine][wait][kinds]") {
  fixture f;
  auto waiter = std::make_shared<captured_replies>();
  f.engine.lock(with_permits(waiting_lock("s", 10000, 5000), 1), waiter, 0);
  REQUIRE(f.count_sent(request_kind::acquire_slot) == 5);
  // The waiters' n: BUSY 0 from the queue, no master asked.
  auto same = std::make_shared<captured_replies>();
  f.engine.lock(with_permits(lock_of("s", 1000), 1), same, 0);
  CHECK(same->lines.at(0) == "BUSY 0\n");
  CHECK(f.count_sent(request_kind::acquire_slot) == 5);
  // Another n: every master is asked with the first slot -1 (permit_acquire.lua: a check).
  auto other = std::make_shared<captured_replies>();
  f.engine.lock(with_permits(lock_of("s", 1000), 3), other, 0);
  const auto checks = f.nodes.of(request_kind::acquire_slot);
  REQUIRE(checks.size() == 10);
  for (std::size_t i = 5; i < 10; ++i)
    CHECK(checks[i].bytes.find("$1\r\n3\r\n$2\r\n-1\r\n$0\r\n\r\n") != std::string::npos);
  // Three masters of five say 1 permit is in force, and a master without 'S permits' answers
  // among the first three: the round hears every master before it decides (three refusals
  // would decide a normal round).
  const std::string in_force = "*6\r\n:2\r\n$1\r\n1\r\n" + master_time + "$1\r\n0\r\n:-1\r\n";
  const std::string checked = "*6\r\n:0\r\n:0\r\n" + master_time + "$1\r\n0\r\n:-1\r\n";
  f.answer(0, request_kind::acquire_slot, checked);
  f.answer(1, request_kind::acquire_slot, in_force);
  f.answer(2, request_kind::acquire_slot, in_force);
  f.answer(3, request_kind::acquire_slot, in_force);
  CHECK(other->lines.empty());
  f.answer(4, request_kind::acquire_slot, checked);
  REQUIRE(other->lines.size() == 1);
  CHECK(other->lines[0].starts_with("ERR PERMITS_MISMATCH 1 "));
  CHECK(waiter->lines.empty());                    // the waiter still waits, its attempt unanswered
  CHECK(f.count_sent(request_kind::cleanup) == 0); // it took nothing anywhere

  // A master that never answers: after the round's timeout, BUSY (never NOQUORUM) where fewer
  // than three report another n.
  auto again = std::make_shared<captured_replies>();
  f.engine.lock(with_permits(lock_of("s", 1000), 3), again, 0);
  for (std::size_t node = 0; node < 4; ++node)
    f.answer(node, request_kind::acquire_slot, node < 2 ? in_force : checked);
  CHECK(again->lines.empty());
  f.advance(std::chrono::seconds(2));
  REQUIRE(again->lines.size() == 1);
  CHECK(again->lines[0] == "BUSY 0\n");
  // The waiter's attempt timed out too: its cleanup goes to all five, none for the check.
  CHECK(f.count_sent(request_kind::cleanup) == 5);
}

TEST_CASE("WAIT queues waiters first come, first served, and UNLOCK hands over at once",
          "[engine][wait]") {
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  auto c = std::make_shared<captured_replies>();
  f.engine.lock(lock_of("r", 10000), a, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  REQUIRE(a->lines[0].starts_with("OK "));

  f.nodes.sent.clear();
  f.engine.lock(waiting_lock("r", 10000, 5000), b, 0);
  f.engine.lock(waiting_lock("r", 10000, 5000), c, 0);
  CHECK(f.engine.waiters() == 2);
  CHECK(f.count_sent(request_kind::acquire) == 5); // only the head tries
  f.answer_all(request_kind::acquire, refused(9000), 3);
  CHECK(b->lines.empty());                         // refused, but it waits
  CHECK(f.count_sent(request_kind::cleanup) == 2); // where it has not answered

  // A try-lock does not jump the queue.
  auto d = std::make_shared<captured_replies>();
  f.engine.lock(lock_of("r", 10000), d, 0);
  CHECK(d->lines[0] == "BUSY 0\n");

  // The holder unlocks through this daemon: the head gets the lock in the same round.
  f.nodes.sent.clear();
  f.engine.unlock(unlock_request{"r", owner_in(a->lines[0])}, a, 1);
  CHECK(f.count_sent(request_kind::release) == 0);
  REQUIRE(f.count_sent(request_kind::hand_over) == 5);
  f.answer_all(request_kind::hand_over, handed(1, 1), 3);
  CHECK(a->lines[1] == "OK\n");
  CHECK(b->lines[0].starts_with("OK "));
  CHECK(f.count_sent(request_kind::acquire) == 0);
  CHECK(c->lines.empty());
  CHECK(f.engine.waiters() == 1);

  // c is next: b unlocks, c gets it.
  f.nodes.sent.clear();
  f.engine.unlock(unlock_request{"r", owner_in(b->lines[0])}, b, 1);
  f.answer_all(request_kind::hand_over, handed(3, 1), 3);
  CHECK(b->lines[1] == "OK\n");
  CHECK(c->lines[0].starts_with("OK "));
  CHECK(f.engine.waiters() == 0);
}

namespace {
// `holder` holds "r" (fence 1); `waiter` waits behind it after one refused attempt (it retries
// 300-320 ms later).
// Returns the waiter's place in the engine (its requests' tag.op).
std::uint32_t hold_with_waiter(fixture& f, const std::shared_ptr<captured_replies>& holder,
                               const std::shared_ptr<captured_replies>& waiter) {
  f.engine.lock(lock_of("r", 10000), holder, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  REQUIRE(holder->lines[0].starts_with("OK "));
  f.engine.lock(waiting_lock("r", 10000, 5000), waiter, 0);
  const std::uint32_t place = f.last_tag(0, request_kind::acquire).op;
  f.answer_all(request_kind::acquire, refused(300), 3);
  REQUIRE(waiter->lines.empty());
  f.nodes.sent.clear();
  return place;
}
// The holder's UNLOCK hands the lock over; masters 0-2 grant it, master 1 with a fence of
// another daemon's above the proposal: a fencing round follows. Returns the proposal.
std::uint64_t hand_over_meeting_a_fence(fixture& f,
                                        const std::shared_ptr<captured_replies>& holder) {
  f.engine.unlock(unlock_request{"r", owner_in(holder->lines[0])}, holder, 1);
  const std::uint64_t p = proposal_in(f, request_kind::hand_over);
  f.answer(0, request_kind::hand_over, handed(1, 1));
  f.answer(1, request_kind::hand_over, handed(p + 699, 1)); // another daemon handed out p + 699
  f.answer(2, request_kind::hand_over, handed(1, 1));
  return p;
}
// `owner`'s EXTEND of "r" hears from master 4 that its key is gone: judged a key loss there
// only if the lease counts master 4 among its masters.
void extend_meets_key_loss_on_4(fixture& f, const std::string& owner,
                                const std::shared_ptr<captured_replies>& sink) {
  f.engine.extend(extend_request{"r", owner, 10000}, sink, 1);
  f.answer(0, request_kind::extend, extended(1));
  f.answer(4, request_kind::extend, extended(-1));
  CHECK(f.engine.status_of(4).reason == lock_engine::quarantine_reason::keyloss);
  CHECK(f.engine.counters().key_losses == 1);
}
} // namespace

TEST_CASE("a hand-over gives the waiter a fresh owner, a larger fence and validity from its round",
          "[engine][handover]") {
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  hold_with_waiter(f, a, b);
  const std::string a_owner = owner_in(a->lines[0]);
  f.now += 5ms;
  f.engine.unlock(unlock_request{"r", a_owner}, a, 1);
  const auto sent = f.nodes.of(request_kind::hand_over);
  REQUIRE(sent.size() == 5);
  CHECK(sent[0].bytes.find(std::string(script_sha(script::hand_over))) != std::string::npos);
  CHECK(sent[0].bytes.find(a_owner) != std::string::npos);
  f.now += 2ms; // validity counts from the start of the hand-over round, not the waiter's request
  f.answer(0, request_kind::hand_over, handed(1, 1));
  f.answer(2, request_kind::hand_over, handed(1, 1));
  CHECK(b->lines.empty());
  f.answer(4, request_kind::hand_over, handed(1, 1));
  CHECK(a->lines[1] == "OK\n");
  REQUIRE(b->lines.count(0) == 1);
  const auto granted_b = words(b->lines[0]);
  REQUIRE(granted_b.size() == 4);
  CHECK(granted_b[1] != a_owner);
  CHECK(sent[0].bytes.find(granted_b[1]) != std::string::npos); // the owner the masters hold
  CHECK(std::stoull(granted_b[2]) > std::stoull(words(a->lines[0])[2]));
  CHECK(std::stoll(granted_b[3]) == 10000 - 2 - 100 - 2); // 2 ms elapsed, drift 1% + 2 ms
  CHECK(f.engine.counters().handovers == 1);
  CHECK(f.engine.counters().released == 1);
  CHECK(f.engine.waiters() == 0);
  CHECK(f.count_sent(request_kind::cleanup) == 0);

  // The new holder's lease is this daemon's: its UNLOCK (nobody waiting) releases normally.
  f.engine.unlock(unlock_request{"r", granted_b[1]}, b, 1);
  CHECK(f.count_sent(request_kind::release) == 5);
}

TEST_CASE("the releaser's answer is a plain UNLOCK's: its key deleted on a quorum, whatever the "
          "waiter got",
          "[engine][handover]") {
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  hold_with_waiter(f, a, b); // granted by masters 0-2
  f.engine.unlock(unlock_request{"r", owner_in(a->lines[0])}, a, 1);
  f.answer(0, request_kind::hand_over, handed(1, 1));
  f.answer(3, request_kind::hand_over, handed(1, -1)); // it never had the key: set anew
  f.answer(2, request_kind::hand_over, handed(1, 1));
  CHECK(b->lines[0].starts_with("OK ")); // three masters hold the waiter's owner
  CHECK(a->lines.count(1) == 0);         // found on two: the two others decide
  f.answer(1, request_kind::hand_over, not_handed(4000));
  CHECK(a->lines.count(1) == 0);
  f.engine.on_failure(4, f.last_tag(4, request_kind::hand_over));
  CHECK(a->lines[1] == "NOTHELD\n");
  CHECK(f.engine.counters().notheld == 1);
  CHECK(f.count_sent(request_kind::cleanup) == 0); // as after a plain UNLOCK
  for (std::size_t node = 0; node < 5; ++node)
    CHECK(f.engine.status_of(node).reason == lock_engine::quarantine_reason::none);
}

TEST_CASE("an UNLOCK handing over waits node_timeout_ms for the masters, not the waiter's "
          "tenth of its TTL",
          "[engine][handover]") {
  // Issue 21, case 5: the hand-over round ran under the waiter's node timeout; with a 100 ms
  // waiter and slow masters the UNLOCK answered NOTHELD although every master deleted its key.
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  f.engine.lock(lock_of("r", 10000), a, 0);
  f.answer_all(request_kind::acquire, granted(0));
  f.engine.lock(waiting_lock("r", 100, 5000), b, 0); // its rounds wait 10 ms for a master
  f.answer_all(request_kind::acquire, refused(9000), 3);
  f.nodes.sent.clear();
  f.engine.unlock(unlock_request{"r", owner_in(a->lines[0])}, a, 1);
  f.answer(3, request_kind::hand_over, handed(1, 1));
  f.answer(4, request_kind::hand_over, handed(1, 1));
  f.advance(11ms); // the waiter's round is over: no quorum, it releases and retries
  CHECK(b->lines.empty());
  CHECK(f.count_sent(request_kind::cleanup) == 5);
  CHECK(a->lines.count(1) == 0); // the UNLOCK still waits for the others
  f.advance(19ms);
  for (std::size_t node = 0; node < 3; ++node)
    f.answer(node, request_kind::hand_over, handed(1, 1));
  CHECK(a->lines[1] == "OK\n"); // deleted on all five: as without a waiter
  f.nodes.sent.clear();
  f.advance(30ms); // the waiter's retry
  REQUIRE(f.count_sent(request_kind::acquire) == 5);
  f.answer_all(request_kind::acquire, granted(3), 3);
  CHECK(b->lines[0].starts_with("OK "));
}

TEST_CASE("a hand-over notices a master that lost the releaser's key, as a plain UNLOCK does",
          "[engine][handover][quarantine]") {
  // Issue 21, case 1: the hand-over path never recorded "gone", the master that lost its data
  // kept voting and a second holder got a lock it had lost.
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  f.engine.lock(lock_of("r", 10000), a, 0);
  f.answer_all(request_kind::acquire, granted(0));
  f.engine.lock(waiting_lock("r", 10000, 5000), b, 0);
  f.answer_all(request_kind::acquire, refused(9000), 3);
  f.engine.unlock(unlock_request{"r", owner_in(a->lines[0])}, a, 1);
  // Master 2 lost its data (FLUSHALL): neither the key nor the fence key, nothing granted.
  f.answer(2, request_kind::hand_over, "*6\r\n:-1\r\n:0\r\n" + master_time + ":-1\r\n$1\r\n0\r\n");
  f.answer(0, request_kind::hand_over, handed(1, 1));
  CHECK(f.engine.status_of(2).reason == lock_engine::quarantine_reason::keyloss);
  f.answer(1, request_kind::hand_over, handed(1, 1));
  f.answer(3, request_kind::hand_over, handed(1, 1));
  CHECK(a->lines[1] == "OK\n");
  CHECK(b->lines[0].starts_with("OK "));
  f.answer(4, request_kind::hand_over, handed(1, -1)); // after the answer: judged all the same
  CHECK(f.engine.status_of(4).reason == lock_engine::quarantine_reason::keyloss);
  CHECK(f.engine.counters().key_losses == 2);
}

TEST_CASE("a NOSCRIPT after the UNLOCK was answered sends the release again by source",
          "[engine][handover]") {
  // Issue 21, suspected: drain_reply took NOSCRIPT for a failed vote; the releaser's key stayed
  // on that master until its TTL.
  const bool with_waiter = GENERATE(false, true);
  CAPTURE(with_waiter);
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  f.engine.lock(lock_of("r", 10000), a, 0);
  f.answer_all(request_kind::acquire, granted(0));
  if (with_waiter) {
    f.engine.lock(waiting_lock("r", 10000, 5000), b, 0);
    f.answer_all(request_kind::acquire, refused(9000), 3);
  }
  f.nodes.sent.clear();
  f.engine.unlock(unlock_request{"r", owner_in(a->lines[0])}, a, 1);
  const request_kind kind = with_waiter ? request_kind::hand_over : request_kind::release;
  f.answer_all(kind, with_waiter ? handed(1, 1) : ":1\r\n", 3);
  REQUIRE(a->lines[1] == "OK\n");
  const request_tag late = f.last_tag(4, kind);
  f.nodes.sent.clear();
  auto noscript = resp("-NOSCRIPT No matching script. Please use EVAL.\r\n");
  f.engine.on_reply(4, late, decode(late, *noscript));
  CHECK(f.nodes.reloads == std::vector<std::size_t>{4});
  const auto resent = f.nodes.of(kind);
  REQUIRE(resent.size() == 1);
  CHECK(resent[0].node == 4);
  CHECK(
      resent[0].bytes.starts_with(with_waiter ? "*17\r\n$4\r\nEVAL\r\n" : "*7\r\n$4\r\nEVAL\r\n"));
  CHECK(resent[0].bytes.find(owner_in(a->lines[0])) != std::string::npos);
}

TEST_CASE("a hand-over without validity for the waiter releases both owners, and the waiter "
          "retries",
          "[engine][handover]") {
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  f.engine.lock(lock_of("r", 10000), a, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  f.engine.lock(waiting_lock("r", 100, 5000), b, 0); // 97 ms of validity at most
  f.answer_all(request_kind::acquire, refused(9000), 3);
  f.nodes.sent.clear();
  const std::string a_owner = owner_in(a->lines[0]);
  f.engine.unlock(unlock_request{"r", a_owner}, a, 1);
  f.engine.on_failure(4, f.last_tag(4, request_kind::hand_over));
  f.now += 98ms; // the masters answer after the waiter's validity ran out
  f.answer_all(request_kind::hand_over, handed(1, 1), 3);
  CHECK(a->lines[1] == "OK\n"); // its key was replaced on a quorum
  CHECK(b->lines.empty());      // no grant: it retries
  CHECK(f.engine.waiters() == 1);
  // The waiter's owner everywhere; the releaser's is a plain UNLOCK's (master 4, whose
  // connection was lost, keeps it until its TTL, as without a waiter).
  const auto cleanups = f.nodes.of(request_kind::cleanup);
  REQUIRE(cleanups.size() == 5);
  for (const auto& c : cleanups)
    CHECK(c.bytes.find(a_owner) == std::string::npos);
  f.nodes.sent.clear();
  f.advance(40ms); // the default retry plus the largest jitter
  REQUIRE(f.count_sent(request_kind::acquire) == 5);
  f.answer_all(request_kind::acquire, granted(3), 3);
  CHECK(b->lines[0].starts_with("OK "));
}

TEST_CASE("a hand-over that meets a larger fence takes a fencing round", "[engine][handover]") {
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  hold_with_waiter(f, a, b);
  const std::uint64_t p = hand_over_meeting_a_fence(f, a);
  CHECK(a->lines[1] == "OK\n");
  CHECK(b->lines.empty());
  REQUIRE(f.count_sent(request_kind::fence_bump) == 5);
  f.answer_all(request_kind::fence_bump, bulk(p + 699), 3);
  REQUIRE(b->lines.count(0) == 1);
  CHECK(words(b->lines[0])[2] == std::to_string(p + 700));
  CHECK(f.engine.counters().fence_conflicts == 1);
}

TEST_CASE("a hand-over's grants during its fencing round are the new holder's: a master "
          "among them that loses its key is noticed",
          "[engine][handover][quarantine]") {
  // Simulator seed 23001971 --faults key-loss: the grants of masters 1 and 3 came after the
  // quorum, while the fencing round was out, and were dropped; the lease named masters 0, 2 and
  // 4 only, the holder's EXTEND that master 1 answered "gone" judged nothing, and master 1
  // voted for a second holder of a lock it had lost.
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  hold_with_waiter(f, a, b);
  const std::uint64_t p = hand_over_meeting_a_fence(f, a);
  REQUIRE(f.count_sent(request_kind::fence_bump) == 5);
  f.answer(3, request_kind::hand_over, handed(1, 1)); // granted there too, after the quorum
  f.answer_all(request_kind::fence_bump, bulk(p + 699), 3);
  REQUIRE(b->lines.count(0) == 1);
  f.answer(4, request_kind::hand_over, handed(1, 1)); // and there, after the grant
  const std::string b_owner = words(b->lines[0])[1];
  // Masters 3 and 4 lose the key: the holder's EXTEND notices it.
  f.engine.extend(extend_request{"r", b_owner, 10000}, b, 1);
  f.answer(0, request_kind::extend, extended(1));
  f.answer(3, request_kind::extend, extended(-1));
  f.answer(4, request_kind::extend, extended(-1));
  CHECK(f.engine.status_of(3).reason == lock_engine::quarantine_reason::keyloss);
  CHECK(f.engine.status_of(4).reason == lock_engine::quarantine_reason::keyloss);
  CHECK(f.engine.counters().key_losses == 2);
}

TEST_CASE("a LOCK's grants after its quorum are the holder's: one whose master loses the "
          "key is noticed, come during or after the fencing round",
          "[engine][quarantine]") {
  fixture f;
  auto a = std::make_shared<captured_replies>();
  const bool keep = GENERATE(false, true);
  CAPTURE(keep);
  lock_request request = lock_of("r", 10000);
  request.keep = keep;
  f.engine.lock(request, a, 0);
  const std::uint64_t p = proposal_in(f, request_kind::acquire);
  f.answer(0, request_kind::acquire, granted(1));
  f.answer(1, request_kind::acquire, granted(p + 699)); // another daemon handed out p + 699
  f.answer(2, request_kind::acquire, granted(1));
  REQUIRE(f.count_sent(request_kind::fence_bump) == 5);
  f.answer(3, request_kind::acquire, granted(1)); // during the fencing round
  f.answer_all(request_kind::fence_bump, bulk(p + 699), 3);
  REQUIRE(a->lines.count(0) == 1);
  REQUIRE(a->lines[0].starts_with("OK "));
  f.answer(4, request_kind::acquire, granted(1)); // after the grant
  const std::string owner = words(a->lines[0])[1];
  f.nodes.sent.clear();
  if (keep)
    f.advance(3400ms); // the first renewal, a third of the TTL in
  else
    f.engine.extend(extend_request{"r", owner, 10000}, a, 1);
  REQUIRE(f.nodes.of(request_kind::extend).size() == 5);
  f.answer(0, request_kind::extend, extended(1));
  f.answer(3, request_kind::extend, extended(-1));
  f.answer(4, request_kind::extend, extended(-1));
  CHECK(f.engine.status_of(3).reason == lock_engine::quarantine_reason::keyloss);
  CHECK(f.engine.status_of(4).reason == lock_engine::quarantine_reason::keyloss);
  CHECK(f.engine.counters().key_losses == 2);
}

TEST_CASE("a permit's late grant of another slot is released there, come during or after "
          "its fencing round",
          "[engine][kinds]") {
  // A master that gives the attempt another slot than the majority's holds a minority hold of
  // it: take_slot releases those the round heard of; the grants that come later are released
  // as they come, or the slot stays taken there until the TTL.
  fixture f;
  const lock_request request = with_permits(lock_of("s", 10000), 2);
  f.engine.lock(request, f.client, 0);
  const std::uint64_t p = proposal_in(f, request_kind::acquire_slot);
  f.answer(0, request_kind::acquire_slot, granted_slot(1, 0));
  f.answer(1, request_kind::acquire_slot, granted_slot(p + 699, 0)); // a larger fence
  f.answer(2, request_kind::acquire_slot, granted_slot(1, 0));
  REQUIRE(f.count_sent(request_kind::fence_bump) == 5);
  f.answer(3, request_kind::acquire_slot, granted_slot(1, 1)); // slot 1, during the fencing round
  f.answer_all(request_kind::fence_bump, bulk(p + 699), 3);
  REQUIRE(f.client->lines[0].starts_with("OK "));
  const std::string owner = owner_in(f.client->lines[0]);
  const auto cleanups_on = [&](std::size_t node) {
    std::size_t n = 0;
    for (const auto& c : f.nodes.of(request_kind::cleanup))
      n += c.node == node && c.bytes.find(owner) != std::string::npos;
    return n;
  };
  CHECK(cleanups_on(3) == 1);
  f.answer(4, request_kind::acquire_slot, granted_slot(1, 1)); // slot 1, after the grant
  CHECK(cleanups_on(4) == 1);
  for (const std::size_t node : {0, 1, 2})
    CHECK(cleanups_on(node) == 0);
}

TEST_CASE("a fenced grant's late grants are its own after its place serves another request",
          "[engine][kinds][quarantine]") {
  // A fenced grant frees its operation's place at once; the next request takes it, of another
  // kind maybe. A grant of the winning round that comes then is still the lock's (its round's
  // tag says so): counted for the lease of an exclusive lock, released where a permit got
  // another slot. Both were dropped when the place's new kind did not send that request.
  fixture f;
  const bool permit_first = GENERATE(false, true);
  CAPTURE(permit_first);
  auto a = std::make_shared<captured_replies>();
  const request_kind attempt = permit_first ? request_kind::acquire_slot : request_kind::acquire;
  f.engine.lock(permit_first ? with_permits(lock_of("s", 10000), 2) : lock_of("r", 10000), a, 0);
  const std::uint64_t p = proposal_in(f, attempt);
  const auto grant = [&](std::uint64_t previous, int slot) {
    return permit_first ? granted_slot(previous, slot) : granted(previous);
  };
  f.answer(0, attempt, grant(1, 0));
  f.answer(1, attempt, grant(p + 699, 0)); // a larger fence: a fencing round
  f.answer(2, attempt, grant(1, 0));
  f.answer_all(request_kind::fence_bump, bulk(p + 699), 3);
  REQUIRE(a->lines[0].starts_with("OK "));
  const std::string owner = owner_in(a->lines[0]);
  // Another kind's request takes the place; then master 4's grant of the first round comes.
  auto other = std::make_shared<captured_replies>();
  f.engine.lock(permit_first ? lock_of("r", 10000) : with_permits(lock_of("s", 10000), 2), other,
                0);
  const request_kind other_attempt =
      permit_first ? request_kind::acquire : request_kind::acquire_slot;
  REQUIRE(f.last_tag(0, other_attempt).op == f.last_tag(4, attempt).op); // the same place
  f.answer(4, attempt, grant(1, 1));
  if (permit_first) {
    std::size_t released = 0; // the attempt's release (its semaphore's n last): any slot
    for (const auto& c : f.nodes.of(request_kind::cleanup))
      released += c.node == 4 && c.bytes.find(owner) != std::string::npos &&
                  c.bytes.ends_with("$1\r\n2\r\n");
    CHECK(released == 1);
  } else {
    extend_meets_key_loss_on_4(f, owner, a);
  }
}

TEST_CASE("a fenced hand-over's late grant is the new holder's after the waiter's place "
          "serves another request",
          "[engine][handover][quarantine]") {
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  const std::uint32_t waiter_place = hold_with_waiter(f, a, b);
  const std::uint64_t p = hand_over_meeting_a_fence(f, a);
  f.answer_all(request_kind::fence_bump, bulk(p + 699), 3);
  REQUIRE(b->lines.count(0) == 1);
  const std::string b_owner = words(b->lines[0])[1];
  // A permit takes the waiter's place, freed by its grant.
  f.engine.lock(with_permits(lock_of("s", 10000), 2), std::make_shared<captured_replies>(), 0);
  REQUIRE(f.last_tag(0, request_kind::acquire_slot).op == waiter_place);
  f.answer(4, request_kind::hand_over, handed(1, 1)); // granted there too, after the grant
  extend_meets_key_loss_on_4(f, b_owner, b);
}

TEST_CASE("a permit granted to a client that left is released on any slot where the winning "
          "round had not answered",
          "[engine][kinds]") {
  fixture f;
  const lock_request request = with_permits(lock_of("s", 10000), 2);
  auto a = std::make_shared<captured_replies>();
  f.engine.lock(request, a, 0);
  f.engine.client_gone(a.get());
  f.answer(0, request_kind::acquire_slot, granted_slot(1, 0));
  f.answer(1, request_kind::acquire_slot, granted_slot(1, 0));
  f.answer(2, request_kind::acquire_slot, granted_slot(1, 0)); // granted, nobody to tell
  CHECK(a->lines.empty());
  // Masters 3 and 4 have not answered: each may give the attempt slot 1, which the release of
  // the granted slot 0 would leave there until its TTL.
  std::array<std::size_t, 5> attempt_releases{};
  for (const auto& c : f.nodes.of(request_kind::cleanup))
    attempt_releases[c.node] += c.bytes.ends_with("$1\r\n2\r\n");
  CHECK(attempt_releases == std::array<std::size_t, 5>{0, 0, 0, 1, 1});
  CHECK(f.count_sent(request_kind::cleanup) == 7); // and the lock's release everywhere
}

TEST_CASE("UNLOCK releases normally for a foreign owner or while the head's attempt is in flight",
          "[engine][handover]") {
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  hold_with_waiter(f, a, b);
  // An owner this daemon did not grant (another daemon's, or a stale one).
  f.engine.unlock(unlock_request{"r", "0123456789abcdef0123456789abcdef01234567"}, a, 1);
  CHECK(f.count_sent(request_kind::hand_over) == 0);
  CHECK(f.count_sent(request_kind::release) == 5);
  f.answer_all(request_kind::release, ":0\r\n", 3);
  CHECK(a->lines[1] == "NOTHELD\n");

  // The head's own attempt is in flight (it retries at the refusal's hint).
  f.nodes.sent.clear();
  f.advance(321ms);
  REQUIRE(f.count_sent(request_kind::acquire) == 5);
  f.engine.unlock(unlock_request{"r", owner_in(a->lines[0])}, a, 2);
  CHECK(f.count_sent(request_kind::hand_over) == 0);
  CHECK(f.count_sent(request_kind::release) == 5);
  CHECK(f.engine.counters().handovers == 0);
}

TEST_CASE("nothing starts a waiter's round once its WAIT ran out, even before its expiry fired",
          "[engine][wait]") {
  // Issue 21, suspected: socket handlers run before timers in a loop turn, so an UNLOCK (or a
  // wake-up) could start a round for a waiter whose WAIT was over, and grant after the wait.
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  f.engine.lock(lock_of("r", 10000), a, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  f.engine.lock(waiting_lock("r", 10000, 100), b, 0);
  f.answer_all(request_kind::acquire, refused(9000), 3);
  f.nodes.sent.clear();
  f.now += 150ms; // the expiry is due, its timer has not fired yet
  f.engine.on_released(f.cfg.key_prefix + "r");
  CHECK(f.count_sent(request_kind::acquire) == 0);
  CHECK(b->lines[0].starts_with("BUSY "));
  CHECK(f.engine.waiters() == 0);

  auto c = std::make_shared<captured_replies>();
  f.engine.lock(waiting_lock("r", 10000, 100), c, 0);
  f.answer_all(request_kind::acquire, refused(9000), 3);
  f.nodes.sent.clear();
  f.now += 150ms;
  f.engine.unlock(unlock_request{"r", owner_in(a->lines[0])}, a, 1);
  CHECK(f.count_sent(request_kind::hand_over) == 0); // released as without a waiter
  CHECK(f.count_sent(request_kind::release) == 5);
  f.advance(0us);
  CHECK(c->lines[0].starts_with("BUSY "));
}

TEST_CASE("a waiter held off by another client retries when the holder's TTL suggests",
          "[engine][wait]") {
  fixture f;
  f.engine.lock(waiting_lock("r", 10000, 5000), f.client, 0);
  f.answer_all(request_kind::acquire, refused(300), 3);
  CHECK(f.client->lines.empty());
  f.nodes.sent.clear();
  f.advance(299ms);
  CHECK(f.count_sent(request_kind::acquire) == 0); // no busy loop before the hint
  for (int i = 0; i < 25 && f.count_sent(request_kind::acquire) == 0; ++i)
    f.advance(1ms); // the retry comes within the hint plus at most 20 ms of jitter
  REQUIRE(f.count_sent(request_kind::acquire) == 5);
  f.answer_all(request_kind::acquire, granted(0), 3);
  CHECK(f.client->lines[0].starts_with("OK "));
}

TEST_CASE("a try-lock that a majority granted and that failed in its fencing round wakes the "
          "waiter its key refused",
          "[engine][wait]") {
  // A review: the waiter was told the try-lock's TTL and slept it, though the failed attempt
  // released its key on every master at once.
  fixture f;
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  const std::uint64_t p = proposal_in(f, request_kind::acquire);
  f.answer(0, request_kind::acquire, granted(0));
  f.answer(1, request_kind::acquire, granted(p + 499)); // another daemon handed out more
  f.answer(2, request_kind::acquire, granted(0));
  REQUIRE(f.nodes.of(request_kind::fence_bump).size() == 5); // the second round is out
  f.engine.lock(waiting_lock("r", 10000, 20000), f.client, 2);
  f.answer_all(request_kind::acquire, refused(10000)); // refused by the try-lock's key
  REQUIRE(f.client->lines.count(2) == 0);
  const std::size_t attempts = f.count_sent(request_kind::acquire);
  for (std::size_t node = 0; node < 3; ++node)
    f.engine.on_failure(node, f.last_tag(node, request_kind::fence_bump));
  REQUIRE(f.client->lines[1].starts_with("NOQUORUM"));
  f.advance(1ms);
  CHECK(f.count_sent(request_kind::acquire) > attempts); // not 10 s later
}

TEST_CASE("a WAIT that runs out answers BUSY", "[engine][wait]") {
  fixture f;
  f.engine.lock(waiting_lock("r", 10000, 100), f.client, 0);
  f.answer_all(request_kind::acquire, refused(8000), 3);
  f.nodes.sent.clear();
  f.advance(99ms);
  CHECK(f.client->lines.empty());
  f.advance(1ms);
  REQUIRE(f.client->lines.count(0) == 1);
  CHECK(f.client->lines[0].starts_with("BUSY "));
  CHECK(f.count_sent(request_kind::acquire) == 0);
  CHECK(f.engine.waiters() == 0);
  CHECK(f.engine.counters().busy == 1);
}

TEST_CASE("a head whose wait runs out during its attempt lets the next waiter try at once",
          "[engine][wait]") {
  // The next waiter had no entry of its own on the masters (the head's ended with its wait), so
  // it slept the holder's remaining TTL, and a release through another daemon did not wake it
  // (simulator seed 70131).
  fixture f;
  auto b = std::make_shared<captured_replies>();
  auto c = std::make_shared<captured_replies>();
  f.engine.lock(waiting_lock("r", 10000, 30), b, 0);
  f.engine.lock(waiting_lock("r", 10000, 5000), c, 0);
  f.answer(0, request_kind::acquire, refused(9000));
  f.answer(1, request_kind::acquire, refused(9000));
  f.advance(31ms); // b's wait runs out while its attempt is out
  CHECK(b->lines.empty());
  REQUIRE(f.count_sent(request_kind::acquire) == 5); // b's
  f.answer(2, request_kind::acquire, refused(9000));
  REQUIRE(b->lines.count(0) == 1);
  CHECK(b->lines[0].starts_with("BUSY "));
  f.advance(1ms);
  CHECK(f.count_sent(request_kind::acquire) == 10); // and c's, not 9 s later
  f.answer_all(request_kind::acquire, granted(0), 3);
  CHECK(c->lines[0].starts_with("OK "));
}

TEST_CASE("the status views list the valid leases and KEEP locks with their fence, and the queues",
          "[engine][views]") {
  fixture f;
  f.cfg.key_prefix = "app:";
  auto holder = std::make_shared<captured_replies>();
  auto keeper = std::make_shared<captured_replies>();
  f.engine.lock(lock_of("orders", 10000), holder, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  REQUIRE(holder->lines[0].starts_with("OK "));
  lock_request keep = lock_of("jobs", 3000);
  keep.keep = true;
  f.engine.lock(keep, keeper, 0);
  f.answer_all(request_kind::acquire, granted(1), 3);
  REQUIRE(keeper->lines[0].starts_with("OK "));
  auto b = std::make_shared<captured_replies>();
  auto c = std::make_shared<captured_replies>();
  f.engine.lock(waiting_lock("orders", 10000, 5000), b, 0);
  f.engine.lock(waiting_lock("orders", 10000, 5000), c, 0);

  const std::vector<held_lock> held = f.engine.held_locks();
  REQUIRE(held.size() == 2);
  CHECK(held[0].resource == "jobs"); // by name, without the key prefix
  CHECK(held[0].keep);
  CHECK(held[0].fence == std::stoull(words(keeper->lines[0])[2]));
  CHECK(held[0].valid_until ==
        f.now + std::chrono::milliseconds(std::stoll(words(keeper->lines[0])[3])));
  CHECK(held[1].resource == "orders");
  CHECK_FALSE(held[1].keep);
  CHECK(held[1].kind == "exclusive");
  CHECK(held[1].label.empty());
  CHECK(held[1].fence == std::stoull(words(holder->lines[0])[2]));
  CHECK(held[1].valid_until ==
        f.now + std::chrono::milliseconds(std::stoll(words(holder->lines[0])[3])));
  const std::vector<resource_waiters> waiting = f.engine.waiting();
  REQUIRE(waiting.size() == 1);
  CHECK(waiting[0].resource == "orders");
  CHECK(waiting[0].waiters == 2);

  // UNLOCK ends the KEEP lock; a lease whose validity ran out is no longer listed.
  f.engine.unlock(unlock_request{"jobs", owner_in(keeper->lines[0])}, keeper, 1);
  REQUIRE(f.engine.held_locks().size() == 1);
  f.now += 10s;
  CHECK(f.engine.held_locks().empty());
}

TEST_CASE("acquire latency splits into each attempt's round and a granted LOCK's wait",
          "[engine][wait]") {
  fixture f;
  auto holder = std::make_shared<captured_replies>();
  f.engine.lock(lock_of("r", 10000), holder, 0);
  f.now += 1ms;
  f.answer_all(request_kind::acquire, granted(0), 3);
  REQUIRE(holder->lines[0].starts_with("OK "));
  // A waiter: refused after 2 ms, retries 300-320 ms later, granted 3 ms after that.
  const clock_type::time_point requested = f.now;
  f.engine.lock(waiting_lock("r", 10000, 5000), f.client, 0);
  f.now += 2ms;
  f.answer_all(request_kind::acquire, refused(300), 3);
  f.nodes.sent.clear();
  for (int i = 0; i < 330 && f.count_sent(request_kind::acquire) == 0; ++i)
    f.advance(1ms);
  REQUIRE(f.count_sent(request_kind::acquire) == 5);
  const clock_type::time_point winning_round = f.now;
  f.now += 3ms;
  f.answer_all(request_kind::acquire, granted(1), 3);
  REQUIRE(f.client->lines[0].starts_with("OK "));

  const latency_histogram& rounds = f.engine.acquire_round_latency();
  const latency_histogram& waits = f.engine.acquire_wait_latency();
  CHECK(rounds.count() == 3); // every attempt: the holder's, the waiter's two
  CHECK(rounds.sum_seconds() == Approx(0.006));
  CHECK(waits.count() == 2); // every granted LOCK: the holder waited 0
  CHECK(waits.sum_seconds() ==
        Approx(std::chrono::duration<double>(winning_round - requested).count()));
  CHECK(waits.buckets()[0] == 1);  // the holder: 0 s
  CHECK(waits.buckets()[11] == 1); // the waiter: 302-322 ms, in (0.25, 0.5]
  CHECK(f.engine.acquire_latency().sum_seconds() ==
        Approx(rounds.sum_seconds() - 0.002 +
               waits.sum_seconds())); // the refused round is in the wait
}

TEST_CASE("a waiter whose client left is never granted", "[engine][wait]") {
  fixture f;
  auto holder = std::make_shared<captured_replies>();
  auto leaver = std::make_shared<captured_replies>();
  auto stayer = std::make_shared<captured_replies>();
  f.engine.lock(lock_of("r", 10000), holder, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  f.engine.lock(waiting_lock("r", 10000, 5000), leaver, 0);
  f.answer_all(request_kind::acquire, refused(9000), 3);
  f.engine.lock(waiting_lock("r", 10000, 5000), stayer, 0);
  f.engine.client_gone(leaver.get());
  CHECK(f.engine.waiters() == 1);
  f.nodes.sent.clear();
  f.engine.unlock(unlock_request{"r", owner_in(holder->lines[0])}, holder, 1);
  f.answer_all(request_kind::hand_over, handed(1, 1), 3);
  CHECK(leaver->lines.empty());
  CHECK(stayer->lines[0].starts_with("OK "));
}

TEST_CASE("when the head waiter leaves, the next one tries at once", "[engine][wait]") {
  // Issue 11, bug 4: the head's client disconnects while the lock is held elsewhere; the next
  // waiter must try (and win once the lease is gone), not sleep until its own deadline.
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  f.engine.lock(waiting_lock("r", 1000, 8000), a, 0);
  f.answer_all(request_kind::acquire, refused(1700), 3); // held through another daemon
  f.engine.lock(waiting_lock("r", 1000, 8000), b, 0);
  f.nodes.sent.clear();
  f.engine.client_gone(a.get());
  f.advance(0us);
  REQUIRE(f.count_sent(request_kind::acquire) == 5); // b, now the head, tries
  f.answer_all(request_kind::acquire, refused(1400), 3);
  f.nodes.sent.clear();
  f.advance(1421ms); // the hint plus the largest jitter
  REQUIRE(f.count_sent(request_kind::acquire) == 5);
  f.answer_all(request_kind::acquire, granted(0), 3);
  CHECK(b->lines[0].starts_with("OK "));
  CHECK(a->lines.empty());
}

TEST_CASE("KEEP refused by max_keep_locks_per_connection does not free a place", "[engine][keep]") {
  // Issue 11, bug 6: five KEEP requests with a limit of one gave OK, TOO_MANY, OK, TOO_MANY, OK.
  fixture f;
  f.cfg.max_keep_locks_per_connection = 1;
  for (std::uint64_t seq = 0; seq < 5; ++seq) {
    const std::string resource = "k" + std::to_string(seq); // the request only views it
    lock_request req = lock_of(resource, 5000);
    req.keep = true;
    f.engine.lock(req, f.client, seq);
    if (seq == 0)
      f.answer_all(request_kind::acquire, granted(0), 3);
  }
  CHECK(f.client->lines[0].starts_with("OK "));
  for (std::uint64_t seq = 1; seq < 5; ++seq)
    CHECK(f.client->lines[seq].starts_with("ERR TOO_MANY"));
  CHECK(f.engine.keep_locks() == 1);

  // The WAIT limit refuses a KEEP without giving back more than it took.
  f.cfg.max_keep_locks_per_connection = 2;
  f.cfg.max_waiters_per_resource = 0;
  lock_request waiting = waiting_lock("w", 5000, 1000);
  waiting.keep = true;
  f.engine.lock(waiting, f.client, 5);
  CHECK(f.client->lines[5].starts_with("ERR TOO_MANY"));
  lock_request second = lock_of("x", 5000);
  second.keep = true;
  f.engine.lock(second, f.client, 6);
  f.answer_all(request_kind::acquire, granted(0), 3);
  CHECK(f.client->lines[6].starts_with("OK "));
  lock_request third = lock_of("y", 5000);
  third.keep = true;
  f.engine.lock(third, f.client, 7);
  CHECK(f.client->lines[7].starts_with("ERR TOO_MANY"));
  CHECK(f.engine.keep_locks() == 2);
}

TEST_CASE("an acquisition in flight for a client that left is released", "[engine][wait]") {
  fixture f;
  f.engine.lock(waiting_lock("r", 10000, 5000), f.client, 0);
  f.engine.client_gone(f.client.get());
  f.answer_all(request_kind::acquire, granted(0), 3);
  CHECK(f.client->lines.empty());
  CHECK(f.count_sent(request_kind::cleanup) == 5);
  CHECK(f.engine.counters().acquired == 0);
}

TEST_CASE("KEEP renews about every TTL/3 and releases when the client leaves", "[engine][keep]") {
  fixture f;
  lock_request req = lock_of("k", 3000);
  req.keep = true;
  f.engine.lock(req, f.client, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  REQUIRE(f.client->lines[0].starts_with("OK "));
  CHECK(f.engine.keep_locks() == 1);
  for (int renewal = 1; renewal <= 9; ++renewal) { // three TTLs
    f.nodes.sent.clear();
    f.advance(1000ms);
    REQUIRE(f.count_sent(request_kind::extend) == 5);
    CHECK(f.nodes.of(request_kind::extend)[0].bytes.find("$4\r\n3000\r\n") != std::string::npos);
    f.answer_all(request_kind::extend, extended(1), 3);
  }
  CHECK(f.engine.counters().renewed == 9);
  CHECK(f.client->pushed.empty());
  f.nodes.sent.clear();
  f.engine.client_gone(f.client.get());
  CHECK(f.count_sent(request_kind::cleanup) == 5);
  CHECK(f.engine.keep_locks() == 0);
  f.advance(2000ms);
  CHECK(f.count_sent(request_kind::extend) == 0);
}

TEST_CASE("KEEP pushes LOST when no quorum renews it in time, a third of the TTL ahead",
          "[engine][keep]") {
  // The promise redlockctl run builds on (PROTOCOL.md): LOST comes while at least TTL/3 of the
  // validity is left, so that the holder can stop before the lock can go to someone else.
  const std::uint64_t ttl = GENERATE(300, 3000, 30000);
  const bool renewed_once = GENERATE(false, true);
  CAPTURE(ttl, renewed_once);
  fixture f;
  lock_request req = lock_of("k", ttl);
  req.keep = true;
  f.engine.lock(req, f.client, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  const std::string grant = f.client->lines[0];
  const std::string owner = owner_in(grant);
  const auto validity = words(grant).at(3);
  // The lease as the daemon counts it: from the grant (the fake clock stood still meanwhile).
  clock_type::time_point valid_until = f.now + std::chrono::milliseconds(std::stoll(validity));
  if (renewed_once) {
    // One renewal at TTL/3 works; the answers come a little later. Then three masters go.
    while (f.count_sent(request_kind::extend) == 0)
      f.advance(1ms);
    const auto sent_at = f.now;
    f.advance(10ms); // within the node timeout of every TTL here
    f.answer_all(request_kind::extend, extended(1), 3);
    REQUIRE(f.engine.counters().renewed == 1);
    // Renewed validity counts from when the renewal was sent.
    const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(f.now - sent_at);
    valid_until =
        f.now + std::chrono::milliseconds(validity_ms(ttl, elapsed, f.cfg.clock_drift_factor));
  }
  f.nodes.up = {true, true, false, false, false}; // three masters gone
  // Millisecond steps, so that the fake timer fires when due, not up to a step late.
  for (std::uint64_t i = 0; i < 2 * ttl && f.client->pushed.empty(); ++i)
    f.advance(1ms);
  REQUIRE(f.client->pushed.size() == 1);
  CHECK(f.client->pushed[0] == "LOST k " + owner + "\n");
  CHECK(f.engine.counters().lost == 1);
  CHECK(f.engine.keep_locks() == 0);
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(valid_until - f.now);
  INFO("LOST pushed with " << left.count() << " ms of validity left of a " << ttl << " ms TTL");
  CHECK(left >= std::chrono::milliseconds(ttl / 3));
}

TEST_CASE("KEEP pushes LOST at once when a majority no longer holds it", "[engine][keep]") {
  fixture f;
  lock_request req = lock_of("k", 3000);
  req.keep = true;
  f.engine.lock(req, f.client, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  f.advance(1000ms);
  f.answer_all(request_kind::extend, extended(0), 3);
  CHECK(f.client->pushed.size() == 1);
}

TEST_CASE("UNLOCK of a KEEP lock stops its renewals", "[engine][keep]") {
  fixture f;
  lock_request req = lock_of("k", 3000);
  req.keep = true;
  f.engine.lock(req, f.client, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  f.engine.unlock(unlock_request{"k", owner_in(f.client->lines[0])}, f.client, 1);
  f.answer_all(request_kind::release, ":1\r\n", 3);
  f.nodes.sent.clear();
  f.advance(5000ms);
  CHECK(f.count_sent(request_kind::extend) == 0);
  CHECK(f.client->pushed.empty());
}

TEST_CASE("lock-delay follows a dropped KEEP connection and an expiry, not an UNLOCK",
          "[engine][delay]") {
  fixture f(500);
  lock_request req = lock_of("k", 3000);
  req.keep = true;
  f.engine.lock(req, f.client, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  f.engine.client_gone(f.client.get());
  auto other = std::make_shared<captured_replies>();
  f.nodes.sent.clear();
  f.engine.lock(lock_of("k", 3000), other, 0);
  CHECK(other->lines[0] == "BUSY 500\n");
  CHECK(f.count_sent(request_kind::acquire) == 0);
  f.advance(500ms);
  f.engine.lock(lock_of("k", 3000), other, 1);
  f.answer_all(request_kind::acquire, granted(0), 3);
  REQUIRE(other->lines[1].starts_with("OK "));

  // That plain lease expires without an UNLOCK: delayed again after its TTL.
  f.advance(3000ms);
  f.engine.lock(lock_of("k", 3000), other, 2);
  CHECK(other->lines[2].starts_with("BUSY "));
  f.advance(500ms);
  f.nodes.sent.clear();
  f.engine.lock(lock_of("k", 3000), other, 3);
  f.answer_all(request_kind::acquire, granted(0), 3);
  REQUIRE(other->lines[3].starts_with("OK "));

  // A clean UNLOCK leaves no delay.
  f.engine.unlock(unlock_request{"k", owner_in(other->lines[3])}, other, 4);
  f.answer_all(request_kind::release, ":1\r\n", 3);
  f.nodes.sent.clear();
  f.engine.lock(lock_of("k", 3000), other, 5);
  CHECK(f.count_sent(request_kind::acquire) == 5);

  // Nor does an UNLOCK answered NOTHELD (its key lost on three masters): its client stopped
  // work all the same, and its lease's end is no sign of a holder at work (a review).
  f.answer_all(request_kind::acquire, granted(0), 3);
  REQUIRE(other->lines[5].starts_with("OK "));
  f.engine.unlock(unlock_request{"k", owner_in(other->lines[5])}, other, 6);
  f.answer_all(request_kind::release, ":-1\r\n", 3);
  REQUIRE(other->lines[6] == "NOTHELD\n");
  f.advance(3001ms);
  f.nodes.sent.clear();
  f.engine.lock(lock_of("k", 3000), other, 7);
  CHECK(f.count_sent(request_kind::acquire) == 5);
}

TEST_CASE("lock-delay follows a shared hold's and a permit's unclean end as an exclusive lock's",
          "[engine][delay][kinds]") {
  // Issue 23: lock-delay for every kind. A KEEP hold whose connection drops delays its name
  // for every kind of request on this daemon; a shared hold released by UNLOCK does not.
  const bool permit = GENERATE(false, true);
  CAPTURE(permit);
  const auto of_kind = [&](lock_request req) {
    req.mode = permit ? lock_mode::permits : lock_mode::shared;
    req.permits = permit ? 2 : 0;
    return req;
  };
  const request_kind attempt = permit ? request_kind::acquire_slot : request_kind::acquire;
  // A permit's grant answers the slot it took too (decode_acquire_slot): slot 0.
  const std::string grant =
      permit ? "*6\r\n:1\r\n$1\r\n0\r\n" + master_time + "$1\r\n0\r\n:0\r\n" : granted(0);
  fixture f(500);
  lock_request keep = of_kind(lock_of("k", 3000));
  keep.keep = true;
  f.engine.lock(keep, f.client, 0);
  f.answer_all(attempt, grant, 3);
  REQUIRE(f.client->lines[0].starts_with("OK "));
  f.engine.client_gone(f.client.get());
  auto other = std::make_shared<captured_replies>();
  f.nodes.sent.clear();
  f.engine.lock(of_kind(lock_of("k", 3000)), other, 0); // the same kind
  CHECK(other->lines[0] == "BUSY 500\n");
  // An exclusive lock of that name: delayed behind shared holders, whose guard is its key; a
  // semaphore and the lock of its name are apart (PROTOCOL.md), so not behind permits.
  f.engine.lock(lock_of("k", 3000), other, 1);
  if (permit) {
    CHECK(other->lines.count(1) == 0);
    REQUIRE(f.count_sent(request_kind::acquire) == 5);
    f.answer_all(request_kind::acquire, granted(0), 3);
    REQUIRE(other->lines[1].starts_with("OK "));
  } else {
    CHECK(other->lines[1] == "BUSY 500\n");
    CHECK(f.count_sent(request_kind::acquire) == 0);
  }
  CHECK(f.count_sent(request_kind::acquire_slot) == 0);
  f.advance(500ms);
  f.engine.lock(of_kind(lock_of("k", 3000)), other, 2);
  f.answer_all(attempt, grant, 3);
  REQUIRE(other->lines[2].starts_with("OK "));
  // A clean UNLOCK of it leaves no delay.
  f.engine.unlock(unlock_request{"k", owner_in(other->lines[2])}, other, 3);
  f.answer_all(request_kind::release, ":1\r\n", 3);
  REQUIRE(other->lines[3] == "OK\n");
  f.nodes.sent.clear();
  f.engine.lock(of_kind(lock_of("k", 3000)), other, 4);
  CHECK(f.count_sent(attempt) == 5);
}

TEST_CASE("no node votes until the fleet is known from a majority of intact masters",
          "[engine][quarantine]") {
  fixture f(0, false);
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  CHECK(f.client->lines[1] == "NOQUORUM 0 3\n");
  f.connect(0, "r0", 86'400'000, 7, 0);
  f.connect(1, "r1", 86'400'000, 7, 0);
  f.nodes.sent.clear();
  f.engine.lock(lock_of("r", 10000), f.client, 2);
  CHECK(f.nodes.of(request_kind::acquire).empty());
  f.connect(2, "r2", 86'400'000, 7, 0);
  f.nodes.sent.clear();
  f.engine.lock(lock_of("r", 10000), f.client, 3);
  CHECK(f.nodes.of(request_kind::acquire).size() == 3); // 3 and 4 have not connected yet
  f.connect(3, "r3", 86'400'000, 7, 0);
  f.connect(4, "r4", 86'400'000, 7, 0);
  f.nodes.sent.clear();
  f.engine.lock(lock_of("s", 10000), f.client, 4);
  CHECK(f.nodes.of(request_kind::acquire).size() == 5);
  CHECK(f.engine.fence_high_water() >= 7);
}

// The answer of a master to the fleet read: its fence counter and longest-TTL record.
std::string fleet_facts(std::uint64_t fence, std::uint64_t max_ttl) {
  const std::string a = std::to_string(fence);
  const std::string b = std::to_string(max_ttl);
  return "*2\r\n$" + std::to_string(a.size()) + "\r\n" + a + "\r\n$" + std::to_string(b.size()) +
         "\r\n" + b + "\r\n";
}

TEST_CASE("a master with a new run_id is quarantined for the fleet's longest TTL, then re-seeded "
          "with the fleet's largest fence",
          "[engine][quarantine]") {
  fixture f;
  // This daemon only ever granted short locks; the masters recorded a longer one (another daemon).
  f.connect(1, "a-new-run-id", 50, std::nullopt, 0);
  CHECK(f.engine.counters().restarts == 1);
  CHECK(f.engine.status_of(1).reason == lock_engine::quarantine_reason::restart);

  // Its quarantine mark is set on it at once (seed.lua's 'mark' step); the seed checks it.
  const auto marks = f.nodes.of(request_kind::quarantine_mark);
  REQUIRE(marks.size() == 1);
  CHECK(marks[0].node == 1);
  // The fleet read waits for the mark: a lock the master lost before the mark was granted
  // before the read.
  CHECK(f.nodes.of(request_kind::fleet_read).empty());
  f.engine.on_reply(1, marks[0].tag, decode(marks[0].tag, *resp(":0\r\n")));
  // Its quarantine is sized from a majority of the other masters: 0, 2, 3 and 4 are asked, and
  // the master itself (whether it has a fence register now; it does not vote).
  const auto reads = f.nodes.of(request_kind::fleet_read);
  REQUIRE(reads.size() == 5);
  for (const auto& c : reads)
    CHECK(c.tag.op == 1);
  f.answer(0, request_kind::fleet_read, fleet_facts(900, 7'200'000));
  f.answer(2, request_kind::fleet_read, fleet_facts(40, 1000));
  f.answer(3, request_kind::fleet_read, fleet_facts(41, 1000));
  CHECK(f.engine.max_ttl_granted() == 7'200'000);
  CHECK(f.engine.status_of(1).remaining_ms >= 7'200'000 - 50);
  CHECK(f.engine.fence_high_water() >= 900);

  f.nodes.sent.clear();
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  const auto acquires = f.nodes.of(request_kind::acquire);
  CHECK(acquires.size() == 4);
  for (const auto& c : acquires)
    CHECK(c.node != 1); // it does not vote

  // A release still reaches it, without its vote.
  f.nodes.sent.clear();
  f.engine.unlock(unlock_request{"r", "0123456789abcdef0123456789abcdef01234567"}, f.client, 2);
  std::size_t to_node_1 = 0;
  for (const auto& c : f.nodes.of(request_kind::cleanup))
    to_node_1 += c.node == 1 ? 1 : 0;
  CHECK(to_node_1 == 1);
  CHECK(f.nodes.of(request_kind::release).size() == 4);

  // After the quarantine it is re-seeded with the fleet's largest fence and longest TTL, and
  // votes again only once the seed is confirmed.
  f.nodes.sent.clear();
  f.advance(std::chrono::hours(2) + 72'003ms); // the longest TTL plus its drift allowance
  const auto seeds = f.nodes.of(request_kind::seed);
  REQUIRE(seeds.size() == 1);
  CHECK(seeds[0].node == 1);
  CHECK(seeds[0].bytes.find("$7\r\n7200000\r\n") != std::string::npos);
  const std::string fence = std::to_string(f.engine.fence_high_water());
  CHECK(f.engine.fence_high_water() >= 900);
  CHECK(seeds[0].bytes.find("$" + std::to_string(fence.size()) + "\r\n" + fence + "\r\n") !=
        std::string::npos);
  f.nodes.sent.clear();
  f.engine.lock(lock_of("s", 10000), f.client, 3);
  CHECK(f.nodes.of(request_kind::acquire).size() == 4); // not before the seed is confirmed
  auto ok = resp(":1\r\n");
  f.engine.on_reply(1, seeds[0].tag, decode(seeds[0].tag, *ok));
  CHECK(f.engine.status_of(1).reason == lock_engine::quarantine_reason::none);
  f.nodes.sent.clear();
  f.engine.lock(lock_of("t", 10000), f.client, 4);
  CHECK(f.nodes.of(request_kind::acquire).size() == 5);
}

TEST_CASE("a master that lost its data again during its quarantine is quarantined again, "
          "whether the seed or a reconnection finds its quarantine mark gone",
          "[engine][quarantine]") {
  fixture f;
  f.connect(1, "a-new-run-id", 50, std::nullopt, 0);
  const auto answer_mark = [&](const char* text) {
    const auto marks = f.nodes.of(request_kind::quarantine_mark);
    REQUIRE_FALSE(marks.empty());
    f.engine.on_reply(1, marks.back().tag, decode(marks.back().tag, *resp(text)));
  };
  answer_mark(":0\r\n");             // set for the first time
  const auto past_quarantine = [&] { // the longest TTL, its drift allowance and some
    return std::chrono::milliseconds(f.engine.max_ttl_granted() * 105 / 100 + 1000);
  };
  for (const std::size_t node : {0, 2, 3})
    f.answer(node, request_kind::fleet_read, fleet_facts(40, 1000));
  const auto losses = f.engine.counters().key_losses;

  // The seed finds the mark gone: the master lost data again since the quarantine started.
  f.nodes.sent.clear();
  f.advance(past_quarantine());
  auto seeds = f.nodes.of(request_kind::seed);
  REQUIRE(seeds.size() == 1);
  f.engine.on_reply(1, seeds[0].tag, decode(seeds[0].tag, *resp(":0\r\n")));
  CHECK(f.engine.status_of(1).reason == lock_engine::quarantine_reason::restart);
  CHECK(f.engine.status_of(1).remaining_ms >= 1000);
  CHECK(f.engine.counters().key_losses == losses + 1);
  answer_mark(":0\r\n"); // a fresh mark: a first set is no loss
  CHECK(f.engine.counters().key_losses == losses + 1);
  for (const std::size_t node : {0, 2, 3})
    f.answer(node, request_kind::fleet_read, fleet_facts(40, 1000));
  f.nodes.sent.clear();
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  CHECK(f.nodes.of(request_kind::acquire).size() == 4); // it does not vote

  // A reconnection finds that mark gone too.
  f.nodes.sent.clear();
  f.connect(1, "a-new-run-id", 5000, 7);
  answer_mark(":0\r\n");
  CHECK(f.engine.counters().key_losses == losses + 2);
  CHECK(f.engine.status_of(1).remaining_ms >= 1000);
  // And when it is there at the seed, the master votes again.
  answer_mark(":1\r\n");
  for (const std::size_t node : {0, 2, 3})
    f.answer(node, request_kind::fleet_read, fleet_facts(40, 1000));
  f.nodes.sent.clear();
  f.advance(past_quarantine());
  seeds = f.nodes.of(request_kind::seed);
  REQUIRE(seeds.size() == 1);
  f.engine.on_reply(1, seeds[0].tag, decode(seeds[0].tag, *resp(":1\r\n")));
  CHECK(f.engine.status_of(1).reason == lock_engine::quarantine_reason::none);
}

TEST_CASE("a reconnection's mark answer counts though the fleet read was asked again meanwhile",
          "[engine][quarantine]") {
  // Simulator seed 13004379 --faults key-loss: the master lost its data twice while this daemon
  // was cut off during its quarantine; at the reconnection the mark was gone, but the fleet read
  // restarted before the answer came and the answer was dropped, the mark it set again let the
  // seed through, and the master voted 47 ms later.
  fixture f;
  f.connect(1, "a-new-run-id", 50, std::nullopt, 0);
  CHECK(f.nodes.of(request_kind::quarantine_mark).at(0).bytes.find("$4\r\nmark\r\n") !=
        std::string::npos);
  f.answer(1, request_kind::quarantine_mark, ":0\r\n"); // set for the first time
  const auto losses = f.engine.counters().key_losses;
  f.nodes.sent.clear();
  f.connect(1, "a-new-run-id", 5000, 7); // the same run again: the mark is set again
  const auto marks = f.nodes.of(request_kind::quarantine_mark);
  REQUIRE(marks.size() == 1);
  // Set once already: a mark gone since stays a loss on the master (seed.lua), so that this
  // answer, were it lost with the connection, would not be lost with it.
  CHECK(marks[0].bytes.find("$6\r\nremark\r\n") != std::string::npos);
  f.nodes.sent.clear();
  f.advance(5s); // no majority answered the fleet read: it is asked again
  REQUIRE_FALSE(f.nodes.of(request_kind::fleet_read).empty());
  // The mark was gone when the reconnection set it: the master lost data again.
  f.engine.on_reply(1, marks[0].tag, decode(marks[0].tag, *resp(":0\r\n")));
  CHECK(f.engine.counters().key_losses == losses + 1);
  for (const std::size_t node : {0, 2, 3})
    f.answer(node, request_kind::fleet_read, fleet_facts(40, 1000));
  CHECK(f.engine.status_of(1).remaining_ms >= 1000);
  f.nodes.sent.clear();
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  CHECK(f.nodes.of(request_kind::acquire).size() == 4); // it does not vote
}

TEST_CASE("a quarantine mark is not sent again while one is out, and is at the reconnection "
          "after its connection failed",
          "[engine][quarantine]") {
  // A review: the timer sent a second 'mark' beside a slow one. Its answer came after the first
  // one's; a loss between the two was then covered by the mark it set again, and the next
  // reconnection's 'remark' found it there.
  fixture f;
  f.connect(1, "a-new-run-id", 50, std::nullopt, 0);
  const auto marks = f.nodes.of(request_kind::quarantine_mark);
  REQUIRE(marks.size() == 1);
  f.nodes.sent.clear();
  f.advance(5s); // the answer is slow: the timer fires several times
  CHECK(f.nodes.of(request_kind::quarantine_mark).empty());
  f.engine.on_failure(1, marks[0].tag); // lost with its connection
  f.connect(1, "a-new-run-id", 5000, 7);
  REQUIRE(f.nodes.of(request_kind::quarantine_mark).size() == 1);
  // An error answer is sent again at the next timer.
  const auto again = f.nodes.of(request_kind::quarantine_mark);
  f.engine.on_reply(1, again[0].tag, decode(again[0].tag, *resp("-ERR busy\r\n")));
  f.nodes.sent.clear();
  f.advance(2s);
  CHECK(f.nodes.of(request_kind::quarantine_mark).size() == 1);
}

TEST_CASE("a master without a fence counter on a fleet that has one counts as restarted",
          "[engine][quarantine]") {
  fixture f;
  f.connect(0, "run0", 86'400'000, 5);            // the fleet has handed out fences
  f.connect(2, "run2", 86'400'000, std::nullopt); // same run, up a day: FLUSHALL or a new disk
  CHECK(f.engine.status_of(2).reason == lock_engine::quarantine_reason::keyloss);
  f.answer(2, request_kind::quarantine_mark, ":0\r\n");
  CHECK(f.nodes.of(request_kind::fleet_read).size() == 5); // the four others and itself
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  CHECK(f.nodes.of(request_kind::acquire).size() == 4);
}

TEST_CASE("a fleet read counts only masters that kept their data", "[engine][quarantine]") {
  fixture f;
  f.connect(0, "new-0", 10, std::nullopt, 0);
  f.connect(1, "new-1", 10, std::nullopt, 0);
  f.answer(0, request_kind::quarantine_mark, ":0\r\n");
  f.answer(1, request_kind::quarantine_mark, ":0\r\n");
  // Node 0's read: node 1 lost its data too, so its answer does not make a majority.
  f.answer(1, request_kind::fleet_read, fleet_facts(0, 0));
  f.answer(2, request_kind::fleet_read, fleet_facts(5, 1000));
  f.answer(3, request_kind::fleet_read, fleet_facts(6, 1000));
  f.nodes.sent.clear();
  f.advance(3'700'000ms);
  CHECK(f.nodes.of(request_kind::seed).empty()); // still waiting for node 4
  CHECK(f.engine.status_of(0).reason == lock_engine::quarantine_reason::restart);
}

TEST_CASE("a new fleet's read asks again at once when a master it could not ask becomes usable "
          "(in CI, a daemon whose masters' handshakes ended one after the other waited 20 node "
          "timeouts)",
          "[engine][quarantine]") {
  fixture f(0, false);
  // Three masters of a new fleet told their facts; only master 0's handshake has ended.
  for (std::size_t node = 1; node < 5; ++node)
    f.nodes.up[node] = false;
  for (std::size_t node = 0; node < 3; ++node)
    f.connect(node, "new-" + std::to_string(node), 10, std::nullopt, 0);
  f.answer(0, request_kind::quarantine_mark, ":0\r\n");
  REQUIRE(f.nodes.of(request_kind::fleet_read).size() == 1); // master 0 alone was asked
  f.answer(0, request_kind::fleet_read, "*2\r\n$-1\r\n$-1\r\n");
  CHECK(f.nodes.of(request_kind::seed).empty()); // one master without a register proves nothing
  // Masters 1 and 2 become usable: master 0's read goes to them now, not 20 node timeouts later.
  f.nodes.sent.clear();
  for (std::size_t node = 1; node < 3; ++node) {
    f.nodes.up[node] = true;
    f.engine.on_node_ready(node);
  }
  const auto reads = f.nodes.of(request_kind::fleet_read);
  REQUIRE_FALSE(reads.empty());
  std::size_t asked_for_0 = 0; // in the latest read for master 0
  for (const auto& c : reads)
    if (c.tag.op == 0 && c.tag.generation == reads.back().tag.generation)
      ++asked_for_0;
  REQUIRE(asked_for_0 == 3);
  for (std::size_t node = 0; node < 3; ++node)
    f.answer(node, request_kind::fleet_read, "*2\r\n$-1\r\n$-1\r\n");
  f.advance(100ms); // past the drift allowance of a fleet without locks
  CHECK(f.nodes.of(request_kind::seed).size() == 1); // a majority has no register: seeded
}

TEST_CASE("a new fleet's masters seeded one after the other do not hold back the others' reads "
          "(in CI, master 4 down, masters 1 and 3 seeded while 0 and 2 read, forever)",
          "[engine][quarantine]") {
  fixture f(0, false);
  f.nodes.up[4] = false; // never answers
  for (std::size_t node = 0; node < 4; ++node)
    f.connect(node, "new-" + std::to_string(node), 10, std::nullopt, 0);
  for (std::size_t node = 0; node < 4; ++node)
    f.answer(node, request_kind::quarantine_mark, ":0\r\n");
  const std::string empty = "*2\r\n$-1\r\n$-1\r\n";
  const auto answer_read = [&](std::size_t judged, std::size_t answering,
                               const std::string& bytes) {
    for (const auto& c : f.nodes.of(request_kind::fleet_read))
      if (c.node == answering && c.tag.op == judged) {
        f.engine.on_reply(answering, c.tag, decode(c.tag, *resp(bytes)));
        return;
      }
    FAIL("no read for " << judged << " went to " << answering);
  };
  // The reads for 1 and 3 find four masters without a register (a new fleet): seeded.
  for (const std::size_t judged : {1, 3})
    for (std::size_t answering = 0; answering < 4; ++answering)
      answer_read(judged, answering, empty);
  f.advance(100ms);
  for (const auto& seed : f.nodes.of(request_kind::seed))
    f.engine.on_reply(seed.node, seed.tag, decode(seed.tag, *resp(":1\r\n")));
  REQUIRE(f.engine.status_of(1).reason == lock_engine::quarantine_reason::none);
  REQUIRE(f.engine.status_of(3).reason == lock_engine::quarantine_reason::none);
  // The reads for 0 and 2 hear 1 and 3 with the register those seeds wrote: still a fleet
  // without history, whose masters all get seeded.
  for (const std::size_t judged : {0, 2})
    for (std::size_t answering = 0; answering < 4; ++answering)
      answer_read(judged, answering, answering % 2 == 1 ? fleet_facts(0, 0) : empty);
  f.advance(100ms);
  std::size_t seeds_of_0_and_2 = 0;
  for (const auto& seed : f.nodes.of(request_kind::seed))
    seeds_of_0_and_2 += seed.node % 2 == 0 ? 1 : 0;
  CHECK(seeds_of_0_and_2 == 2);
}

TEST_CASE("a grant proposed before the daemon knew the masters' clock takes a fencing round "
          "above it, so tokens go on up where a daemon took a fleet that lost its registers for a "
          "new one (seed 241625)",
          "[engine][quarantine][fencing]") {
  // Three masters: 0 never got a register (down when the fleet was seeded), 1 restarted empty,
  // 2, the only one with a register, is down. A daemon without memory reads a majority without
  // one: a new fleet, as far as it can tell, seeded with 0. Its first proposals were 1, 2, ...
  // below the tokens the fleet had handed out from the masters' clock.
  config cfg;
  cfg.nodes = {{"127.0.0.1", 1}, {"127.0.0.1", 2}, {"127.0.0.1", 3}};
  fake_nodes nodes(3);
  nodes.up[2] = false;
  auto log = std::make_shared<spdlog::logger>("test");
  clock_type::time_point now = clock_type::time_point{} + 1h;
  lock_engine engine(cfg, nodes, log, [&now] { return now; });
  auto client = std::make_shared<captured_replies>();
  const auto answer = [&](std::size_t node, request_kind kind, std::string_view bytes) {
    request_tag tag;
    for (const auto& c : nodes.of(kind))
      if (c.node == node)
        tag = c.tag;
    REQUIRE(tag.generation != 0);
    engine.on_reply(node, tag, decode(tag, *resp(bytes)));
  };
  engine.on_node_connected(0, {std::nullopt, 0, "r0", 1800});
  engine.on_node_connected(1, {std::nullopt, 0, "r1", 800});
  for (std::size_t node = 0; node < 2; ++node)
    answer(node, request_kind::quarantine_mark, ":0\r\n");
  for (std::size_t judged = 0; judged < 2; ++judged)
    for (const auto& c : nodes.of(request_kind::fleet_read))
      if (c.tag.op == judged)
        engine.on_reply(c.node, c.tag, decode(c.tag, *resp("*2\r\n$-1\r\n$-1\r\n")));
  now += 100ms;
  for (int i = 0; i < 2 && nodes.armed && *nodes.armed <= now; ++i) {
    nodes.armed.reset();
    engine.on_timer();
  }
  for (std::size_t node = 0; node < 2; ++node)
    answer(node, request_kind::seed, ":1\r\n");
  REQUIRE(engine.status_of(0).reason == lock_engine::quarantine_reason::none);
  REQUIRE(engine.status_of(1).reason == lock_engine::quarantine_reason::none);
  // No TIME sample yet: the proposal is one above the counter.
  engine.lock(lock_of("hot0", 10000), client, 1);
  REQUIRE(proposal_in(nodes, request_kind::acquire) == 1);
  // Both masters grant, and their answers carry their clocks (1,700,000,000 s): no OK with
  // token 1, but a fencing round above the clock first.
  for (std::size_t node = 0; node < 2; ++node)
    answer(node, request_kind::acquire, granted(0));
  CHECK(client->lines.count(1) == 0);
  const std::uint64_t bump = proposal_in(nodes, request_kind::fence_bump);
  CHECK(bump >= 1'700'000'000'000'000);
  for (std::size_t node = 0; node < 2; ++node)
    answer(node, request_kind::fence_bump, bulk(1));
  REQUIRE(client->lines.count(1) == 1);
  const auto reply = words(client->lines[1]);
  REQUIRE(reply[0] == "OK");
  CHECK(std::stoull(reply[2]) == bump);
  CHECK(engine.counters().fence_conflicts == 1); // INFO counts the second round
  // The next proposal already follows the clock: one round.
  engine.lock(lock_of("hot1", 10000), client, 2);
  CHECK(proposal_in(nodes, request_kind::acquire) > bump);
  for (std::size_t node = 0; node < 2; ++node)
    answer(node, request_kind::acquire, granted(0));
  CHECK(client->lines[2].starts_with("OK "));
  CHECK(engine.counters().fence_conflicts == 1);
}

TEST_CASE("a first grant whose proposal already follows the masters' clock takes no second round",
          "[engine][fencing]") {
  // A daemon restarted on a fleet whose register follows the clock: its first proposal, made
  // before any TIME sample, is one above that register, and the clock its votes bring is no
  // later than when the attempt started.
  fixture f(0, false, false);
  for (std::size_t node = 0; node < 5; ++node)
    f.connect(node, "run" + std::to_string(node), 86'400'000, 1'700'000'000'000'000);
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  CHECK(proposal_in(f, request_kind::acquire) == 1'700'000'000'000'001);
  f.answer_all(request_kind::acquire, granted(0), 3); // TIME 1,700,000,000 s
  CHECK(f.nodes.of(request_kind::fence_bump).empty());
  REQUIRE(f.client->lines.count(1) == 1);
  CHECK(words(f.client->lines[1])[2] == "1700000000000001");
}

TEST_CASE("a master up for less than the longest TTL at start is quarantined for the rest",
          "[engine][quarantine]") {
  fixture f(0, false);
  f.connect(0, "r0", 1000, 3, 30'000); // restarted a second ago, with its data (persistence)
  f.connect(1, "r1", 60'000, 3, 30'000);
  f.connect(2, "r2", 60'000, 3, 30'000);
  CHECK(f.engine.status_of(0).reason == lock_engine::quarantine_reason::none); // not started
  f.connect(3, "r3", 60'000, 3, 30'000);
  CHECK(f.engine.status_of(0).reason == lock_engine::quarantine_reason::restart);
  CHECK(f.engine.status_of(0).remaining_ms >= 29'000);
  f.connect(4, "r4", 60'000, 3, 30'000); // up long enough
  CHECK(f.engine.status_of(4).reason == lock_engine::quarantine_reason::none);
}

TEST_CASE("the acquire script records the TTL on every master that grants",
          "[engine][quarantine]") {
  fixture f;
  f.engine.lock(lock_of("r", 20000), f.client, 1);
  REQUIRE(f.nodes.sent.size() == 5);
  for (const auto& c : f.nodes.sent) {
    CHECK(c.tag.kind == request_kind::acquire);
    CHECK(c.bytes.find("$14\r\nredlockd:fence\r\n") != std::string::npos);
    CHECK(c.bytes.find("$5\r\n20000\r\n") != std::string::npos);
  }
  // The grant raises the record to the TTL (ARGV[2]) in the same script (acquire.lua writes
  // record_grant out; the script test "acquire decides as acquire_wait's grant does" runs it on a
  // master). The record's key is the fence key's name and ':max_ttl', made by the script: the
  // name register_keys gives every other script and the daemon's own reads.
  const std::string acquire(script_source(script::acquire));
  CHECK(acquire.find("local record = KEYS[2] .. ':max_ttl'") != std::string::npos);
  CHECK(acquire.find("redis.call('set', record, ttl)") != std::string::npos);
  CHECK(register_keys("redlockd:fence").max_ttl == "redlockd:fence:max_ttl");
}

TEST_CASE("unsafe_disable_quarantine lets a restarted master vote at once",
          "[engine][quarantine]") {
  fixture f;
  f.cfg.unsafe_disable_quarantine = true;
  f.connect(2, "before", 1);
  f.connect(2, "after", 1, std::nullopt);
  CHECK(f.engine.status_of(2).reason == lock_engine::quarantine_reason::none);
  f.engine.lock(lock_of("r", 1000), f.client, 1);
  CHECK(f.nodes.of(request_kind::acquire).size() == 5);
}

TEST_CASE("a master whose grant finds no fence register lost its data: quarantined, no vote",
          "[engine][quarantine]") {
  // The simulator's seed 24695: a FLUSHALL while connected. The scripts refuse to grant where
  // the register is missing ({-2, 0, TIME}) rather than re-create it.
  const std::string lost = "*4\r\n:-2\r\n:0\r\n" + master_time;
  fixture f;
  f.engine.lock(lock_of("k", 3000), f.client, 1);
  f.answer(0, request_kind::acquire, granted(0));
  f.answer(1, request_kind::acquire, granted(0));
  f.answer(2, request_kind::acquire, lost);
  f.answer(3, request_kind::acquire, refused(3000));
  f.answer(4, request_kind::acquire, refused(3000));
  CHECK(f.client->lines[1] == "NOQUORUM 2 3\n"); // its "grant" did not count
  CHECK(f.engine.status_of(2).reason == lock_engine::quarantine_reason::keyloss);
  CHECK(f.engine.counters().key_losses == 1);
  f.nodes.sent.clear();
  f.engine.lock(lock_of("j", 3000), f.client, 2);
  CHECK(f.nodes.of(request_kind::acquire).size() == 4); // it no longer votes
}

TEST_CASE("a master that lost the key of a valid KEEP lock is quarantined",
          "[engine][quarantine]") {
  fixture f;
  lock_request req = lock_of("k", 3000);
  req.keep = true;
  f.engine.lock(req, f.client, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  f.advance(1000ms);
  f.answer(0, request_kind::extend, extended(1));
  f.answer(1, request_kind::extend, extended(-1)); // FLUSHALL or eviction on node 1
  f.answer(2, request_kind::extend, extended(1));
  f.answer(3, request_kind::extend, extended(1));
  CHECK(f.client->pushed.empty()); // the lock itself is still held on a majority
  CHECK(f.engine.status_of(1).reason == lock_engine::quarantine_reason::keyloss);
  CHECK(f.engine.status_of(0).reason == lock_engine::quarantine_reason::none);
}

TEST_CASE("KEEP renewals judge only the masters that granted the lock", "[engine][quarantine]") {
  // Issue 11, bug 3: nodes 3 and 4 hold another owner's leftover key; the KEEP lock lands on 0,
  // 1 and 2. Their refusals of the renewals are not key losses.
  fixture f;
  lock_request req = lock_of("k", 3000);
  req.keep = true;
  f.engine.lock(req, f.client, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  f.answer(3, request_kind::acquire, refused(60'000));
  f.answer(4, request_kind::acquire, refused(60'000));
  for (int renewal = 0; renewal < 3; ++renewal) {
    f.advance(1000ms);
    f.answer(3, request_kind::extend, extended(0)); // before the quorum decision
    f.answer(4, request_kind::extend, extended(-1));
    f.answer_all(request_kind::extend, extended(1), 3);
  }
  CHECK(f.engine.counters().renewed == 3);
  CHECK(f.engine.counters().key_losses == 0);
  for (std::size_t node = 0; node < 5; ++node)
    CHECK(f.engine.status_of(node).reason == lock_engine::quarantine_reason::none);
}

TEST_CASE("the clock-jump bound is the drift allowance of the shortest TTL granted",
          "[engine][quarantine]") {
  // Issue 11: with 1 s locks the drift allowance is 12 ms; a 400 ms step used to pass unseen
  // under the fixed 500 ms bound.
  fixture f;
  f.engine.lock(lock_of("a", 1000), f.client, 1);
  f.answer_all(request_kind::acquire, granted(0), 3);
  REQUIRE(f.client->lines[1].starts_with("OK "));
  CHECK(f.engine.on_node_time(0, 1000, 0));
  f.now += 100ms;
  CHECK(f.engine.on_node_time(0, 1000, 100'000 + 11'000)); // 11 ms ahead: within the allowance
  f.now += 100ms;
  CHECK_FALSE(f.engine.on_node_time(0, 1000, 200'000 + 11'000 + 400'000)); // a 400 ms step
  CHECK(f.engine.status_of(0).reason == lock_engine::quarantine_reason::clock);
}

TEST_CASE("only TTLs a quorum granted count for the longest TTL and the clock-jump bound",
          "[engine][quarantine]") {
  // Issue 21, case 6: one refused LOCK x 3600000 made the daemon's longest TTL an hour (and a
  // restarted master sat out an hour); a refused short TTL tightened the clock-jump bound.
  fixture f(0, false);
  for (std::size_t node = 0; node < 5; ++node)
    f.connect(node, "run" + std::to_string(node), 86'400'000, 0, 5000);
  f.engine.lock(lock_of("a", 3'600'000), f.client, 1);
  f.answer_all(request_kind::acquire, refused(4000), 3);
  REQUIRE(f.client->lines[1].starts_with("BUSY "));
  f.engine.extend(extend_request{"a", std::string(40, 'e'), 3'000'000}, f.client, 2);
  f.answer_all(request_kind::extend, extended(0), 3);
  REQUIRE(f.client->lines[2] == "NOTHELD\n");
  CHECK(f.engine.max_ttl_granted() == 5000);
  f.engine.lock(lock_of("b", 10), f.client, 3); // its drift allowance would be 2.1 ms
  f.answer_all(request_kind::acquire, refused(4000), 3);
  REQUIRE(f.client->lines[3].starts_with("BUSY "));
  CHECK(f.engine.on_node_time(0, 1000, 0));
  f.now += 100ms;
  CHECK(f.engine.on_node_time(0, 1000, 100'000 + 10'000)); // 10 ms ahead: no jump for 5 s locks
  CHECK(f.engine.status_of(0).reason == lock_engine::quarantine_reason::none);
  // Granted and extended TTLs count (node 0's clock samples above are not the masters' time).
  f.engine.lock(lock_of("c", 20000), f.client, 4);
  for (std::size_t node = 1; node < 4; ++node)
    f.answer(node, request_kind::acquire, granted(0));
  REQUIRE(f.client->lines[4].starts_with("OK "));
  CHECK(f.engine.max_ttl_granted() == 20000);
  f.engine.extend(extend_request{"c", words(f.client->lines[4])[1], 30000}, f.client, 5);
  for (std::size_t node = 1; node < 4; ++node)
    f.answer(node, request_kind::extend, extended(1));
  REQUIRE(f.client->lines[5].starts_with("OK "));
  CHECK(f.engine.max_ttl_granted() == 30000);
}

TEST_CASE("a vote in flight when its master is quarantined does not count",
          "[engine][quarantine]") {
  fixture f;
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  f.connect(0, "a-new-run", 10, std::nullopt); // node 0 restarted while its vote was on the wire
  f.answer(0, request_kind::acquire, granted(0));
  f.answer(1, request_kind::acquire, granted(0));
  CHECK(f.client->lines.count(1) == 0); // 1 of 3, not 2
  f.answer(2, request_kind::acquire, granted(0));
  CHECK(f.client->lines.count(1) == 0);
  f.answer(3, request_kind::acquire, granted(0));
  CHECK(f.client->lines[1].starts_with("OK "));
}

TEST_CASE("a release nobody waits for is sent again by source after NOSCRIPT, and to a master "
          "that was down once it is back",
          "[engine]") {
  fixture f;
  f.nodes.up[4] = false;
  f.engine.lock(lock_of("r", 10000), f.client, 1);
  f.answer_all(request_kind::acquire, refused(5000), 2); // failed
  REQUIRE(f.client->lines[1].starts_with("NOQUORUM"));
  // Released on 2 and 3, which did not answer; 0 and 1 refused, node 4 is down: it is owed.
  const auto cleanups = f.nodes.of(request_kind::cleanup);
  REQUIRE(cleanups.size() == 2);
  f.nodes.sent.clear();
  auto noscript = resp("-NOSCRIPT No matching script. Please use EVAL.\r\n");
  f.engine.on_reply(cleanups[1].node, cleanups[1].tag, decode(cleanups[1].tag, *noscript));
  auto resent = f.nodes.of(request_kind::cleanup);
  REQUIRE(resent.size() == 1);
  CHECK(resent[0].node == cleanups[1].node);
  CHECK(resent[0].bytes.starts_with("*7\r\n$4\r\nEVAL\r\n"));
  f.nodes.sent.clear();
  f.nodes.up[4] = true;
  f.engine.on_node_ready(4);
  resent = f.nodes.of(request_kind::cleanup);
  REQUIRE(resent.size() == 1);
  CHECK(resent[0].node == 4);
  CHECK(resent[0].bytes == cleanups[0].bytes); // the same owner's release
  // Not again: the entry is gone once every master answered.
  auto ok = resp(":-1\r\n");
  f.engine.on_reply(4, resent[0].tag, decode(resent[0].tag, *ok));
  f.nodes.sent.clear();
  f.engine.on_node_ready(4);
  CHECK(f.nodes.of(request_kind::cleanup).empty());
}

TEST_CASE("a master whose clock jumps forward loses its vote and is quarantined",
          "[engine][quarantine]") {
  fixture f;
  f.engine.lock(lock_of("a", 10000), f.client, 1);
  f.answer(0, request_kind::acquire, granted_at(1000));
  f.answer_all(request_kind::acquire, granted(0), 3);
  f.now += 1s;
  f.nodes.sent.clear();
  f.engine.lock(lock_of("b", 10000), f.client, 2);
  f.answer(0, request_kind::acquire, granted_at(1061)); // 61 s on the master, 1 s here
  CHECK(f.engine.status_of(0).reason == lock_engine::quarantine_reason::clock);
  CHECK(f.engine.counters().clock_jumps == 1);
  f.answer(1, request_kind::acquire, granted(0));
  f.answer(2, request_kind::acquire, granted(0));
  CHECK(f.client->lines.count(2) == 0); // node 0's grant did not count: 2 of 3 so far
  f.answer(3, request_kind::acquire, granted(0));
  CHECK(f.client->lines[2].starts_with("OK "));
}

TEST_CASE("a clock that runs with the daemon's, or falls behind, is fine", "[engine][quarantine]") {
  fixture f;
  CHECK(f.engine.on_node_time(0, 1000, 0));
  f.now += 2s;
  CHECK(f.engine.on_node_time(0, 1002, 300'000)); // 300 ms of reply jitter: within the bound
  f.now += 1s;
  CHECK(f.engine.on_node_time(0, 900, 0)); // backward: logged, not quarantined
  CHECK(f.engine.status_of(0).reason == lock_engine::quarantine_reason::none);
}

namespace {

// Locks "k" with a 10 s TTL, granted by every node; returns the owner handed out.
std::string lock_everywhere(fixture& f, std::uint64_t seq) {
  f.engine.lock(lock_of("k", 10000), f.client, seq);
  f.answer_all(request_kind::acquire, granted(0));
  REQUIRE(f.client->lines[seq].starts_with("OK "));
  return words(f.client->lines[seq])[1];
}

} // namespace

TEST_CASE("a master that lost the key of a valid lock is noticed at UNLOCK, after the reply",
          "[engine][quarantine]") {
  fixture f;
  const std::string owner = lock_everywhere(f, 1);
  f.now += 1s;
  f.engine.unlock(unlock_request{"k", owner}, f.client, 2);
  f.answer(0, request_kind::release, ":1\r\n");
  f.answer(1, request_kind::release, ":1\r\n");
  f.answer(2, request_kind::release, ":1\r\n");
  CHECK(f.client->lines[2] == "OK\n");           // answered at quorum, not held up by the others
  f.answer(3, request_kind::release, ":-1\r\n"); // FLUSHALL or eviction on node 3
  f.answer(4, request_kind::release, ":1\r\n");
  CHECK(f.engine.status_of(3).reason == lock_engine::quarantine_reason::keyloss);
  CHECK(f.engine.status_of(4).reason == lock_engine::quarantine_reason::none);
  CHECK(f.engine.counters().key_losses == 1);
  CHECK(f.engine.operations_in_flight() == 0); // the drained slot was given back
}

TEST_CASE("a set's member released alone notices a master that lost it, and a member named again "
          "is no key loss",
          "[engine][quarantine][multi]") {
  // Simulator seed 13002028 --faults key-loss: a set released member by member judged nothing.
  // A review of the fix: the set's lease must not keep the released member, or a retried UNLOCK
  // of it, answered -1 where it went, quarantines healthy masters.
  fixture f;
  mlock_request both;
  both.resources = {"a", "b"};
  both.ttl_ms = 10000;
  f.engine.mlock(both, f.client, 1);
  f.answer_all(request_kind::acquire, granted(0));
  REQUIRE(f.client->lines[1].starts_with("OK "));
  const std::string owner = words(f.client->lines[1])[1];
  f.now += 1s;
  f.engine.unlock(unlock_request{"a", owner}, f.client, 2);
  for (const std::size_t node : {0, 1, 2, 4})
    f.answer(node, request_kind::release, ":1\r\n");
  f.answer(3, request_kind::release, ":-1\r\n"); // evicted, or an operator's DEL
  CHECK(f.client->lines[2] == "OK\n");
  CHECK(f.engine.status_of(3).reason == lock_engine::quarantine_reason::keyloss);
  CHECK(f.engine.counters().key_losses == 1);
  // The client names it again: node 0 still has it (its release was lost with a connection),
  // the others released it.
  f.engine.unlock(unlock_request{"a", owner}, f.client, 3);
  f.answer(0, request_kind::release, ":1\r\n");
  for (const std::size_t node : {1, 2, 4})
    f.answer(node, request_kind::release, ":-1\r\n");
  CHECK(f.engine.counters().key_losses == 1);
  for (const std::size_t node : {0, 1, 2, 4})
    CHECK(f.engine.status_of(node).reason == lock_engine::quarantine_reason::none);
}

TEST_CASE("the release of a KEEP lock that ends notices a master that lost its key, as an UNLOCK "
          "does",
          "[engine][quarantine][keep]") {
  // Issue 21: every path that releases a lock this daemon granted judges key loss.
  fixture f;
  auto keeper = std::make_shared<captured_replies>();
  lock_request keep = lock_of("k", 10000);
  keep.keep = true;
  f.engine.lock(keep, keeper, 1);
  f.answer_all(request_kind::acquire, granted(0));
  REQUIRE(keeper->lines[1].starts_with("OK "));
  f.now += 1s;
  f.nodes.sent.clear();
  f.engine.client_gone(keeper.get());
  const auto releases = f.nodes.of(request_kind::cleanup);
  REQUIRE(releases.size() == 5);
  const auto reply = [&](std::size_t i, std::string_view bytes) {
    auto parsed = resp(bytes);
    f.engine.on_reply(releases[i].node, releases[i].tag, decode(releases[i].tag, *parsed));
  };
  reply(3, ":-1\r\n"); // gone, nothing to compare yet
  CHECK(f.engine.status_of(3).reason == lock_engine::quarantine_reason::none);
  reply(0, ":1\r\n");
  CHECK(f.engine.status_of(3).reason == lock_engine::quarantine_reason::keyloss);
  reply(1, ":1\r\n");
  reply(2, ":1\r\n");
  reply(4, ":1\r\n");
  CHECK(f.engine.counters().key_losses == 1);

  // A failed attempt's release expects nothing: a key it never got is no loss.
  f.nodes.sent.clear();
  f.engine.lock(lock_of("a", 10000), f.client, 2);
  f.answer_all(request_kind::acquire, refused(5000), 3);
  // Released where it did not answer (3, now quarantined, and 4): gone on one, deleted on the
  // other.
  const auto attempt = f.nodes.of(request_kind::cleanup);
  REQUIRE(attempt.size() >= 2);
  for (std::size_t i = 0; i < attempt.size(); ++i) {
    auto parsed = resp(i == 0 ? ":1\r\n" : ":-1\r\n");
    f.engine.on_reply(attempt[i].node, attempt[i].tag, decode(attempt[i].tag, *parsed));
  }
  CHECK(f.engine.counters().key_losses == 1);
}

TEST_CASE("a master that lost the key of a valid lock is noticed at EXTEND",
          "[engine][quarantine]") {
  fixture f;
  const std::string owner = lock_everywhere(f, 1);
  f.now += 1s;
  f.engine.extend(extend_request{"k", owner, 10000}, f.client, 2);
  f.answer(0, request_kind::extend, extended(-1)); // the first answer: nothing to compare yet
  CHECK(f.engine.status_of(0).reason == lock_engine::quarantine_reason::none);
  f.answer(1, request_kind::extend, extended(1));
  CHECK(f.engine.status_of(0).reason == lock_engine::quarantine_reason::keyloss);
  f.answer(2, request_kind::extend, extended(1));
  f.answer(3, request_kind::extend, extended(1));
  CHECK(f.client->lines[2].starts_with("OK "));
  f.answer(4, request_kind::extend, extended(1));
  CHECK(f.engine.counters().key_losses == 1);
}

TEST_CASE("a key gone everywhere, gone after its validity, or never granted is no key loss",
          "[engine][quarantine]") {
  fixture f;
  SECTION("released through another daemon: gone on every node") {
    const std::string owner = lock_everywhere(f, 1);
    f.engine.unlock(unlock_request{"k", owner}, f.client, 2);
    f.answer_all(request_kind::release, ":-1\r\n");
    CHECK(f.client->lines[2] == "NOTHELD\n");
  }
  SECTION("expired: the lease's validity is over") {
    const std::string owner = lock_everywhere(f, 1);
    f.now += 9950ms; // validity was 10000 - 102 drift: over; a node's copy may have expired
    f.engine.extend(extend_request{"k", owner, 10000}, f.client, 2);
    f.answer(0, request_kind::extend, extended(-1));
    f.answer_all(request_kind::extend, extended(1));
  }
  SECTION("a node that did not grant the lock never had the key") {
    f.engine.lock(lock_of("k", 10000), f.client, 1);
    f.answer(0, request_kind::acquire, refused(5000));
    f.answer(1, request_kind::acquire, granted(0));
    f.answer(2, request_kind::acquire, granted(0));
    f.answer(3, request_kind::acquire, granted(0));
    const std::string owner = words(f.client->lines[1])[1];
    f.engine.unlock(unlock_request{"k", owner}, f.client, 2);
    f.answer(0, request_kind::release, ":-1\r\n");
    f.answer_all(request_kind::release, ":1\r\n");
  }
  for (std::size_t node = 0; node < 5; ++node)
    CHECK(f.engine.status_of(node).reason == lock_engine::quarantine_reason::none);
  CHECK(f.engine.counters().key_losses == 0);
}

TEST_CASE("replies handled late by a busy daemon are no clock jump", "[engine][quarantine]") {
  fixture f;
  // The first sample: the node read its clock at once, the daemon handled the reply 2 s later
  // (its event loop was flooded).
  const clock_type::time_point first_sent = f.now;
  f.now += 2s;
  CHECK(f.engine.on_node_time(0, 1000, 1000, first_sent));
  // The next sample is handled promptly: 2 s passed on the node, 1 ms between the handlings.
  const clock_type::time_point second_sent = f.now;
  f.now += 1ms;
  CHECK(f.engine.on_node_time(0, 1002, 0, second_sent));
  CHECK(f.engine.status_of(0).reason == lock_engine::quarantine_reason::none);
  // A real jump still shows: 1 s here, 60 s there.
  const clock_type::time_point third_sent = f.now;
  f.now += 1s;
  CHECK_FALSE(f.engine.on_node_time(0, 1063, 0, third_sent));
  CHECK(f.engine.status_of(0).reason == lock_engine::quarantine_reason::clock);
}

TEST_CASE("a clock jump while the daemon was away from a master shows at the reconnection "
          "(seed 250274)",
          "[engine][quarantine]") {
  // The jump erased a lock held on that master and one other; a daemon whose link was down
  // then judged the new connection's first TIME against nothing, and granted with its vote.
  fixture f;
  f.engine.lock(lock_of("a", 2000), f.client, 1); // the clock-jump bound: 22 ms
  f.answer_all(request_kind::acquire, granted(0), 3);
  REQUIRE(f.client->lines[1].starts_with("OK "));
  CHECK(f.engine.on_node_time(2, 1000, 0));
  f.now += 50ms; // the link drops, the master's clock jumps 1.95 s, the link comes back
  f.connect(2, "run2", 86'400'000);
  f.now += 50ms;
  CHECK_FALSE(f.engine.on_node_time(2, 1002, 50'000));
  CHECK(f.engine.status_of(2).reason == lock_engine::quarantine_reason::clock);
  CHECK(f.engine.counters().clock_jumps == 1);
  // A clock that ran at the drift factor's rate through a long gap is no jump.
  CHECK(f.engine.on_node_time(0, 1000, 0));
  f.now += 60s;
  f.connect(0, "run0", 86'400'000);
  CHECK(f.engine.on_node_time(0, 1060, 550'000)); // 0.9 % fast
  CHECK(f.engine.status_of(0).reason == lock_engine::quarantine_reason::none);
  // Between probes of one connection the bound alone counts: 30 ms ahead after 2 s is a jump
  // for 2 s locks (their bound is 22 ms), though within 1 % of the 2 s.
  f.now += 2s;
  CHECK_FALSE(f.engine.on_node_time(0, 1062, 580'000));
  CHECK(f.engine.status_of(0).reason == lock_engine::quarantine_reason::clock);
  // A master that restarted is judged by its restart; its new clock starts a new series.
  CHECK(f.engine.on_node_time(1, 1000, 0));
  f.connect(1, "a-new-run", 5);
  CHECK(f.engine.status_of(1).reason == lock_engine::quarantine_reason::restart);
  CHECK(f.engine.on_node_time(1, 9000, 0));
  CHECK(f.engine.counters().clock_jumps == 2);
}

TEST_CASE(
    "a waiter's attempt marks that it waits, for as long as it waits, and a try-lock does not",
    "[engine][wake]") {
  fixture f;
  f.engine.lock(lock_of("r", 10000), f.client, 0);
  REQUIRE(f.count_sent(request_kind::acquire) == 5);
  CHECK(f.nodes.sent[0].bytes.find(std::string(script_sha(script::acquire))) != std::string::npos);
  CHECK(f.nodes.sent[0].bytes.find(":waiting:") == std::string::npos);
  f.answer_all(request_kind::acquire, granted(0), 3);
  f.nodes.sent.clear();

  f.engine.lock(waiting_lock("r", 10000, 5000), f.client, 1);
  REQUIRE(f.count_sent(request_kind::acquire) == 5);
  const std::string& command = f.nodes.sent[0].bytes;
  CHECK(command.find(std::string(script_sha(script::acquire_wait))) != std::string::npos);
  CHECK(command.find("$" + std::to_string(f.cfg.fence_key.size() + 10) + "\r\n" + f.cfg.fence_key +
                     ":waiting:r\r\n") != std::string::npos);
  CHECK(command.find("\r\n$4\r\n5000\r\n") != std::string::npos); // the wait left
}

TEST_CASE("a release published by a master wakes the head waiter at once, once", "[engine][wake]") {
  fixture f;
  f.engine.lock(waiting_lock("r", 10000, 8000), f.client, 0);
  f.answer_all(request_kind::acquire, refused(9000), 3); // held through another daemon
  f.nodes.sent.clear();
  f.advance(5ms);
  CHECK(f.count_sent(request_kind::acquire) == 0);  // it would sleep ~9 s
  f.engine.on_released(f.cfg.key_prefix + "other"); // another lock: nothing
  CHECK(f.count_sent(request_kind::acquire) == 0);
  f.engine.on_released(f.cfg.key_prefix + "r");
  REQUIRE(f.count_sent(request_kind::acquire) == 5);
  f.engine.on_released(f.cfg.key_prefix + "r"); // the same release from the next master
  CHECK(f.count_sent(request_kind::acquire) == 5);
  CHECK(f.engine.counters().wakeups == 1);
  f.answer_all(request_kind::acquire, granted(0), 3);
  CHECK(f.client->lines[0].starts_with("OK "));
}

TEST_CASE("a release published while the head's attempt is in flight makes it try again at once "
          "when that attempt fails",
          "[engine][wake]") {
  // Issue 21, case 4: the head slept the old holder's remaining TTL instead.
  fixture f;
  f.engine.lock(waiting_lock("r", 10000, 8000), f.client, 0);
  f.answer_all(request_kind::acquire, refused(9000), 3); // held through another daemon
  f.nodes.sent.clear();
  f.engine.on_released(f.cfg.key_prefix + "r"); // one master published the release: it tries
  REQUIRE(f.count_sent(request_kind::acquire) == 5);
  f.engine.on_released(f.cfg.key_prefix + "r");          // the next master's message: in flight
  f.answer_all(request_kind::acquire, refused(9000), 3); // it ran before the release there
  f.nodes.sent.clear();
  f.advance(0us);
  REQUIRE(f.count_sent(request_kind::acquire) == 5); // again at once, not in 9 s
  f.answer_all(request_kind::acquire, granted(0), 3);
  CHECK(f.client->lines[0].starts_with("OK "));
}

TEST_CASE("a lock released here while the head's attempt is in flight makes it try again at once "
          "when that attempt fails",
          "[engine][wait]") {
  // Issue 21, case 4: a KEEP lock that ends (staging 0), a grant whose client left while it was
  // in flight (1) or a KEEP grant whose line was written too late (2, grant_expired), while the
  // head tries and fails on the old holder: the head slept the old holder's TTL. 1 and 2 were
  // found by reading; each fails when retry_head stops marking the head woken.
  const int staging = GENERATE(0, 1, 2);
  CAPTURE(staging);
  struct grants_kept : captured_replies {
    void deliver_grant(std::uint64_t seq, grant_reply grant, clock_type::time_point now) override {
      grants.emplace(seq, grant);
      captured_replies::deliver_grant(seq, std::move(grant), now);
    }
    std::map<std::uint64_t, grant_reply> grants;
  };
  fixture f;
  auto holder = std::make_shared<grants_kept>();
  auto waiter = std::make_shared<captured_replies>();
  lock_request hold = lock_of("r", 10000);
  hold.keep = staging != 1;
  f.engine.lock(hold, holder, 0);
  std::vector<request_tag> holders_round;
  for (std::size_t node = 0; node < 5; ++node)
    holders_round.push_back(f.last_tag(node, request_kind::acquire));
  const auto grant_holder = [&] {
    for (std::size_t node = 0; node < 3; ++node)
      f.engine.on_reply(node, holders_round[node], decode(holders_round[node], *resp(granted(0))));
  };
  if (staging != 1) {
    grant_holder();
    REQUIRE(holder->lines[0].starts_with("OK "));
  }
  f.engine.lock(waiting_lock("r", 10000, 8000), waiter, 0);
  REQUIRE(f.count_sent(request_kind::acquire) == 5 + 5); // its attempt is in flight
  if (staging == 0) {
    f.engine.client_gone(holder.get()); // the KEEP lock ends meanwhile
  } else if (staging == 1) {
    f.engine.client_gone(holder.get()); // the client leaves, then its LOCK is granted
    grant_holder();
    CHECK(holder->lines.empty());
  } else {
    REQUIRE(holder->grants.count(0) == 1);
    f.engine.grant_expired(holder->grants.at(0)); // its line came too late to be written
  }
  f.answer_all(request_kind::acquire, refused(9000), 3);
  CHECK(waiter->lines.empty());
  f.nodes.sent.clear();
  f.advance(0us);
  REQUIRE(f.count_sent(request_kind::acquire) == 5);
  f.answer_all(request_kind::acquire, granted(0), 3);
  CHECK(waiter->lines[0].starts_with("OK "));
}

TEST_CASE("an UNLOCK answered NOTHELD that deleted its key on some masters makes the head try "
          "again at once",
          "[engine][wait][quarantine]") {
  // CI (ASan) of 6287875, the integration test of a hand-over beside a master that lost its
  // data: the head's attempt was in flight, so the UNLOCK released without handing over; it
  // deleted the key on two masters, found it gone on a third (NOTHELD), and woke nobody here
  // (the masters publish only for other daemons' heads). The head slept the old holder's TTL
  // on a lock that a majority no longer held. The same when the masters that deleted answer
  // after NOTHELD is decided, and for an MLOCK's set with a member gone (multi_release deletes
  // the others and answers -1): a review of the first fix.
  const int staging = GENERATE(0, 1, 2);
  const bool set = staging == 2;
  CAPTURE(staging);
  fixture f;
  auto holder = std::make_shared<captured_replies>();
  auto waiter = std::make_shared<captured_replies>();
  if (set) {
    mlock_request both;
    both.resources = {"r", "s"};
    both.ttl_ms = 30000;
    f.engine.mlock(both, holder, 0);
  } else {
    f.engine.lock(lock_of("r", 30000), holder, 0);
  }
  f.answer_all(request_kind::acquire, granted(0), 3);
  REQUIRE(holder->lines[0].starts_with("OK "));
  f.engine.lock(waiting_lock("r", 10000, 20000), waiter, 0);
  REQUIRE(f.count_sent(request_kind::acquire) == 5 + 5); // its attempt is in flight
  const std::string owner = owner_in(holder->lines[0]);
  if (set) {
    const std::vector<std::string_view> both = {"r", "s"};
    f.engine.munlock(munlock_request{both, owner}, holder, 1);
    f.answer_all(request_kind::release, ":-1\r\n"); // s was gone everywhere; r deleted
  } else {
    f.engine.unlock(unlock_request{"r", owner}, holder, 1);
    const bool deleted_first = staging == 0;
    if (deleted_first) {
      f.answer(0, request_kind::release, ":1\r\n");
      f.answer(1, request_kind::release, ":1\r\n");
    }
    f.answer(2, request_kind::release, ":-1\r\n"); // emptied by FLUSHALL
    f.answer(3, request_kind::release, ":0\r\n");
    f.answer(4, request_kind::release, ":0\r\n");
    if (!deleted_first) {
      f.answer(0, request_kind::release, ":1\r\n");
      f.answer(1, request_kind::release, ":1\r\n");
    }
  }
  REQUIRE(holder->lines[1] == "NOTHELD\n");
  f.answer_all(request_kind::acquire, refused(29000), 3); // it reached them before the UNLOCK
  CHECK(waiter->lines.empty());
  f.nodes.sent.clear();
  f.advance(0us);
  REQUIRE(f.count_sent(request_kind::acquire) >= 4);
  for (std::size_t node = 0; node < 5; ++node)
    if (f.last_tag(node, request_kind::acquire).generation != 0)
      f.answer(node, request_kind::acquire, granted(1));
  CHECK(waiter->lines[0].starts_with("OK "));
}

TEST_CASE("a wake-up replaces the pending retry: no stale timer adds an attempt",
          "[engine][wake]") {
  // Issue 21, suspected: on_released started an attempt while the retry timer of the last
  // refusal stayed armed; it fired an extra attempt later.
  fixture f;
  f.engine.lock(waiting_lock("r", 10000, 8000), f.client, 0);
  f.answer_all(request_kind::acquire, refused(300), 3); // retries in 300-320 ms
  f.engine.on_released(f.cfg.key_prefix + "r");
  f.answer_all(request_kind::acquire, refused(9000), 3); // another daemon's head won the race
  f.nodes.sent.clear();
  f.advance(330ms);
  CHECK(f.count_sent(request_kind::acquire) == 0); // the 300 ms timer is stale: 9 s now
  f.advance(8600ms);
  CHECK(f.count_sent(request_kind::acquire) == 0);
}

TEST_CASE("a waiter whose attempt split the masters tries again soon, a few times per release, "
          "then on the refusals' hint",
          "[engine][wake]") {
  // scripts/bench's hot row on two daemons: two heads woken together each took two masters,
  // each refused by the other's attempt key (TTL 10 s) and the old holder's on the fifth; both
  // cleanups woke nobody (a minority release), and both heads slept 10 s on a free lock.
  fixture f;
  f.engine.lock(waiting_lock("r", 10000, 60000), f.client, 0);
  const auto split = [&] {
    f.answer(0, request_kind::acquire, granted(0));
    f.answer(1, request_kind::acquire, granted(0));
    f.answer_all(request_kind::acquire, refused(9000), 5);
    f.nodes.sent.clear();
  };
  for (unsigned i = 0; i < max_split_retries; ++i) {
    split();
    f.advance(21ms); // within the default retry and its jitter
    REQUIRE(f.count_sent(request_kind::acquire) == 5);
  }
  split(); // the fourth split in a row: a holder on a majority may be what refuses it
  f.advance(21ms);
  CHECK(f.count_sent(request_kind::acquire) == 0);
  f.advance(1000ms);
  CHECK(f.count_sent(request_kind::acquire) == 0); // on the hint, about 9 s
  // A release seen gives it a few more.
  f.engine.on_released(f.cfg.key_prefix + "r");
  REQUIRE(f.count_sent(request_kind::acquire) == 5);
  split();
  f.advance(21ms);
  CHECK(f.count_sent(request_kind::acquire) == 5);
  // Refused everywhere (nothing taken), it sleeps on the hint as before.
  f.answer_all(request_kind::acquire, refused(9000), 5);
  f.nodes.sent.clear();
  f.advance(100ms);
  CHECK(f.count_sent(request_kind::acquire) == 0);
  // Decided by three refusals before two grants came: the late grants show the split.
  f.engine.on_released(f.cfg.key_prefix + "r");
  REQUIRE(f.count_sent(request_kind::acquire) == 5);
  for (std::size_t node = 2; node < 5; ++node)
    f.answer(node, request_kind::acquire, refused(9000));
  f.advance(21ms);
  REQUIRE(f.count_sent(request_kind::acquire) == 5); // decided: on the hint, for now
  f.answer(0, request_kind::acquire, granted(0));    // late
  f.answer(1, request_kind::acquire, granted(0));
  f.advance(21ms);
  CHECK(f.count_sent(request_kind::acquire) == 10);
}

TEST_CASE("retry_after_split: some masters taken but no majority, a few times", "[engine]") {
  CHECK(retry_after_split(2, 5, 0));
  CHECK(retry_after_split(1, 5, max_split_retries - 1));
  CHECK_FALSE(retry_after_split(2, 5, max_split_retries));
  CHECK_FALSE(retry_after_split(0, 5, 0)); // refused everywhere: a holder's time
  CHECK_FALSE(retry_after_split(3, 5, 0)); // held a majority: its release wakes the others
}

TEST_CASE("a waiter marks with its first attempt's proposal as its ticket, and the last waiter "
          "leaving without the lock takes the daemon's mark out",
          "[engine][wake][fairness]") {
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  f.engine.lock(waiting_lock("r", 10000, 8000), a, 0);
  const auto first = args_of(f.nodes.of(request_kind::acquire).back().bytes);
  REQUIRE(first.size() == 15);
  CHECK(first[12] == first[9]); // the ticket is the first attempt's proposal
  CHECK(std::stoull(first[13]) == 2 * f.cfg.node_timeout_ms + 100); // the slack
  CHECK(first[14] == "0");                                          // nobody behind it
  f.answer_all(request_kind::acquire, refused(300), 3);
  f.engine.lock(waiting_lock("r", 10000, 8000), b, 0); // queued behind a
  f.nodes.sent.clear();
  f.advance(321ms);
  const auto second = args_of(f.nodes.of(request_kind::acquire).back().bytes);
  CHECK(second[9] != first[9]);   // a fresh proposal,
  CHECK(second[12] == first[12]); // the same ticket for the whole wait
  // b waits behind it: a grant keeps the daemon's entry for b for as long as b still waits.
  CHECK(std::stoull(second[14]) > 0);
  CHECK(std::stoull(second[14]) <= 8000);
  f.answer_all(request_kind::acquire, refused(9000), 3);
  // a leaves: b is still here, the mark stays.
  f.nodes.sent.clear();
  f.engine.client_gone(a.get());
  CHECK(f.count_sent(request_kind::unmark) == 0);
  f.advance(0us); // b, the new head, tries
  f.answer_all(request_kind::acquire, refused(9000), 3);
  f.nodes.sent.clear();
  f.engine.client_gone(b.get()); // the last one: the mark goes, on every master
  const auto unmarks = f.nodes.of(request_kind::unmark);
  REQUIRE(unmarks.size() == 5);
  const auto unmark = args_of(unmarks[0].bytes);
  CHECK(unmark[1] == script_sha(script::unmark));
  CHECK(unmark[3] == f.cfg.fence_key + ":waiting:r");
  CHECK(unmark[4] == "r");       // the lock key: its writers' intent goes too
  CHECK(unmark[5] == first[11]); // this daemon's id
  CHECK(unmark[6] == f.cfg.fence_key + ":wake");
}

TEST_CASE("a waiter that leaves keeps the daemon's mark on a member another of its waiters waits "
          "for (seed 232718)",
          "[engine][wake][fairness]") {
  // The daemon has one entry per wait mark, shared by its waiters on that name: an MLOCK's
  // waiter and a LOCK's waiter on one of its members. When the set's wait ran out it took the
  // entry out of every member's mark, so another daemon's release of that member woke nobody and
  // the LOCK's waiter slept the refusal's hint on a free lock.
  fixture f;
  auto set_waiter = std::make_shared<captured_replies>();
  auto member_waiter = std::make_shared<captured_replies>();
  mlock_request set;
  set.resources = {"a", "b"};
  set.ttl_ms = 10000;
  set.wait_ms = 1000;
  f.engine.mlock(set, set_waiter, 0);
  f.answer_all(request_kind::acquire, refused(9000), 3);
  f.engine.lock(waiting_lock("b", 10000, 8000), member_waiter, 0);
  f.answer_all(request_kind::acquire, refused(9000), 3);
  f.nodes.sent.clear();
  f.advance(1001ms); // the set's wait runs out
  REQUIRE(set_waiter->lines.count(0) == 1);
  CHECK(set_waiter->lines[0].starts_with("BUSY"));
  // Only a's mark goes: b's waiter still waits.
  const auto unmarks = f.nodes.of(request_kind::unmark);
  REQUIRE(unmarks.size() == 5);
  for (const auto& sent : unmarks)
    CHECK(args_of(sent.bytes)[4] == "a");
  // The last waiter on b leaving takes b's out.
  f.nodes.sent.clear();
  f.engine.client_gone(member_waiter.get());
  const auto last = f.nodes.of(request_kind::unmark);
  REQUIRE(last.size() == 5);
  CHECK(args_of(last[0].bytes)[4] == "b");
}

TEST_CASE("a set that leaves makes this daemon's heads on its members try now, to mark the entry "
          "its attempts wrote as they need it (seed 9505971)",
          "[engine][wake][fairness][sets]") {
  // The daemon's entry on a member's mark is shared by its waiters there; a set's refused
  // attempt writes it to last as the set's wait does. When that wait ran out, the entry ended
  // with it, and another daemon's release of the member woke nobody: the member's head slept
  // its hint (940 ms) on a free lock.
  fixture f;
  auto set_waiter = std::make_shared<captured_replies>();
  auto member_waiter = std::make_shared<captured_replies>();
  f.engine.lock(waiting_lock("b", 10000, 8000), member_waiter, 0);
  f.answer_all(request_kind::acquire, refused(5000), 3); // sleeps about 5 s
  mlock_request set;
  set.resources = {"a", "b"};
  set.ttl_ms = 10000;
  set.wait_ms = 1000;
  f.engine.mlock(set, set_waiter, 0);
  f.answer_all(request_kind::acquire, refused(9000), 3);
  f.nodes.sent.clear();
  f.advance(1001ms); // the set's wait runs out
  REQUIRE(set_waiter->lines.count(0) == 1);
  const auto attempts = f.nodes.of(request_kind::acquire);
  REQUIRE(attempts.size() == 5); // b's head tries now, not in 4 s
  CHECK(args_of(attempts[0].bytes)[3] == "b");
  CHECK(member_waiter->lines.empty());
}

TEST_CASE("a set attempt that failed on a minority wakes this daemon's waiters its keys may have "
          "refused a few times per release",
          "[engine][wake][sets]") {
  // A set's waiter is its own queue: another set's attempt on a shared member refuses it as a
  // holder would, and that attempt's cleanup wakes nobody through the masters (issue 21's loop).
  // It slept the failed attempt's whole TTL on a free lock (simulator seed 30119; the hot MLOCK
  // row of scripts/bench). Now it tries again soon, at most max_split_retries times per release.
  fixture f;
  auto waiter = std::make_shared<captured_replies>();
  mlock_request waits;
  waits.resources = {"b", "c"};
  waits.ttl_ms = 10000;
  waits.wait_ms = 8000;
  f.engine.mlock(waits, waiter, 0);
  f.answer_all(request_kind::acquire, refused(9000), 5); // refused by another set's keys
  for (int attempt = 0; attempt < 4; ++attempt) {
    mlock_request tries;
    tries.resources = {"a", "b"};
    tries.ttl_ms = 10000;
    f.engine.mlock(tries, f.client, static_cast<std::uint64_t>(attempt) + 1);
    f.answer(0, request_kind::acquire, granted(0)); // a split: held on two masters
    f.answer(1, request_kind::acquire, granted(0));
    for (std::size_t node = 2; node < 5; ++node)
      f.answer(node, request_kind::acquire, refused(9000));
    REQUIRE(f.client->lines.count(static_cast<std::uint64_t>(attempt) + 1) == 1);
    CHECK(f.client->lines[static_cast<std::uint64_t>(attempt) + 1].starts_with("BUSY"));
    f.nodes.sent.clear();
    f.advance(21ms);
    if (attempt < 3) {
      REQUIRE(f.count_sent(request_kind::acquire) == 5); // tried again at once, not in 9 s
      f.answer_all(request_kind::acquire, refused(9000), 5);
    } else {
      CHECK(f.count_sent(request_kind::acquire) == 0); // the fourth: it sleeps its hint
    }
  }
  CHECK(waiter->lines.empty());
}

TEST_CASE("a waiting set does not try while another of this daemon's set attempts on a shared "
          "member is out",
          "[engine][wake][sets]") {
  // Each set is a queue of its own: the heads of sets sharing a member raced each other at every
  // release, split the masters and retried (scripts/bench's hot MLOCK row: 765 cycles/s, p99
  // 430 ms). A set now waits for such an attempt to be decided.
  fixture f;
  auto first = std::make_shared<captured_replies>();
  auto second = std::make_shared<captured_replies>();
  auto apart = std::make_shared<captured_replies>();
  const auto set_of = [](std::vector<std::string_view> resources) {
    mlock_request req;
    req.resources = std::move(resources);
    req.ttl_ms = 10000;
    req.wait_ms = 8000;
    return req;
  };
  f.engine.mlock(set_of({"a", "b"}), first, 0);
  const auto first_round = f.nodes.of(request_kind::acquire);
  REQUIRE(first_round.size() == 5);
  f.engine.mlock(set_of({"b", "c"}), second, 0);
  CHECK(f.count_sent(request_kind::acquire) == 5); // held back: b is in the first's attempt
  f.engine.mlock(set_of({"x", "y"}), apart, 0);
  CHECK(f.count_sent(request_kind::acquire) == 10); // shares nothing: goes at once
  f.advance(21ms);
  CHECK(f.count_sent(request_kind::acquire) == 10); // still held back while {a, b} is out
  for (const auto& sent : first_round) {
    auto reply = resp(granted(0));
    f.engine.on_reply(sent.node, sent.tag, decode(sent.tag, *reply));
  }
  REQUIRE(first->lines.count(0) == 1);
  CHECK(first->lines[0].starts_with("OK "));
  f.advance(1ms);
  CHECK(f.count_sent(request_kind::acquire) == 15); // {b, c} goes once {a, b} is decided
  CHECK(second->lines.empty());

  // A wait that would run out before the set could go is not held back: WAIT 0 tries once.
  fixture g;
  auto out = std::make_shared<captured_replies>();
  auto once = std::make_shared<captured_replies>();
  g.engine.mlock(set_of({"a", "b"}), out, 0);
  mlock_request at_once = set_of({"b", "z"});
  at_once.wait_ms = 0;
  g.engine.mlock(at_once, once, 0);
  CHECK(g.count_sent(request_kind::acquire) == 10);
}

TEST_CASE("the next waiter takes the place a grant kept for it: the latest kept entry's ticket",
          "[engine][wake][fairness]") {
  // A grant with b behind keeps this daemon's entry on each granting master, ticketed after every
  // head marked there (kept_ticket in lib/marks.lua). With its own first proposal as its ticket,
  // b came after heads of other daemons that had yielded to that entry and yielded to them in
  // turn: every head slept on a free lock (simulator seeds 70595, 130212).
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  f.engine.lock(waiting_lock("r", 1000, 8000), a, 0);
  f.answer_all(request_kind::acquire, refused(300), 3);
  f.engine.lock(waiting_lock("r", 1000, 8000), b, 0);
  f.nodes.sent.clear();
  f.advance(321ms);
  const auto won = args_of(f.nodes.of(request_kind::acquire).back().bytes);
  REQUIRE(won.size() == 15);
  CHECK(std::stoull(won[14]) > 0); // b waits behind: the grant keeps an entry for it
  const std::uint64_t proposal = std::stoull(won[9]);
  f.answer(0, request_kind::acquire, granted_beside(0, 0));            // kept: the proposal
  f.answer(1, request_kind::acquire, granted_beside(0, proposal + 5)); // kept: one after it
  f.answer(2, request_kind::acquire, granted_beside(0, proposal - 1)); // kept: the proposal
  REQUIRE(a->lines.size() == 1);
  CHECK(a->lines[0].starts_with("OK "));
  // Another lock's grant raises what this daemon has seen: b's own proposal is far later now.
  f.engine.lock(lock_of("s", 1000), f.client, 0);
  f.answer_all(request_kind::acquire, granted(proposal + 100), 3);
  f.nodes.sent.clear();
  f.advance(1100ms); // a's lease ends unreleased: b tries
  const auto next = args_of(f.nodes.of(request_kind::acquire).back().bytes);
  REQUIRE(next.size() == 15);
  CHECK(std::stoull(next[9]) > proposal + 100);    // a fresh proposal,
  CHECK(next[12] == std::to_string(proposal + 6)); // the latest kept place its ticket
  f.answer_all(request_kind::acquire, refused(300), 3);
  f.nodes.sent.clear();
  f.advance(330ms);
  CHECK(args_of(f.nodes.of(request_kind::acquire).back().bytes)[12] ==
        std::to_string(proposal + 6)); // kept for the whole wait
}

TEST_CASE("a reader's grant, once decided, wakes the other daemons' heads that yielded their turn "
          "to it, and a writer's, or one where no master reported another daemon's head, wakes "
          "nobody",
          "[engine][wake][fairness]") {
  // A head that yields to an older head sleeps until about that head's next try, and the
  // older head's grant wakes nobody on the masters: readers of three daemons went in one after
  // another, each asleep on a free lock until the one before it was granted (simulator seeds
  // 300018 and 300091 --mix shared). A reader (or a permit) beside which they could go in
  // wakes them once a majority granted it.
  const auto shared = [](lock_request req) {
    req.mode = lock_mode::shared;
    return req;
  };
  const auto wakes_after = [&](lock_request req, std::uint64_t rival_on_node_2) {
    fixture f;
    auto a = std::make_shared<captured_replies>();
    f.engine.lock(req, a, 0);
    const auto attempt = args_of(f.nodes.of(request_kind::acquire).back().bytes);
    f.answer(0, request_kind::acquire, granted_beside(0, 0));
    f.answer(1, request_kind::acquire, granted_beside(0, rival_on_node_2 == 0 ? 0 : 9));
    CHECK(f.count_sent(request_kind::wake_yielded) == 0); // not decided yet
    f.answer(2, request_kind::acquire, granted_beside(0, rival_on_node_2));
    REQUIRE(a->lines.size() == 1);
    CHECK(a->lines[0].starts_with("OK "));
    return std::pair{f.nodes.of(request_kind::wake_yielded), attempt};
  };
  const auto [wakes, attempt] = wakes_after(shared(waiting_lock("r", 1000, 8000)), 7);
  REQUIRE(wakes.size() == 5); // every master: its subscribers are woken by its own publish
  const auto wake = args_of(wakes[0].bytes);
  REQUIRE(wake.size() == 8);
  CHECK(wake[1] == script_sha(script::wake_yielded));
  CHECK(wake[3] == fixture().cfg.fence_key + ":waiting:r");
  CHECK(wake[4] == "r");
  CHECK(wake[5] == attempt[11]); // this daemon's id
  CHECK(wake[6] == attempt[12]); // the granted head's ticket: the heads after it are woken
  CHECK(wake[7] == fixture().cfg.fence_key + ":wake");
  // Nobody else's head marked where it was granted: nothing to wake.
  CHECK(wakes_after(shared(waiting_lock("r", 1000, 8000)), 0).first.empty());
  // A writer: nobody could go in beside it.
  CHECK(wakes_after(waiting_lock("r", 1000, 8000), 7).first.empty());
}

TEST_CASE("a wake-up without a waiter, or for a waiter that left, does nothing", "[engine][wake]") {
  fixture f;
  f.engine.on_released("r");
  CHECK(f.nodes.sent.empty());
  auto leaver = std::make_shared<captured_replies>();
  f.engine.lock(waiting_lock("r", 10000, 8000), leaver, 0);
  f.answer_all(request_kind::acquire, refused(9000), 3);
  f.engine.client_gone(leaver.get());
  f.nodes.sent.clear();
  f.engine.on_released("r");
  CHECK(f.count_sent(request_kind::acquire) == 0);
  CHECK(f.engine.counters().wakeups == 0);
}

TEST_CASE("a wake channel subscribed again makes every head waiter try soon", "[engine][wake]") {
  fixture f;
  auto a = std::make_shared<captured_replies>();
  auto b = std::make_shared<captured_replies>();
  f.engine.lock(waiting_lock("r", 10000, 8000), a, 0);
  f.answer_all(request_kind::acquire, refused(9000), 3);
  f.engine.lock(waiting_lock("s", 10000, 8000), b, 0);
  f.answer_all(request_kind::acquire, refused(9000), 3);
  f.nodes.sent.clear();
  f.engine.on_wake_channel_resumed();
  for (int i = 0; i < 21; ++i)
    f.advance(1ms); // within the retry jitter, not the holder's 9 s
  CHECK(f.count_sent(request_kind::acquire) == 10);
}

TEST_CASE("releases carry the lock's wait marker, the wake channel and the daemon's id, the one "
          "its waiters mark with",
          "[engine][wake]") {
  fixture f;
  auto waiter = std::make_shared<captured_replies>();
  f.engine.lock(lock_of("r", 10000), f.client, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  f.engine.lock(waiting_lock("r", 10000, 5000), waiter, 0);
  const auto attempt = args_of(f.nodes.of(request_kind::acquire).back().bytes);
  REQUIRE(attempt.size() == 15);
  f.answer_all(request_kind::acquire, refused(9000), 3);
  f.engine.client_gone(waiter.get()); // no hand-over: the UNLOCK releases
  f.engine.unlock(unlock_request{"r", owner_in(f.client->lines[0])}, f.client, 1);
  REQUIRE(f.count_sent(request_kind::release) == 5);
  const auto release = args_of(f.nodes.of(request_kind::release)[0].bytes);
  REQUIRE(release.size() == 7);
  CHECK(release[0] == "EVALSHA");
  CHECK(release[1] == script_sha(script::release));
  CHECK(release[2] == "2");
  CHECK(release[3] == "r");
  CHECK(release[4] == f.cfg.fence_key + ":waiting:r");
  CHECK(release[5] == owner_in(f.client->lines[0]));
  // A granted lock's release may wake other daemons' waiters: '<daemon id> <slack ms> <channel>'
  // with the id and the slack this daemon's waiter marked with.
  CHECK(attempt[11].size() == 16);
  CHECK(release[6] == attempt[11] + " " + attempt[13] + " " + f.cfg.fence_key + ":wake");
  CHECK(attempt[6] == f.cfg.fence_key + ":waiting:r");
}

TEST_CASE("only the release of a lock that was granted may wake waiters, never a failed "
          "attempt's",
          "[engine][wake]") {
  // Issue 21, case 2: a waiter's attempt granted on a minority and refused by the majority was
  // released with a wake-up; every daemon's head tried again at once, in a loop for as long as
  // the holder held the lock.
  fixture f;
  auto keeper = std::make_shared<captured_replies>();
  auto waiter = std::make_shared<captured_replies>();
  auto leaver = std::make_shared<captured_replies>();
  const auto wakes = [&](const sent_command& c) { return args_of(c.bytes)[6] != ""; };
  f.engine.lock(waiting_lock("r", 10000, 5000), waiter, 0);
  f.answer(0, request_kind::acquire, granted(0)); // free on two masters
  f.answer(1, request_kind::acquire, granted(0));
  f.answer_all(request_kind::acquire, refused(9000), 5);
  REQUIRE(f.count_sent(request_kind::cleanup) == 2); // where it was granted
  for (const auto& c : f.nodes.of(request_kind::cleanup))
    CHECK_FALSE(wakes(c));
  // A KEEP lock that ends was granted: its release may wake.
  lock_request keep = lock_of("k", 10000);
  keep.keep = true;
  f.engine.lock(keep, keeper, 0);
  f.answer_all(request_kind::acquire, granted(0), 3);
  REQUIRE(keeper->lines[0].starts_with("OK "));
  f.nodes.sent.clear();
  f.engine.client_gone(keeper.get());
  REQUIRE(f.count_sent(request_kind::cleanup) == 5);
  for (const auto& c : f.nodes.of(request_kind::cleanup))
    CHECK(wakes(c));
  // So was a grant whose client left while it was in flight.
  f.nodes.sent.clear();
  f.engine.lock(lock_of("g", 10000), leaver, 0);
  f.engine.client_gone(leaver.get());
  f.answer_all(request_kind::acquire, granted(0), 3);
  REQUIRE(f.count_sent(request_kind::cleanup) == 5);
  for (const auto& c : f.nodes.of(request_kind::cleanup))
    CHECK(wakes(c));
}
