// Limits that keep the daemon up and its memory bounded whatever clients do.
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "proc.hpp"
#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

TEST_CASE("connections beyond max_connections are told ERR TOO_MANY and closed",
          "[integration][limits]") {
  fleet_and_daemon env(nlohmann::json{{"max_connections", 3}});
  std::vector<line_client> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(env.client());
    REQUIRE(held.back().request("PING") == "PONG");
  }
  line_client extra = env.client();
  const std::string reply = extra.read_line();
  CHECK(starts_with(reply, "ERR TOO_MANY "));
  CHECK(extra.closed_by_peer());
  held.pop_back(); // a place frees up
  CHECK(eventually([&] {
    try {
      line_client again = env.client();
      return again.request("PING") == "PONG";
    } catch (const std::exception&) {
      return false;
    }
  }));
}

TEST_CASE("KEEP locks per connection and waiters are capped", "[integration][limits]") {
  fleet_and_daemon env(
      nlohmann::json{{"max_keep_locks_per_connection", 2}, {"max_waiters_per_resource", 1}});
  line_client client = env.client();
  REQUIRE(parse_lock_ok(client.request("LOCK k1 5000 KEEP")));
  REQUIRE(parse_lock_ok(client.request("LOCK k2 5000 KEEP")));
  CHECK(starts_with(client.request("LOCK k3 5000 KEEP"), "ERR TOO_MANY "));
  // k1 and k2 on the 5 masters (the replies came at quorum: the rest follow)
  CHECK(eventually([&] { return lock_keys(env.fleet, default_fence_key).size() == 10; }));
  // Another connection has its own allowance.
  line_client other = env.client();
  CHECK(parse_lock_ok(other.request("LOCK k3 5000 KEEP")));

  line_client w1 = env.client();
  line_client w2 = env.client();
  w1.send("LOCK k1 5000 WAIT 10000\n");
  REQUIRE(eventually([&] { return env.daemon.info().at("waiters") == 1; }, 5s));
  CHECK(starts_with(w2.request("LOCK k1 5000 WAIT 10000"), "ERR TOO_MANY "));
  CHECK(w2.request("PING") == "PONG"); // the connection lives on
}

TEST_CASE("a partial line that never ends is cut off", "[integration][limits]") {
  fleet_and_daemon env(nlohmann::json{{"partial_line_timeout_ms", 300}});
  line_client slow = env.client();
  slow.send("LOCK slowloris 10");
  CHECK(slow.closed_by_peer(3s));
  line_client fine = env.client();
  CHECK(fine.request("PING") == "PONG");
  CHECK(lock_keys(env.fleet).empty());
}

TEST_CASE("a pipeliner whose reads keep ending mid-line is not taken for a slowloris",
          "[integration][limits]") {
  fleet_and_daemon env(nlohmann::json{{"partial_line_timeout_ms", 300}});
  line_client busy = env.client();
  // Every write completes the previous request and starts the next one, for 4 timeouts.
  busy.send("PI");
  int answered = 0;
  const auto until = std::chrono::steady_clock::now() + 1200ms;
  while (std::chrono::steady_clock::now() < until) {
    busy.send("NG\nPI");
    REQUIRE(busy.read_line() == "PONG");
    ++answered;
    std::this_thread::sleep_for(20ms);
  }
  busy.send("NG\n");
  CHECK(busy.read_line() == "PONG");
  CHECK(answered > 10);
  CHECK_FALSE(busy.closed_by_peer(100ms));
}

