// The batching writer over a plaintext stream, in one process over a loopback socket pair:
// what one loop turn appends goes out in one write, appends during a write wait for the next.
#include "redlockd/net/batch_writer.hpp"
#include "redlockd/net/stream.hpp"

#include <boost/asio/read.hpp>

#include <catch2/catch.hpp>

#include <string>

using namespace redlockd;

namespace {

struct counting_owner : batch_writer::owner {
  int writes = 0;
  int drained = 0;
  bool keep_writing = true;
  error_code_t last_error;
  bool on_written(const error_code_t& ec) override {
    ++writes;
    last_error = ec;
    return keep_writing;
  }
  void on_drained() override { ++drained; }
};

// A connected pair: `peer` is read synchronously by the test, `out` is the writer's stream.
struct connection {
  net::io_context io;
  tcp::socket peer{io};
  stream out{io};
  connection() {
    tcp::acceptor acceptor(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    peer.connect(acceptor.local_endpoint());
    acceptor.accept(out.socket());
  }
  std::string read(std::size_t n) {
    std::string bytes(n, '\0');
    net::read(peer, net::buffer(bytes));
    return bytes;
  }
  void run_until(const int& counter, int value) {
    while (counter < value && io.run_one() > 0) {
    }
  }
};

} // namespace

TEST_CASE("what one loop turn appends goes out in one write", "[batch_writer]") {
  connection c;
  counting_owner owner;
  batch_writer writer(c.out, owner);
  writer.append("PING\r\n");
  writer.append("TIME\r\n");
  writer.append("INFO\r\n");
  CHECK(writer.queued_bytes() == 18);
  CHECK_FALSE(writer.idle());
  c.run_until(owner.drained, 1);
  CHECK(owner.writes == 1);
  CHECK_FALSE(owner.last_error);
  CHECK(writer.idle());
  CHECK(writer.unwritten_bytes() == 0);
  CHECK(c.read(18) == "PING\r\nTIME\r\nINFO\r\n");
}

TEST_CASE("appends during a write go out together in the next write", "[batch_writer]") {
  connection c;
  counting_owner owner;
  batch_writer writer(c.out, owner);
  writer.append("first\n");
  REQUIRE(c.io.poll_one() == 1); // the posted flush: the write is now in flight
  CHECK(writer.queued_bytes() == 0);
  CHECK(writer.unwritten_bytes() == 6);
  writer.append("second\n");
  writer.append("third\n");
  CHECK(writer.queued_bytes() == 13);
  CHECK(writer.unwritten_bytes() == 19);
  c.run_until(owner.drained, 1);
  CHECK(owner.writes == 2);
  CHECK(writer.idle());
  CHECK(c.read(19) == "first\nsecond\nthird\n");
}

TEST_CASE("a discarded write completes unreported and its queue is dropped", "[batch_writer]") {
  connection c;
  counting_owner owner;
  batch_writer writer(c.out, owner);
  writer.append("old connection\n");
  REQUIRE(c.io.poll_one() == 1);
  writer.append("queued for it too\n");
  writer.discard();
  CHECK(writer.queued_bytes() == 0);
  c.io.run();
  CHECK(owner.writes == 0);
  CHECK(owner.drained == 0);
  CHECK(writer.idle());
  // The writer carries on for whatever is appended next.
  c.io.restart();
  writer.append("new\n");
  c.run_until(owner.drained, 1);
  CHECK(owner.writes == 1);
  CHECK(c.read(19) == "old connection\nnew\n");
}

TEST_CASE("an owner that refuses stops the writing, queued bytes stay", "[batch_writer]") {
  connection c;
  counting_owner owner;
  owner.keep_writing = false;
  batch_writer writer(c.out, owner);
  writer.append("one\n");
  REQUIRE(c.io.poll_one() == 1);
  writer.append("two\n");
  c.io.run();
  CHECK(owner.writes == 1);
  CHECK(owner.drained == 0);
  CHECK(writer.queued_bytes() == 4);
  CHECK(c.read(4) == "one\n");
}

TEST_CASE("nothing is written on a closed stream, the bytes wait", "[batch_writer]") {
  connection c;
  counting_owner owner;
  batch_writer writer(c.out, owner);
  c.out.close();
  writer.append("later\n");
  c.io.run();
  CHECK(owner.writes == 0);
  CHECK(writer.queued_bytes() == 6);
}

TEST_CASE("a failed write is reported to the owner", "[batch_writer]") {
  connection c;
  counting_owner owner;
  batch_writer writer(c.out, owner);
  c.out.shutdown(); // still open, but every send fails (EPIPE)
  writer.append("lost\n");
  c.run_until(owner.writes, 1);
  CHECK(owner.writes == 1);
  CHECK(owner.last_error);
  CHECK(writer.unwritten_bytes() == 0);
}

TEST_CASE("release_spare gives back the capacity a burst left", "[batch_writer]") {
  connection c;
  counting_owner owner;
  batch_writer writer(c.out, owner);
  const std::string burst(20000, 'b');
  writer.append(burst);
  c.run_until(owner.drained, 1);
  CHECK(c.read(burst.size()) == burst);
  CHECK(writer.capacity() >= burst.size()); // kept: the next burst allocates nothing
  writer.release_spare(1024);
  CHECK(writer.capacity() <= 1024);
  // Writes carry on as before.
  c.io.restart();
  writer.append("more\n");
  c.run_until(owner.drained, 2);
  CHECK(c.read(5) == "more\n");
}

TEST_CASE("release_spare during a write gives back its buffer once it is out", "[batch_writer]") {
  connection c;
  counting_owner owner;
  batch_writer writer(c.out, owner);
  const std::string burst(20000, 'b');
  writer.append(burst);
  REQUIRE(c.io.poll_one() == 1); // the posted flush: the write is now in flight
  REQUIRE(writer.queued_bytes() == 0);
  writer.release_spare(1024);
  CHECK(writer.capacity() >= burst.size()); // in use
  writer.append("tail\n");
  c.run_until(owner.drained, 1);
  CHECK(owner.writes == 2);
  CHECK(c.read(burst.size() + 5) == burst + "tail\n");
  CHECK(writer.capacity() <= 1024);
}
