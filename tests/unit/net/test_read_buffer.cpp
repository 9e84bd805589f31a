// The read buffer's sizing: small while quiet, large for a burst, small again after it.
#include "redlockd/net/read_buffer.hpp"

#include <catch2/catch.hpp>

using namespace redlockd;

TEST_CASE("a read buffer starts small and grows when a read fills it", "[read_buffer]") {
  read_buffer buffer(1024, 16384);
  CHECK(buffer.size() == 1024);
  CHECK(buffer.space().size() == 1024);
  CHECK(buffer.filled(100)); // quiet
  CHECK(buffer.size() == 1024);
  CHECK_FALSE(buffer.filled(1024)); // full: a burst
  CHECK(buffer.size() == 16384);
  CHECK(buffer.space().size() == 16384);
}

TEST_CASE("a grown read buffer stays while reads bring more than the small size", "[read_buffer]") {
  read_buffer buffer(1024, 16384);
  buffer.filled(1024);
  const char* grown = buffer.space().data();
  for (std::size_t n : {16384U, 5000U, 1025U, 16384U, 2000U}) {
    CHECK_FALSE(buffer.filled(n));
    CHECK(buffer.size() == 16384);
  }
  CHECK(buffer.space().data() == grown); // no reallocation during the burst
  CHECK(buffer.filled(1024));            // the burst is over
  CHECK(buffer.size() == 1024);
  CHECK(buffer.filled(0));
  CHECK(buffer.size() == 1024);
}

TEST_CASE("a read buffer whose sizes are equal never resizes", "[read_buffer]") {
  read_buffer buffer(4096, 4096);
  CHECK_FALSE(buffer.filled(4096));
  CHECK(buffer.size() == 4096);
  CHECK(buffer.filled(10));
  CHECK(buffer.size() == 4096);
}