TEST_CASE("a client that never reads its replies stops being read - others are served",
          "[integration][limits]") {
  fleet_and_daemon env;
  line_client hog = env.client();
  // PINGs with a 1 KiB word each; the daemon must not buffer their replies without bound.
  const std::string word(1000, 'x');
  std::string batch;
  for (int i = 0; i < 256; ++i)
    batch += "PING " + word + "\n";
  hog.set_timeout(2s);
  const int pid = daemon_pid(env.daemon);
  REQUIRE(pid > 0);
  const long rss_before = rss_kib(pid);
  // The daemon stops reading after 1 MiB of pending replies; then the socket buffers fill (a few
  // MiB on loopback) and a send blocks. 256 MiB is far beyond all that: reaching it means the
  // daemon kept reading. The deadline only bounds a broken run, it is not what ends a good one.
  constexpr std::size_t cap = std::size_t{256} << 20;
  std::size_t sent = 0;
  bool blocked = false;
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (!blocked && sent < cap && std::chrono::steady_clock::now() < deadline) {
    try {
      hog.send(batch); // blocks once the daemon stops reading and the socket buffers are full
      sent += batch.size();
    } catch (const std::exception&) {
      blocked = true; // the send timed out: the expected way to stop
    }
  }
  INFO("client sent " << sent / 1024 << " KiB without reading");
  REQUIRE(blocked);              // the daemon stopped reading (not the cap, not the deadline)
  CHECK_THROWS(hog.send(batch)); // and it still does not read
  line_client normal = env.client();
  CHECK(normal.request("PING") == "PONG");
  CHECK(parse_lock_ok(normal.request("LOCK served 1000")));
  const auto info = env.daemon.info();
  CHECK(info.at("clients") == 3); // the hog, the normal client and INFO's own connection
  const long rss_after = rss_kib(pid);
  // What the daemon may hold for the hog: 1 MiB of replies, its read buffer and the requests it
  // read but has not answered. Sanitizer builds keep freed memory in quarantine: looser there.
#if defined(__SANITIZE_ADDRESS__)
  constexpr long growth_bound_kib = 64 * 1024; // about 27 MiB measured
#else
  constexpr long growth_bound_kib = 8 * 1024; // about 1.3 MiB measured
#endif
  INFO("daemon RSS " << rss_before << " KiB -> " << rss_after << " KiB");
  REQUIRE(rss_before > 0);
  CHECK(rss_after - rss_before < growth_bound_kib);
  WARN("client sent " << sent / 1024 << " KiB without reading; daemon RSS " << rss_before
                      << " KiB -> " << rss_after << " KiB");
}

TEST_CASE("lines longer than an idle connection's read buffer, bursts and a partial line after "
          "one are all read - LINE_TOO_LONG stays",
          "[integration][limits]") {
  fleet_and_daemon env;
  line_client c = env.client();
  // An idle connection reads 1 KiB at a time: lines of 3 KiB arrive over several reads.
  const std::string word(3000, 'w');
  CHECK(c.request("PING " + word) == "PONG " + word);
  // 2,000 pipelined requests (about 20 KiB) in one send: answered in order.
  std::string burst;
  for (int i = 0; i < 2000; ++i)
    burst += "PING " + std::to_string(i) + (i % 100 == 0 ? word : "") + "\n";
  c.send(burst);
  for (int i = 0; i < 2000; ++i) {
    const std::string expected = "PONG " + std::to_string(i) + (i % 100 == 0 ? word : "");
    REQUIRE(c.read_line() == expected);
  }
  // A short read after the burst gives its buffers back, with this partial line in them.
  c.send("PING par");
  std::this_thread::sleep_for(100ms);
  c.send("tial\nPING next\n");
  CHECK(c.read_line() == "PONG partial");
  CHECK(c.read_line() == "PONG next");
  // And the next burst grows them again.
  c.send(burst);
  for (int i = 0; i < 2000; ++i)
    REQUIRE(starts_with(c.read_line(), "PONG " + std::to_string(i)));
  // One byte over max_line_bytes (4096), sent after a short request: LINE_TOO_LONG and a close.
  c.send("PING\n" + std::string(4097, 'x'));
  CHECK(c.read_line() == "PONG");
  CHECK(starts_with(c.read_line(), "ERR LINE_TOO_LONG "));
  CHECK(c.closed_by_peer(3s));
}
