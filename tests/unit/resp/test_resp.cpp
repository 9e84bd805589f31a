#include "redlockd/resp/resp.hpp"

#include <catch2/catch.hpp>
#include <hiredis/hiredis.h>

#include <stdexcept>
#include <string>
#include <vector>

using namespace redlockd;

namespace {

// "*<n>\r\n", appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict (GCC bug
// 105329) for `"*" + std::to_string(n)`.
std::string array_header(std::size_t n) {
  std::string header = "*";
  header += std::to_string(n);
  header += "\r\n";
  return header;
}

} // namespace

TEST_CASE("commands are formatted as RESP arrays of bulk strings", "[resp]") {
  std::string out;
  append_command(out, {"SET", "k", "v w"});
  CHECK(out == "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nv w\r\n");
  const std::size_t first = out.size();
  append_command(out, {"GET", std::string_view("a\0b", 3)}); // binary-safe
  CHECK(out.substr(first) == std::string("*2\r\n$3\r\nGET\r\n$3\r\na\0b\r\n", 22));
}

TEST_CASE("the reader returns complete replies only, across any split", "[resp]") {
  const std::string bytes =
      "*2\r\n:1\r\n$3\r\n123\r\n+OK\r\n$-1\r\n-NOSCRIPT No matching script\r\n";
  for (std::size_t split = 0; split <= bytes.size(); ++split) {
    reply_reader reader;
    reply_ptr reply;
    reader.feed(std::string_view(bytes).substr(0, split));
    int complete = 0;
    while (reader.next(reply) == reply_reader::status::reply)
      ++complete;
    reader.feed(std::string_view(bytes).substr(split));
    while (reader.next(reply) == reply_reader::status::reply) {
      ++complete;
      if (complete == 1) {
        REQUIRE(array_size(*reply) == 2);
        CHECK(as_integer(array_at(*reply, 0)) == 1);
        CHECK(as_string(array_at(*reply, 1)) == "123");
      }
    }
    CHECK(complete == 4);
  }
}

TEST_CASE("reply helpers tell the types apart", "[resp]") {
  reply_reader reader;
  reader.feed("+OK\r\n$-1\r\n-ERR boom\r\n:42\r\n");
  reply_ptr reply;
  REQUIRE(reader.next(reply) == reply_reader::status::reply);
  CHECK(as_string(*reply) == "OK");
  CHECK_FALSE(is_error(*reply));
  REQUIRE(reader.next(reply) == reply_reader::status::reply);
  CHECK(is_nil(*reply));
  CHECK(as_string(*reply).empty());
  REQUIRE(reader.next(reply) == reply_reader::status::reply);
  CHECK(is_error(*reply));
  CHECK(as_string(*reply) == "ERR boom");
  REQUIRE(reader.next(reply) == reply_reader::status::reply);
  CHECK(as_integer(*reply) == 42);
  CHECK(array_size(*reply) == 0);
  CHECK(reader.next(reply) == reply_reader::status::need_more);
}

TEST_CASE("a broken stream is a protocol error", "[resp]") {
  reply_reader reader;
  reader.feed("?what\r\n");
  reply_ptr reply;
  CHECK(reader.next(reply) == reply_reader::status::protocol_error);
  reader.reset();
  reader.feed(":7\r\n");
  REQUIRE(reader.next(reply) == reply_reader::status::reply);
  CHECK(as_integer(*reply) == 7);
}

