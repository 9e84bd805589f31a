// redlockctl's long waits: which WAIT each LOCK carries, and which reply ends the wait.
#include "redlockd/ctl/long_wait.hpp"

#include <catch2/catch.hpp>

using redlockd::ctl::wait_chunks;
using namespace std::chrono_literals;

TEST_CASE("a wait the daemon accepts is one request", "[long_wait]") {
  wait_chunks chunks(30s, 10s);
  CHECK(chunks.next() == 30s);
  CHECK_FALSE(chunks.again("OK owner 7 9990", 2s));
  wait_chunks busy(30s, 10s);
  CHECK_FALSE(busy.again("BUSY 120", 30s)); // waited for in full: nothing is left
}

TEST_CASE("a wait beyond max_ttl_ms is halved until accepted, then sent in chunks", "[long_wait]") {
  wait_chunks chunks(10'000ms, 1000ms); // the daemon's max_ttl_ms is 3000
  CHECK(chunks.next() == 10'000ms);
  CHECK(chunks.again("ERR BAD_TTL ttl or wait out of range", 1ms));
  CHECK(chunks.next() == 5000ms);
  CHECK(chunks.again("ERR BAD_TTL ttl or wait out of range", 1ms));
  CHECK(chunks.next() == 2500ms);
  // Queued: the chunk ran out while the lock was still held. The next chunk continues.
  CHECK(chunks.again("BUSY 800", 2502ms));
  CHECK(chunks.next() == 2500ms);
  CHECK(chunks.again("BUSY 800", 2501ms));
  CHECK(chunks.next() == 2500ms);
  CHECK(chunks.again("BUSY 800", 2500ms));
  CHECK(chunks.next() == 10'000ms - 2502ms - 2501ms - 2500ms); // what is left
  CHECK_FALSE(chunks.again("OK owner 9 990", 100ms));
}

TEST_CASE("the wait ends when the whole wait ran out", "[long_wait]") {
  wait_chunks chunks(5000ms, 1000ms);
  CHECK(chunks.again("ERR BAD_TTL", 1ms));
  CHECK(chunks.next() == 2500ms);
  CHECK(chunks.again("BUSY 10", 2500ms));
  CHECK(chunks.next() == 2500ms);
  CHECK_FALSE(chunks.again("BUSY 10", 2500ms)); // 5000 ms waited for: BUSY is the answer
}

TEST_CASE("replies that end the wait at once", "[long_wait]") {
  for (const char* final_reply :
       {"NOQUORUM 2 3", "ERR TOO_MANY waiters", "ERR NOAUTH secret", "ERR SHUTTING_DOWN"}) {
    wait_chunks chunks(10s, 1s);
    CHECK_FALSE(chunks.again(final_reply, 10ms));
  }
  // A BUSY before the chunk ran out (lock-delay, a closing daemon) is final: no tight loop.
  wait_chunks early(10s, 1s);
  CHECK_FALSE(early.again("BUSY 500", 9s));
}

TEST_CASE("a TTL the daemon refuses is refused once the chunk is down to it", "[long_wait]") {
  // BAD_TTL because of the TTL itself: halving stops at the TTL and the error is the answer.
  wait_chunks chunks(4000ms, 1000ms);
  CHECK(chunks.again("ERR BAD_TTL", 1ms));
  CHECK(chunks.next() == 2000ms);
  CHECK(chunks.again("ERR BAD_TTL", 1ms));
  CHECK(chunks.next() == 1000ms);
  CHECK_FALSE(chunks.again("ERR BAD_TTL", 1ms));
  // A wait shorter than the TTL is never halved.
  wait_chunks short_wait(500ms, 1000ms);
  CHECK_FALSE(short_wait.again("ERR BAD_TTL", 1ms));
}
