#include "redlockd/resp.hpp"

#include <catch2/catch.hpp>
#include <hiredis/hiredis.h>

using namespace redlockd;

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