TEST_CASE("a reply claiming a huge array is a protocol error before anything is allocated",
          "[resp]") {
  // Found by tests/fuzz/fuzz_resp: hiredis alone callocs 16 GiB for this header.
  reply_reader reader;
  reply_ptr reply;
  reader.feed("*2147483647\r\n");
  CHECK(reader.next(reply) == reply_reader::status::protocol_error);

  // Elements count too: arrays within arrays share the one budget of the reply.
  reply_reader nested;
  nested.feed("*2\r\n" + array_header(max_reply_objects / 2));
  CHECK(nested.next(reply) == reply_reader::status::need_more);
  nested.feed(array_header(max_reply_objects / 2));
  CHECK(nested.next(reply) == reply_reader::status::protocol_error);

  // Within the bound is fine (a slot and an integer per element), and the count starts over
  // for the next reply.
  reply_reader within;
  const std::size_t elements = (max_reply_objects - 1) / 2;
  for (int round = 0; round < 2; ++round) {
    std::string bytes = array_header(elements);
    for (std::size_t i = 0; i < elements; ++i)
      bytes += ":1\r\n";
    within.feed(bytes);
    REQUIRE(within.next(reply) == reply_reader::status::reply);
    CHECK(array_size(*reply) == elements);
  }
}

TEST_CASE("a bulk string longer than max_reply_bytes is a protocol error - not buffered",
          "[resp]") {
  reply_reader reader;
  reply_ptr reply;
  reader.feed("$2000000000\r\n");
  const std::string chunk(64 * 1024, 'x');
  std::size_t fed = 0;
  reply_reader::status status = reply_reader::status::need_more;
  while (status == reply_reader::status::need_more && fed < 2 * max_reply_bytes) {
    reader.feed(chunk);
    fed += chunk.size();
    status = reader.next(reply);
  }
  CHECK(status == reply_reader::status::protocol_error);
  CHECK(fed <= max_reply_bytes + chunk.size());

  // A reset reader works again.
  reader.reset();
  reader.feed("+OK\r\n");
  REQUIRE(reader.next(reply) == reply_reader::status::reply);
  CHECK(as_string(*reply) == "OK");

  // Many small replies fed piecewise never add up against the bound.
  reply_reader pipelined;
  std::size_t replies = 0;
  for (std::size_t total = 0; total < 2 * max_reply_bytes; total += chunk.size()) {
    std::string bytes;
    while (bytes.size() < chunk.size())
      bytes += "$5\r\nhello\r\n";
    pipelined.feed(bytes);
    while (pipelined.next(reply) == reply_reader::status::reply)
      ++replies;
  }
  CHECK(replies > 2 * max_reply_bytes / 12);
}

TEST_CASE("commands are the very bytes hiredis' formatter writes", "[resp]") {
  const std::string long_arg(1000, 'x');
  const std::string binary("a\0\r\nb", 5);
  const std::vector<std::vector<std::string_view>> commands = {
      {"PING"},
      {"GET", ""},
      {"EVALSHA", "0123456789012345678901234567890123456789", "3", "k", "f", "f:max_ttl", "owner",
       "10000", "42", long_arg},
      {"SET", binary, long_arg},
  };
  for (const auto& args : commands) {
    std::vector<const char*> argv;
    std::vector<std::size_t> argvlen;
    for (std::string_view arg : args) {
      argv.push_back(arg.data());
      argvlen.push_back(arg.size());
    }
    char* formatted = nullptr;
    const int length = redisFormatCommandArgv(&formatted, static_cast<int>(args.size()),
                                              argv.data(), argvlen.data());
    REQUIRE(length > 0);
    const std::string expected(formatted, static_cast<std::size_t>(length));
    redisFreeCommand(formatted);

    std::string out = "before";
    switch (args.size()) {
    case 1:
      append_command(out, {args[0]});
      break;
    case 2:
      append_command(out, {args[0], args[1]});
      break;
    case 3:
      append_command(out, {args[0], args[1], args[2]});
      break;
    default:
      append_command(out, {args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7],
                           args[8], args[9]});
      break;
    }
    CHECK(out == "before" + expected);
  }
  std::string out;
  // More than the longest call (hand_over: 17) is a programming error.
  CHECK_THROWS_AS(append_command(out, {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11",
                                       "12", "13", "14", "15", "16", "17", "18"}),
                  std::logic_error);
}
