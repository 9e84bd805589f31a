// The simulated master (master.cpp, keyspace.cpp, lua_engine.cpp) against a real redis-server:
// every command goes to both as the same RESP bytes, and the replies must be the same bytes. The
// scripts are small inline ones written here (not redlockd's, which change with the engine), run
// with EVAL so that they also check the model's Lua conversions; the direct commands check the
// RESP side. Sorted sets first: what the lock family's scripts use, and the edges around it.
#include <catch2/catch.hpp>
#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <memory>
#include <netinet/in.h>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "lua_engine.hpp"
#include "master.hpp"
#include "prng.hpp"
#include "redis_fleet.hpp"
#include "scheduler.hpp"

using namespace redlockd;
using namespace redlockd::sim;
using namespace std::chrono_literals;

namespace {

using words = std::vector<std::string>;

std::string resp_command(const words& argv) {
  std::string out = "*" + std::to_string(argv.size()) + "\r\n";
  for (const std::string& word : argv)
    out += "$" + std::to_string(word.size()) + "\r\n" + word + "\r\n";
  return out;
}

// RESP bytes as one readable line (CRLF shown as \r\n), for Catch's messages.
std::string printable(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) {
    if (c == '\r') {
      out += "\\r";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c >= 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

// A plain connection to a redis-server that hands back each reply's bytes as the server wrote
// them (hiredis's reader only says where a reply ends).
class raw_connection {
 public:
  explicit raw_connection(std::uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
      throw std::runtime_error("cannot connect to redis-server on port " + std::to_string(port));
    const timeval timeout{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  }
  ~raw_connection() { ::close(fd_); }
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;

  std::string round_trip(std::string_view command) {
    for (std::size_t sent = 0; sent < command.size();) {
      const ssize_t n = ::send(fd_, command.data() + sent, command.size() - sent, MSG_NOSIGNAL);
      if (n <= 0)
        throw std::runtime_error("redis-server: send failed");
      sent += static_cast<std::size_t>(n);
    }
    const std::unique_ptr<redisReader, decltype(&redisReaderFree)> reader(redisReaderCreate(),
                                                                          &redisReaderFree);
    std::string reply;
    char buffer[16384];
    for (;;) {
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0)
        throw std::runtime_error("redis-server: no reply");
      reply.append(buffer, static_cast<std::size_t>(n));
      redisReaderFeed(reader.get(), buffer, static_cast<std::size_t>(n));
      void* parsed = nullptr;
      if (redisReaderGetReply(reader.get(), &parsed) != REDIS_OK)
        throw std::runtime_error("redis-server: a reply hiredis cannot read");
      if (parsed != nullptr) {
        freeReplyObject(parsed);
        return reply;
      }
    }
  }

 private:
  int fd_;
};

class no_pushes final : public master_port {
 public:
  void push(std::uint64_t, std::string) override {}
};

class no_books final : public script_observer {
 public:
  void on_script(const script_run&) override {}
};

// One redis-server and one simulated master, fed the same commands.
class redis_and_model {
 public:
  redis_and_model() : real_(fleet_.port(0)) {
    // The model is Redis 7.0's (INFO says 7.0.15): 7.2 formats scores another way.
    const std::string info = real_.round_trip(resp_command({"INFO", "server"}));
    INFO("redis-server's INFO: " << printable(info.substr(0, 120)));
    REQUIRE(info.find("redis_version:7.0.") != std::string::npos);
  }

  // Runs `argv` on both and checks that the replies are the same bytes; returns Redis's.
  std::string same(const words& argv) {
    const std::string command = resp_command(argv);
    const std::string expected = real_.round_trip(command);
    std::string modelled;
    model_.execute(1, command, modelled);
    INFO("command: " << printable(command));
    CHECK(printable(modelled) == printable(expected));
    return expected;
  }
  // The same, and Redis's reply is not an error (the step tests what it means to).
  std::string same_ok(const words& argv) {
    const std::string reply = same(argv);
    INFO("command: " << printable(resp_command(argv)));
    CHECK(reply.front() != '-');
    return reply;
  }
  // EVAL of `lua` on both: the same reply, and not an error.
  std::string script(const std::string& lua, const words& keys = {}, const words& args = {}) {
    words argv{"EVAL", lua, std::to_string(keys.size())};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    return same_ok(argv);
  }
  // Time passes on both: the model's clock exactly, Redis's at least as much.
  void pass(std::chrono::milliseconds time) {
    std::this_thread::sleep_for(time);
    clock_.step(clock_.now() + time.count() * 1000);
  }

 private:
  test::redis_fleet fleet_{1};
  raw_connection real_;
  scheduler clock_;
  lua_engine lua_;
  no_pushes port_;
  no_books books_;
  master model_{0, clock_, lua_, prng(1), port_, books_};
};

std::string bulk(std::string_view text) {
  return "$" + std::to_string(text.size()) + "\r\n" + std::string(text) + "\r\n";
}
std::string integer(long long value) {
  return ":" + std::to_string(value) + "\r\n";
}
const std::string nil = "$-1\r\n";
const std::string wrong_type =
    "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

} // namespace

TEST_CASE("ZADD adds, updates, and refuses as Redis does", "[sim][model][zset]") {
  redis_and_model t;
  CHECK(t.same({"ZADD", "z", "1", "a", "2", "b", "3", "c"}) == integer(3));
  CHECK(t.same({"ZADD", "z", "1", "a"}) == integer(0)); // the same score: nothing changes
  CHECK(t.same({"ZADD", "z", "5", "a"}) == integer(0)); // an update is not an addition
  t.same_ok({"ZADD", "z", "CH", "6", "a", "7", "d", "3", "c"});
  // XX: only members that are there; an absent one is not added.
  CHECK(t.same({"ZADD", "z", "XX", "1", "absent"}) == integer(0));
  CHECK(t.same({"ZSCORE", "z", "absent"}) == nil);
  t.same_ok({"ZADD", "z", "xx", "10", "a"});
  CHECK(t.same({"ZSCORE", "z", "a"}) == bulk("10"));
  // NX: only members that are not there.
  t.same_ok({"ZADD", "z", "NX", "99", "a", "4", "e"});
  CHECK(t.same({"ZSCORE", "z", "a"}) == bulk("10"));
  // GT, LT and CH.
  t.same_ok({"ZADD", "z", "GT", "CH", "5", "a"});
  t.same_ok({"ZADD", "z", "GT", "CH", "11", "a"});
  t.same_ok({"ZADD", "z", "LT", "CH", "12", "a"});
  t.same_ok({"ZADD", "z", "lt", "ch", "3", "a"});
  t.same_ok({"ZADD", "z", "XX", "GT", "CH", "20", "a", "30", "not-there"});
  t.same_ok({"ZADD", "z", "GT", "40", "new-with-gt"});
  // A member twice in one command: added once, the last score wins.
  t.same_ok({"ZADD", "z", "1", "dup", "2", "dup"});
  t.same_ok({"ZSCORE", "z", "dup"});
  // Members named like options are members after the first score.
  t.same_ok({"ZADD", "z", "8", "nx", "9", "XX"});
  t.same_ok({"ZRANGE", "z", "0", "-1", "WITHSCORES"});
  // XX on a key that does not exist does not create it.
  CHECK(t.same({"ZADD", "nokey", "XX", "1", "a"}) == integer(0));
  CHECK(t.same({"EXISTS", "nokey"}) == integer(0));

  SECTION("refusals, and nothing applied when one score is bad") {
    t.same({"ZADD", "z", "XX", "NX", "1", "a"});
    t.same({"ZADD", "z", "GT", "LT", "1", "a"});
    t.same({"ZADD", "z", "NX", "GT", "1", "a"});
    t.same({"ZADD", "z", "INCR", "1", "a", "2", "b"});
    t.same({"ZADD", "z", "1", "a", "2"});
    t.same({"ZADD", "z", "NX", "1"});
    t.same({"ZADD", "z", "NX", "CH"});
    t.same({"ZADD", "z"});
    t.same({"ZADD", "z", "1"});
    t.same({"zadd", "z", "1"});
    for (const char* bad : {"abc", "nan", "NaN", "-nan", " 1", "1 ", "", "1e400", "-1e400",
                            "1e-400", "1,5", "(1", "0x"})
      CHECK(t.same({"ZADD", "z", bad, "bad"}).front() == '-');
    const std::string before = t.same_ok({"ZSCORE", "z", "a"});
    t.same({"ZADD", "z", "100", "a", "oops", "b"});
    CHECK(t.same({"ZSCORE", "z", "a"}) == before);
    CHECK(t.same({"ZSCORE", "z", "b"}) == bulk("2"));
    CHECK(t.same({"ZSCORE", "z", "bad"}) == nil);
  }
}

TEST_CASE("scores are read with strtod and written with %.17g, -0 as the encoding keeps it",
          "[sim][model][zset]") {
  redis_and_model t;
  const char* scores[] = {"1700000000123",
                          "1700000000123.5",
                          "0.1",
                          "-0.5",
                          "1e17",
                          "1e16",
                          "4503599627370497",
                          "9007199254740993",
                          "1.5e300",
                          "5e-324",
                          "123456789.123",
                          "+inf",
                          "-inf",
                          "inf",
                          "Infinity",
                          "-INF",
                          "0x10",
                          "+5",
                          ".5",
                          "5.",
                          "1E3",
                          "-0",
                          "0",
                          "-0.0",
                          "00012",
                          "3.0000000000000001"};
  int i = 0;
  for (const char* score : scores)
    t.same_ok({"ZADD", "scores", score, "m" + std::to_string(i++)});
  t.same_ok({"ZRANGE", "scores", "0", "-1", "WITHSCORES"});
  for (int m = 0; m < i; ++m)
    t.same_ok({"ZSCORE", "scores", "m" + std::to_string(m)});
  CHECK(t.same({"ZSCORE", "scores", "m0"}) == bulk("1700000000123"));
  CHECK(t.same({"ZSCORE", "scores", "m2"}) == bulk("0.10000000000000001"));
  CHECK(t.same({"ZSCORE", "scores", "m4"}) == bulk("1e+17"));
  CHECK(t.same({"ZSCORE", "scores", "m12"}) == bulk("-inf"));
  CHECK(t.same({"ZSCORE", "scores", "absent"}) == nil);
  CHECK(t.same({"ZSCORE", "no-such-key", "m0"}) == nil);

  // Numbers from Lua are formatted as Redis formats them (%.17g), then parsed back.
  t.script(R"lua(
    local now = tonumber(ARGV[1])
    redis.call('zadd', KEYS[1], now + 123, 'sum', 0.1 + 0.2, 'float', -0, 'lua-zero',
               2^53 + 1, 'big', 1/3, 'third', 7, 12)
    local out = {}
    for _, m in ipairs({'sum', 'float', 'lua-zero', 'big', 'third', '12', 'absent'}) do
      out[#out + 1] = redis.call('zscore', KEYS[1], m)
    end
    out[#out + 1] = tostring(tonumber(redis.call('zscore', KEYS[1], 'sum')) - now)
    out[#out + 1] = type(redis.call('zscore', KEYS[1], 'absent'))
    return out
  )lua",
           {"lua-scores"}, {"1700000000000"});

  SECTION("a set past 128 members, or with a member over 64 bytes, keeps -0") {
    // Redis 7.0 keeps a small set in a listpack (-0 stored as 0) and a large one in a skiplist.
    t.script(R"lua(
      redis.call('zadd', KEYS[1], '-0', 'zero-before')
      for i = 1, 140 do redis.call('zadd', KEYS[1], (i * 37) % 101, 'm' .. i) end
      redis.call('zadd', KEYS[1], '-0', 'zero-after')
      redis.call('zadd', KEYS[2], '-0', string.rep('x', 65))
      redis.call('zadd', KEYS[3], '-0', 'a', '1', string.rep('y', 65), '-0', 'b')
      return {redis.call('zscore', KEYS[1], 'zero-before'), redis.call('zscore', KEYS[1], 'zero-after'),
              redis.call('zscore', KEYS[2], string.rep('x', 65)),
              redis.call('zrange', KEYS[3], 0, -1, 'withscores')}
    )lua",
             {"large", "long-member", "grows"});
    CHECK(t.same({"ZSCORE", "large", "zero-after"}) == bulk("-0"));
    CHECK(t.same({"ZSCORE", "large", "zero-before"}) == bulk("0"));
    t.same_ok({"ZRANGE", "large", "0", "-1", "WITHSCORES"});
    t.same_ok({"ZREVRANGE", "large", "5", "20", "WITHSCORES"});
    t.same_ok({"ZCOUNT", "large", "(0", "50"});
    t.same_ok({"ZRANGEBYSCORE", "large", "-0", "(3", "WITHSCORES", "LIMIT", "1", "4"});
  }
}

TEST_CASE("members with the same score are ordered by their bytes", "[sim][model][zset]") {
  redis_and_model t;
  t.same_ok({"ZADD", "ties", "1", "b",    "1", "a", "1", "B",         "1", "aa",
             "1",    "",     "1", "\xff", "1", "z", "1", "a\xc3\xa9", "1", std::string("a\0b", 3),
             "0",    "zz",   "2", "0"});
  t.same_ok({"ZRANGE", "ties", "0", "-1"});
  t.same_ok({"ZREVRANGE", "ties", "0", "-1", "WITHSCORES"});
  t.same_ok({"ZRANGEBYSCORE", "ties", "1", "1", "LIMIT", "2", "3"});
  t.same_ok({"ZREVRANGEBYSCORE", "ties", "1", "1", "LIMIT", "2", "3"});
  // A member that moves keeps the order.
  t.same_ok({"ZADD", "ties", "1", "zz", "0", "b"});
  t.same_ok({"ZRANGE", "ties", "0", "-1", "WITHSCORES"});
}

TEST_CASE("ZCOUNT and ZRANGEBYSCORE read bounds as Redis does", "[sim][model][zset]") {
  redis_and_model t;
  t.same_ok({"ZADD", "z", "1", "a", "2", "b", "2", "c", "3", "d", "+inf", "top", "-inf", "bottom",
             "1700000000123", "t"});
  const std::vector<std::pair<std::string, std::string>> ranges = {
      {"2", "2"},
      {"(2", "2"},
      {"2", "(2"},
      {"(1", "(3"},
      {"-inf", "+inf"},
      {"(-inf", "(+inf"},
      {"inf", "inf"},
      {"(inf", "+inf"},
      {"-inf", "-inf"},
      {"3", "1"},
      {"(2", "(2"},
      {"", ""},
      {"(", "+inf"},
      {" 2", "2"},
      {"-INF", "Infinity"},
      {"0x2", "0x2"},
      {"1e0", "2.0"},
      {"1700000000123", "1700000000123"},
      {"(1700000000123", "+inf"},
      {"-inf", "(1700000000123"},
      {"1e400", "-1e400"},
      {"abc", "1"},
      {"1", "nan"},
      {"((1", "2"},
      {"[1", "2"},
      {"1", "2x"},
      {"(nan", "1"},
      {"1", "2 "},
  };
  for (const auto& [min, max] : ranges) {
    t.same({"ZCOUNT", "z", min, max});
    t.same({"ZRANGEBYSCORE", "z", min, max});
    t.same({"ZRANGEBYSCORE", "z", min, max, "WITHSCORES"});
    t.same({"ZREVRANGEBYSCORE", "z", max, min, "WITHSCORES"});
  }
  CHECK(t.same({"ZCOUNT", "z", "2", "2"}) == integer(2));
  CHECK(t.same({"ZCOUNT", "z", "(2", "2"}) == integer(0));
  CHECK(t.same({"ZCOUNT", "z", "-inf", "+inf"}) == integer(7));
  CHECK(t.same({"ZCOUNT", "z", "abc", "1"}) == "-ERR min or max is not a float\r\n");
  CHECK(t.same({"ZCOUNT", "missing", "-inf", "+inf"}) == integer(0));
  t.same({"ZCOUNT", "z", "1"});
  t.same({"ZRANGEBYSCORE", "z", "1"});
}

TEST_CASE("ZRANGEBYSCORE's WITHSCORES and LIMIT", "[sim][model][zset]") {
  redis_and_model t;
  t.same_ok({"ZADD", "z", "1", "a", "2", "b", "2", "c", "3", "d", "4", "e", "5.5", "f"});
  const std::vector<words> options = {
      {"LIMIT", "0", "2"},
      {"LIMIT", "1", "1"},
      {"LIMIT", "2", "-1"},
      {"LIMIT", "0", "0"},
      {"LIMIT", "-1", "2"},
      {"LIMIT", "5", "2"},
      {"LIMIT", "6", "2"},
      {"LIMIT", "10", "2"},
      {"LIMIT", "0", "-5"},
      {"LIMIT", "0", "-1"},
      {"LIMIT", "3", "100"},
      {"WITHSCORES", "LIMIT", "1", "2"},
      {"LIMIT", "1", "2", "WITHSCORES"},
      {"limit", "1", "2", "withscores"},
      {"WithScores", "WITHSCORES"},
      {"LIMIT", "1", "2", "LIMIT", "0", "1"},
      {"LIMIT", "1"},
      {"LIMIT"},
      {"LIMIT", "x", "1"},
      {"LIMIT", "1", "1.5"},
      {"LIMIT", "-0", "1"},
      {"LIMIT", "+1", "1"},
      {"REV"},
      {"BYSCORE"},
      {"BYLEX"},
      {"WITHSCORE"},
  };
  for (const words& option : options) {
    words forward{"ZRANGEBYSCORE", "z", "(1", "+inf"};
    forward.insert(forward.end(), option.begin(), option.end());
    t.same(forward);
    words reverse{"ZREVRANGEBYSCORE", "z", "+inf", "(1"};
    reverse.insert(reverse.end(), option.begin(), option.end());
    t.same(reverse);
    words by_score{"ZRANGE", "z", "(1", "+inf", "BYSCORE"};
    by_score.insert(by_score.end(), option.begin(), option.end());
    t.same(by_score);
  }
  CHECK(t.same({"ZRANGEBYSCORE", "z", "2", "(5.5", "WITHSCORES", "LIMIT", "1", "2"}) ==
        "*4\r\n" + bulk("c") + bulk("2") + bulk("d") + bulk("3"));
  CHECK(t.same({"ZRANGEBYSCORE", "missing", "-inf", "+inf", "WITHSCORES"}) == "*0\r\n");
}

TEST_CASE("ZRANGE and ZREVRANGE by rank, negative indexes included", "[sim][model][zset]") {
  redis_and_model t;
  t.same_ok({"ZADD", "z", "10", "a", "20", "b", "30", "c", "40", "d", "50", "e"});
  const std::vector<std::pair<std::string, std::string>> ranks = {
      {"0", "-1"},
      {"0", "0"},
      {"-1", "-1"},
      {"-2", "-1"},
      {"1", "100"},
      {"-100", "1"},
      {"4", "2"},
      {"5", "5"},
      {"4", "4"},
      {"-100", "-50"},
      {"-5", "-5"},
      {"-6", "0"},
      {"2", "-3"},
      {"3", "-3"},
      {"0", "9223372036854775807"},
      {"-9223372036854775808", "1"},
      {"1.5", "2"},
      {"a", "1"},
      {"1", "-0"},
      {"0", "9223372036854775808"},
  };
  for (const auto& [start, stop] : ranks) {
    t.same({"ZRANGE", "z", start, stop});
    t.same({"ZRANGE", "z", start, stop, "WITHSCORES"});
    t.same({"ZREVRANGE", "z", start, stop});
    t.same({"ZREVRANGE", "z", start, stop, "withscores"});
    t.same({"ZRANGE", "z", start, stop, "REV", "WITHSCORES"});
  }
  CHECK(t.same({"ZREVRANGE", "z", "0", "0", "WITHSCORES"}) == "*2\r\n" + bulk("e") + bulk("50"));
  CHECK(t.same({"ZRANGE", "z", "-2", "-1"}) == "*2\r\n" + bulk("d") + bulk("e"));
  t.same({"ZREVRANGE", "z", "0", "1", "LIMIT", "0", "1"});
  t.same({"ZREVRANGE", "z", "0", "1", "LIMIT", "0", "-1"}); // Redis's "no LIMIT"
  t.same({"ZREVRANGE", "z", "0", "1", "REV"});
  t.same({"ZREVRANGE", "z", "0", "1", "BYSCORE"});
  t.same({"ZRANGE", "z", "0", "1", "REV", "REV"});
  t.same({"ZRANGE", "z", "0", "1", "BYSCORE", "BYSCORE"});
  t.same({"ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2", "WITHSCORES"});
  t.same({"ZRANGE", "z", "0", "1", "LIMIT", "0", "1"});
  t.same({"ZRANGE", "z", "0", "1", "WITHSCORES", "EXTRA"});
  t.same({"ZREVRANGE", "z", "0"});
  t.same({"ZRANGE", "z", "0"});
  CHECK(t.same({"ZRANGE", "missing", "0", "-1"}) == "*0\r\n");
  CHECK(t.same({"ZREVRANGE", "missing", "x", "-1"}).front() == '-'); // the indexes first
}

TEST_CASE("ZREM and ZREMRANGEBYSCORE, and an emptied set is deleted", "[sim][model][zset]") {
  redis_and_model t;
  t.same_ok({"ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"});
  CHECK(t.same({"ZREM", "z", "a", "not-there", "b", "a"}) == integer(2));
  CHECK(t.same({"ZREM", "z", "not-there"}) == integer(0));
  CHECK(t.same({"ZREM", "missing", "a"}) == integer(0));
  t.same({"ZREM", "z"});
  t.same_ok({"ZCARD", "z"});
  CHECK(t.same({"ZREMRANGEBYSCORE", "z", "-inf", "(4"}) == integer(1));
  CHECK(t.same({"ZREMRANGEBYSCORE", "z", "(5", "+inf"}) == integer(0));
  t.same({"ZREMRANGEBYSCORE", "z", "x", "+inf"});
  t.same({"ZREMRANGEBYSCORE", "z", "1"});
  CHECK(t.same({"ZREMRANGEBYSCORE", "missing", "-inf", "+inf"}) == integer(0));
  t.same_ok({"ZRANGE", "z", "0", "-1", "WITHSCORES"});
  // The last members go: the key goes with them.
  CHECK(t.same({"ZREM", "z", "d", "e", "d"}) == integer(2));
  CHECK(t.same({"EXISTS", "z"}) == integer(0));
  CHECK(t.same({"PTTL", "z"}) == integer(-2));
  CHECK(t.same({"ZCARD", "z"}) == integer(0));
  t.same_ok({"ZADD", "z", "1", "a", "2", "b"});
  CHECK(t.same({"ZREMRANGEBYSCORE", "z", "-inf", "+inf"}) == integer(2));
  CHECK(t.same({"EXISTS", "z"}) == integer(0));
  CHECK(t.same({"ZADD", "z", "XX", "1", "a"}) == integer(0));
  CHECK(t.same({"EXISTS", "z"}) == integer(0));

  // The same through a script: what the scripts see after each step.
  t.script(R"lua(
    local out = {}
    redis.call('zadd', KEYS[1], 1, 'a', 2, 'b')
    out[#out + 1] = redis.call('zrem', KEYS[1], 'a', 'b', 'c')
    out[#out + 1] = redis.call('exists', KEYS[1])
    out[#out + 1] = redis.call('zcard', KEYS[1])
    out[#out + 1] = redis.call('zscore', KEYS[1], 'a')
    out[#out + 1] = #redis.call('zrange', KEYS[1], 0, -1)
    redis.call('zadd', KEYS[1], 5, 'x')
    out[#out + 1] = redis.call('zremrangebyscore', KEYS[1], 5, 5)
    out[#out + 1] = redis.call('exists', KEYS[1])
    out[#out + 1] = redis.call('pttl', KEYS[1])
    return out
  )lua",
           {"script-set"});
}

TEST_CASE("WRONGTYPE between sorted sets, strings and hashes, directly and through redis.pcall",
          "[sim][model][zset]") {
  redis_and_model t;
  t.same_ok({"SET", "s", "v"});
  t.same_ok({"HSET", "h", "f", "v"});
  t.same_ok({"ZADD", "z", "1", "a"});
  const std::vector<words> on_string_or_hash = {
      {"ZADD", "1", "a"},
      {"ZADD", "XX", "1", "a"},
      {"ZREM", "a"},
      {"ZCARD"},
      {"ZSCORE", "a"},
      {"ZCOUNT", "0", "1"},
      {"ZRANGEBYSCORE", "-inf", "+inf"},
      {"ZREMRANGEBYSCORE", "0", "1"},
      {"ZREVRANGE", "0", "0", "WITHSCORES"},
      {"ZRANGE", "0", "-1"},
      {"ZREVRANGEBYSCORE", "+inf", "-inf"},
  };
  for (const char* key : {"s", "h"})
    for (const words& command : on_string_or_hash) {
      words argv{command.front(), key};
      argv.insert(argv.end(), command.begin() + 1, command.end());
      CHECK(t.same(argv) == wrong_type);
    }
  // A bad argument is reported before the type.
  t.same({"ZCOUNT", "s", "x", "1"});
  t.same({"ZRANGE", "s", "x", "1"});
  t.same({"ZADD", "s", "x", "a"});
  t.same({"ZRANGEBYSCORE", "h", "0", "1", "LIMIT", "x", "1"});
  const std::vector<words> on_zset = {
      {"GET", "z"},  {"HGET", "z", "f"},    {"HSET", "z", "f", "v"}, {"HDEL", "z", "f"},
      {"HLEN", "z"}, {"HEXISTS", "z", "f"}, {"HGETALL", "z"},        {"HINCRBY", "z", "f", "1"},
  };
  for (const words& command : on_zset)
    CHECK(t.same(command) == wrong_type);
  t.same_ok({"MGET", "s", "z", "h"});
  CHECK(t.same({"EXISTS", "s", "h", "z", "z"}) == integer(4));

  t.script(R"lua(
    local s, h, z = KEYS[1], KEYS[2], KEYS[3]
    local function try(...) return redis.pcall(...) end
    return {
      try('zadd', s, 1, 'a'), try('zadd', h, 1, 'a'), try('zrem', s, 'a'), try('zcard', h),
      try('zscore', s, 'a'), try('zcount', s, 0, 1), try('zcount', s, 'x', 1),
      try('zrangebyscore', h, '-inf', '+inf'), try('zremrangebyscore', s, 0, 1),
      try('zrevrange', h, 0, 0, 'withscores'), try('zrange', s, 0, -1), try('zrange', s, 'x', -1),
      try('get', z), try('mget', s, z), try('hget', z, 'f'), try('hset', z, 'f', 'v'),
      try('hdel', z, 'f'), try('hlen', z), try('hexists', z, 'f'), try('hgetall', z),
      try('hincrby', z, 'f', 1), try('exists', s, h, z), try('zcard', z),
      type(try('zcard', s)), try('zcard', s).err,
    }
  )lua",
           {"s", "h", "z"});

  // SET replaces a set, as it replaces anything; then the set commands see a string.
  t.same_ok({"SET", "z", "now a string"});
  t.same_ok({"GET", "z"});
  CHECK(t.same({"ZCARD", "z"}) == wrong_type);
  CHECK(t.same({"DEL", "z", "s", "h", "z"}) == integer(3));
  t.same_ok({"ZADD", "s", "1", "a"}); // the key is free again
}

TEST_CASE("a sorted set's TTL: PEXPIRE, PTTL, expiry on the master's clock", "[sim][model][zset]") {
  redis_and_model t;
  t.same_ok({"ZADD", "z", "1", "a", "2", "b", "3", "c"});
  CHECK(t.same({"PTTL", "z"}) == integer(-1));
  CHECK(t.same({"PEXPIRE", "z", "60000"}) == integer(1));
  // PTTL moves with time: compared as "less than a second below what was set", read in a script.
  const std::string ttl_kept = R"lua(
    local ttl, set = redis.call('pttl', KEYS[1]), tonumber(ARGV[1])
    return {ttl > set - 1000 and ttl <= set, redis.call('zcard', KEYS[1])}
  )lua";
  t.script(ttl_kept, {"z"}, {"60000"});
  // Adding, updating and removing members keeps the key's TTL.
  t.same_ok({"ZADD", "z", "4", "d", "9", "a"});
  t.same_ok({"ZREM", "z", "b"});
  t.same_ok({"ZREMRANGEBYSCORE", "z", "3", "3"});
  t.script(ttl_kept, {"z"}, {"60000"});
  t.script(R"lua(
    redis.call('pexpire', KEYS[1], 5000)
    local ttl = redis.call('pttl', KEYS[1])
    return {ttl > 4000 and ttl <= 5000, redis.call('exists', KEYS[1])}
  )lua",
           {"z"});
  // Emptied, then added to again: a new set without a TTL.
  t.same_ok({"ZREM", "z", "a", "d"});
  CHECK(t.same({"PTTL", "z"}) == integer(-2));
  t.same_ok({"ZADD", "z", "1", "fresh"});
  CHECK(t.same({"PTTL", "z"}) == integer(-1));

  // Expiry: gone for every command once its time has passed.
  t.same_ok({"ZADD", "short", "1", "a", "2", "b"});
  t.same_ok({"ZADD", "long", "1", "a"});
  CHECK(t.same({"PEXPIRE", "short", "50"}) == integer(1));
  CHECK(t.same({"PEXPIRE", "long", "60000"}) == integer(1));
  t.pass(150ms);
  CHECK(t.same({"EXISTS", "short", "long"}) == integer(1));
  CHECK(t.same({"ZCARD", "short"}) == integer(0));
  CHECK(t.same({"ZSCORE", "short", "a"}) == nil);
  CHECK(t.same({"ZRANGE", "short", "0", "-1"}) == "*0\r\n");
  CHECK(t.same({"PTTL", "short"}) == integer(-2));
  CHECK(t.same({"ZADD", "short", "XX", "1", "a"}) == integer(0));
  CHECK(t.same({"ZADD", "short", "5", "new"}) == integer(1));
  CHECK(t.same({"PTTL", "short"}) == integer(-1));
  CHECK(t.same({"ZRANGE", "short", "0", "-1", "WITHSCORES"}) == "*2\r\n" + bulk("new") + bulk("5"));
  // An expiry in the past deletes the set at once.
  CHECK(t.same({"PEXPIRE", "long", "0"}) == integer(1));
  CHECK(t.same({"EXISTS", "long"}) == integer(0));
  CHECK(t.same({"PEXPIRE", "long", "100"}) == integer(0));
  CHECK(t.same({"DEL", "short"}) == integer(1));
}

TEST_CASE("SET ... PXAT: an expiry at a time of the master's clock, as the readers' guard sets it",
          "[sim][model]") {
  redis_and_model t;
  // Each side's own TIME: the model's clock is not Redis's.
  const std::string at = R"lua(
    local t = redis.call('time')
    local now = t[1] * 1000 + math.floor(t[2] / 1000)
    local ok = redis.call('set', KEYS[1], 'v', 'PXAT', now + tonumber(ARGV[1]))
    local ttl = redis.call('pttl', KEYS[1])
    return {ok.ok, redis.call('exists', KEYS[1]), ttl > tonumber(ARGV[1]) - 1000}
  )lua";
  t.script(at, {"k"}, {"60000"});
  t.script(at, {"k"}, {"0"});     // due exactly now: still there
  t.script(at, {"k"}, {"-5000"}); // already past: gone at once
  CHECK(t.same({"EXISTS", "k"}) == integer(0));
  t.script(at, {"k"}, {"50"});
  t.pass(150ms);
  CHECK(t.same({"GET", "k"}) == nil);
  CHECK(t.same({"SET", "k", "v", "PXAT", "0"}).front() == '-');
  CHECK(t.same({"SET", "k", "v", "PXAT", "soon"}).front() == '-');
  CHECK(t.same({"SET", "k", "v", "PXAT", "99999999999999", "PX", "10"}).front() == '-');
  CHECK(t.same({"SET", "k", "v", "KEEPTTL", "PXAT", "99999999999999"}).front() == '-');
  CHECK(t.same({"SET", "k", "v", "NX", "PXAT", "99999999999999"}) == "+OK\r\n");
  CHECK(t.same({"SET", "k", "w", "NX", "PXAT", "99999999999999"}) == nil);
}

TEST_CASE("the readers' pattern of the lock family, written out inline", "[sim][model][zset]") {
  redis_and_model t;
  // What a set of readers scored by their expiry goes through: add, extend with XX, count the
  // live ones, find the longest, purge the expired; `now` comes in ARGV as the scripts get it
  // from TIME.
  const std::string step = R"lua(
    local set, now = KEYS[1], tonumber(ARGV[1])
    local out = {}
    local function live() return redis.call('exists', set) == 1 and redis.call('zcount', set, now, '+inf') > 0 end
    local function longest()
      local top = redis.call('zrevrange', set, 0, 0, 'withscores')
      if top[2] and tonumber(top[2]) >= now then return tonumber(top[2]) - now end
      return 0
    end
    local function purge()
      local gone = redis.call('zrangebyscore', set, '-inf', '(' .. now)
      if #gone > 0 then redis.call('zremrangebyscore', set, '-inf', '(' .. now) end
      return gone
    end
    for i = 2, #ARGV, 3 do
      local op, owner, ttl = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
      if op == 'add' then
        out[#out + 1] = redis.call('zadd', set, now + ttl, owner)
      elseif op == 'extend' then
        local score = redis.call('zscore', set, owner)
        if not score or tonumber(score) < now then
          out[#out + 1] = -1
        else
          out[#out + 1] = redis.call('zadd', set, 'XX', now + ttl, owner)
        end
      elseif op == 'remove' then
        out[#out + 1] = redis.call('zrem', set, owner)
      end
    end
    out[#out + 1] = live()
    out[#out + 1] = longest()
    out[#out + 1] = purge()
    out[#out + 1] = redis.call('zcard', set)
    out[#out + 1] = redis.call('zrange', set, 0, -1, 'withscores')
    return out
  )lua";
  const std::string now = "1700000000000";
  t.script(step, {"r readers"},
           {now, "add", "reader-a", "8000", "add", "reader-b", "1000", "extend", "reader-c", "5"});
  // 1000 ms on: reader-b is due exactly now (still live), then past.
  t.script(step, {"r readers"}, {"1700000001000", "extend", "reader-b", "0"});
  t.script(step, {"r readers"}, {"1700000001001", "extend", "reader-b", "500"});
  t.script(step, {"r readers"}, {"1700000008000"});
  t.script(step, {"r readers"}, {"1700000008001", "remove", "reader-a", "0"});
  CHECK(t.same({"EXISTS", "r readers"}) == integer(0));
  t.script(step, {"r readers"}, {"1700000009000", "add", "reader-a", "0", "add", "reader-b", "1"});
}
