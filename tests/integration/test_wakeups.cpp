// Cross-daemon wake-ups: a release through one daemon wakes the waiters on another through the
// masters' wake channel, and costs nothing when nobody waits elsewhere.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "checks.hpp"
#include "test_env.hpp"

using namespace redlockd::test;
using namespace std::chrono_literals;

namespace {

// PUBLISH calls of every master (scripts' calls included).
std::int64_t publishes(const redis_fleet& fleet) {
  std::int64_t total = 0;
  for (std::size_t i = 0; i < fleet.size(); ++i)
    total += command_calls(fleet, i, "publish");
  return total;
}

// Masters where a daemon's waiter on `resource` is marked.
std::size_t masters_marked(const redis_fleet& fleet, const std::string& resource) {
  std::size_t marked = 0;
  for (std::size_t i = 0; i < fleet.size(); ++i)
    if (fleet.pttl(i, wait_marker(resource)) > 0)
      ++marked;
  return marked;
}

// A master that accepts connections and then answers nothing, as one blackholed right after the
// connection was made; counts the connections on which a SUBSCRIBE arrived.
class silent_master {
 public:
  silent_master() {
    const loopback_listener listener = listen_on_loopback(64);
    listen_fd_ = listener.fd;
    port_ = listener.port;
    thread_ = std::thread([this] { serve(); });
  }
  ~silent_master() {
    stop_ = true;
    thread_.join();
    for (const auto& c : connections_)
      if (c.fd >= 0)
        ::close(c.fd);
    ::close(listen_fd_);
  }
  silent_master(const silent_master&) = delete;
  silent_master& operator=(const silent_master&) = delete;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int subscriptions() const { return subscriptions_; }

 private:
  struct connection {
    int fd;
    std::string received;
    bool subscribed;
  };
  void serve() {
    while (!stop_) {
      std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
      for (const auto& c : connections_)
        fds.push_back({c.fd, POLLIN, 0}); // a closed one (-1) is ignored by poll
      ::poll(fds.data(), fds.size(), 10);
      if (fds[0].revents & POLLIN)
        connections_.push_back({::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC), "", false});
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP)) == 0)
          continue;
        connection& c = connections_[i - 1];
        char chunk[4096];
        const ssize_t n = ::recv(c.fd, chunk, sizeof chunk, 0);
        if (n <= 0) { // the daemon gave up on it
          ::close(c.fd);
          c.fd = -1;
          continue;
        }
        c.received.append(chunk, static_cast<std::size_t>(n));
        if (!c.subscribed && c.received.find("$9\r\nSUBSCRIBE\r\n") != std::string::npos) {
          c.subscribed = true;
          ++subscriptions_;
        }
      }
    }
  }

  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::vector<connection> connections_; // kept open, never answered
  std::atomic<int> subscriptions_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The holder's lock outlives the waiter's WAIT by far: only a wake-up can grant it in time.
void release_wakes_waiter_on_other_daemon(const redis_fleet& fleet, const daemon_process& d1,
                                          const daemon_process& d2, const std::string& resource) {
  line_client holder(d1.port());
  line_client waiter(d2.port());
  const lock_grant held = must_lock(holder, "LOCK " + resource + " 30000");
  waiter.send("LOCK " + resource + " 30000 WAIT 5000\n");
  REQUIRE(eventually([&] { return d2.info().at("waiters") == 1; }, 5s));
  // The refusal marked, on the masters that refused, that a daemon waits for this lock (the
  // waiter is counted when it queues, before its attempt is answered).
  CHECK(eventually([&] { return masters_marked(fleet, resource) >= 3; }, 5s));

  CHECK(holder.request("UNLOCK " + resource + " " + held.owner) == "OK");
  waiter.set_timeout(10s);
  const std::string reply = waiter.read_line();
  INFO("the waiter on the other daemon, WAIT 5000 behind a 30 s lock released at once: " << reply);
  const auto grant = parse_lock_ok(reply);
  REQUIRE(grant);
  CHECK(grant->fence > held.fence);
  CHECK(nodes_holding(fleet, resource, grant->owner).size() >= 3);
  CHECK(waiter.request("UNLOCK " + resource + " " + grant->owner) == "OK");
}

} // namespace

TEST_CASE("two daemons - an UNLOCK through one wakes the waiter on the other at once",
          "[integration][wake]") {
  redis_fleet fleet;
  daemon_process d1(fleet.addresses());
  daemon_process d2(fleet.addresses());
  // (CHECK, not REQUIRE: a daemon without wake-ups goes on to show what it does.)
  CHECK(eventually([&] { return all_wake_subscribed(d1) && all_wake_subscribed(d2); }, 10s));
  release_wakes_waiter_on_other_daemon(fleet, d1, d2, "job");
  CHECK(d2.info().at("counters").at("wakeups") >= 1);
  CHECK(publishes(fleet) >= 3); // the masters where the waiter had been refused
  // And the other way round.
  release_wakes_waiter_on_other_daemon(fleet, d2, d1, "job");
  CHECK(d1.info().at("counters").at("wakeups") >= 1);
}

TEST_CASE("two daemons - locks nobody waits for publish nothing", "[integration][wake]") {
  redis_fleet fleet;
  daemon_process d1(fleet.addresses());
  daemon_process d2(fleet.addresses());
  REQUIRE(eventually([&] { return all_wake_subscribed(d1) && all_wake_subscribed(d2); }, 10s));
  line_client c1(d1.port());
  line_client c2(d2.port());
  for (int i = 0; i < 20; ++i) {
    const std::string resource = "free-" + std::to_string(i % 3);
    line_client& client = i % 2 == 0 ? c1 : c2;
    const lock_grant grant = must_lock(client, "LOCK " + resource + " 10000");
    CHECK(client.request("UNLOCK " + resource + " " + grant.owner) == "OK");
  }
  // A try-lock refused by a holder leaves no marker either.
  const lock_grant held = must_lock(c1, "LOCK held 10000");
  CHECK(starts_with(c2.request("LOCK held 10000"), "BUSY "));
  CHECK(c1.request("UNLOCK held " + held.owner) == "OK");
  // A lock taken through d2, a waiter on d1 (the marks are d1's), the UNLOCK through d1: the
  // masters find only the releasing daemon's own mark and publish nothing; d1 wakes its waiter.
  const lock_grant mine = must_lock(c2, "LOCK mine 10000");
  // d2 answered at quorum: its SETs to the other masters land first, or one landing after the
  // UNLOCK through d1 stays there for its TTL (d2 does not know of that UNLOCK).
  REQUIRE(daemon_links_flushed(d2, fleet, {0, 1, 2, 3, 4}));
  line_client own(d1.port());
  own.send("LOCK mine 10000 WAIT 8000\n");
  REQUIRE(eventually([&] { return d1.info().at("waiters") == 1; }, 5s));
  REQUIRE(eventually([&] { return masters_marked(fleet, "mine") >= 3; }, 5s));
  CHECK(c1.request("UNLOCK mine " + mine.owner) == "OK");
  const auto got = parse_lock_ok(own.read_line());
  REQUIRE(got);
  CHECK(own.request("UNLOCK mine " + got->owner) == "OK");
  // A waiter that leaves without the lock takes its daemon's mark with it.
  const lock_grant kept = must_lock(c2, "LOCK left 10000");
  {
    line_client leaver(d1.port());
    leaver.send("LOCK left 10000 WAIT 8000\n");
    // The masters that hold d2's lock refuse and mark, a majority: not a given one, which d2's
    // SET may not have reached yet; it grants the attempt there and marks nothing, and d1 tries
    // again only after the holder's 10 s (a CI run saw that with master 4).
    REQUIRE(eventually([&] { return masters_marked(fleet, "left") >= 3; }, 5s));
  }
  REQUIRE(eventually([&] { return d1.info().at("waiters") == 0; }, 5s));
  CHECK(c2.request("UNLOCK left " + kept.owner) == "OK");
  // (Both daemons' links: that UNLOCK went through d2 and answered at quorum, its last releases
  // may still be on the way; an ASan build's fresh-clone run saw one left.)
  CHECK(daemon_links_flushed(d1, fleet, {0, 1, 2, 3, 4}));
  CHECK(daemon_links_flushed(d2, fleet, {0, 1, 2, 3, 4}));
  CHECK(publishes(fleet) == 0);
  CHECK(d1.info().at("counters").at("wakeups") == 0);
  CHECK(d2.info().at("counters").at("wakeups") == 0);
  const auto left_keys = lock_keys(fleet);
  CAPTURE(left_keys);
  CHECK(left_keys.empty());
  for (std::size_t i = 0; i < fleet.size(); ++i)
    CHECK(fleet.keys(i, wait_marker("*")).empty()); // taken out by the grant and the leaver
}

TEST_CASE("a wake channel cut by the master is subscribed again and wakes waiters as before",
          "[integration][wake]") {
  redis_fleet fleet;
  daemon_process d1(fleet.addresses());
  daemon_process d2(fleet.addresses());
  REQUIRE(eventually([&] { return all_wake_subscribed(d1) && all_wake_subscribed(d2); }, 10s));
  for (std::size_t i = 0; i < fleet.size(); ++i)
    fleet.run(i, "CLIENT", "KILL", "TYPE", "pubsub");
  // The daemon notices (it reconnects within its backoff, faster than INFO could show it).
  REQUIRE(
      eventually([&] { return d2.log().find("wake channel of node") != std::string::npos; }, 5s));
  CHECK(d2.log().find("closed: End of file") != std::string::npos);
  REQUIRE(eventually([&] { return all_wake_subscribed(d2); }, 10s));
  // Each master shows a subscriber of each daemon again.
  for (std::size_t i = 0; i < fleet.size(); ++i)
    CHECK(eventually(
        [&] {
          return fleet.run(i, "PUBSUB", "NUMSUB", "redlockd:fence:wake").elements.size() == 2 &&
                 fleet.run(i, "PUBSUB", "NUMSUB", "redlockd:fence:wake").elements[1].integer == 2;
        },
        10s));
  release_wakes_waiter_on_other_daemon(fleet, d1, d2, "cut");
}

TEST_CASE(
    "masters whose ACL predates wake-ups still lock and release, and waiters use their timers",
    "[integration][wake][auth]") {
  const std::string admin = "adm1n-pass";
  const std::string password = "l0ck-user-pass";
  redis_fleet fleet(5, acl_args(admin, password, /*wake_channel=*/false), admin);
  temp_dir dir;
  write_file(dir.path() / "redis-password", password + "\n");
  const nlohmann::json config = {{"redis_username", "redlockd"},
                                 {"redis_password_file", (dir.path() / "redis-password").string()},
                                 {"unsafe_disable_quarantine", true}};
  daemon_process d1(fleet.addresses(), config);
  daemon_process d2(fleet.addresses(), config);
  REQUIRE(
      eventually([&] { return d2.log().find("wake channel of node") != std::string::npos; }, 10s));
  CHECK(d2.log().find("refused") != std::string::npos);
  line_client holder(d1.port());
  const lock_grant held = must_lock(holder, "LOCK old-acl 1500");
  // A waiter on the other daemon marks the masters (GET and SET are allowed).
  line_client waiter(d2.port());
  waiter.send("LOCK old-acl 10000 WAIT 8000\n");
  REQUIRE(eventually([&] { return d2.info().at("waiters") == 1; }, 5s));
  REQUIRE(eventually([&] { return masters_marked(fleet, "old-acl") >= 3; }));
  // The release tries to publish (the mark is another daemon's), is refused, releases anyway.
  CHECK(holder.request("UNLOCK old-acl " + held.owner) == "OK");
  CHECK(nodes_holding(fleet, "old-acl", held.owner).empty());
  // The waiter was not woken: it tries on its timer, after the holder's remaining TTL.
  waiter.set_timeout(10s);
  const auto grant = parse_lock_ok(waiter.read_line());
  REQUIRE(grant);
  CHECK(d2.info().at("counters").at("wakeups") == 0);
  CHECK(waiter.request("UNLOCK old-acl " + grant->owner) == "OK");
}

TEST_CASE("two daemons - waiters on a lock held on a majority but free elsewhere try at the "
          "holder's hints, not in a loop",
          "[integration][wake]") {
  redis_fleet fleet;
  daemon_process d1(fleet.addresses());
  daemon_process d2(fleet.addresses());
  REQUIRE(eventually([&] { return all_wake_subscribed(d1) && all_wake_subscribed(d2); }, 10s));
  // A plain Redlock client holds "loop" on masters 0, 1 and 2 for 3 s and on master 3 for
  // 100 ms; master 4 is free. Both waiters are refused on 0-3, then try again when master 3's
  // copy expires: granted on 3 and 4, refused by the majority, released again.
  for (std::size_t i = 0; i < 3; ++i)
    REQUIRE(fleet.set_nx_px(i, "loop", "someone-else", 3000));
  REQUIRE(fleet.set_nx_px(3, "loop", "someone-else", 100));
  std::vector<std::int64_t> before;
  for (std::size_t i = 0; i < fleet.size(); ++i)
    before.push_back(script_calls(fleet, i));
  line_client w1(d1.port());
  line_client w2(d2.port());
  w1.send("LOCK loop 1000 WAIT 2000\n");
  w2.send("LOCK loop 1000 WAIT 2000\n");
  // By 1 s each waiter tried when it came and when master 3's copy expired, and released the
  // attempt granted on masters 3 and 4: releases of attempts that were never granted wake
  // nobody.
  std::this_thread::sleep_for(1s);
  CHECK(publishes(fleet) == 0);
  w1.set_timeout(10s);
  w2.set_timeout(10s);
  CHECK(starts_with(w1.read_line(), "BUSY "));
  CHECK(starts_with(w2.read_line(), "BUSY "));
  // The next hint, 2.9 s, is past their waits. The first to give up removes its mark (unmark);
  // where the other had yielded its turn to it, that wakes the other once (a publish per
  // master, 6440110), which tries once or twice more before its own wait runs out. Each
  // attempt granted on a minority may have split the masters with another head's attempt: up to
  // max_split_retries (3) more come within 20 ms each, per release seen (each master's message
  // counts; they come together here). So each waiter makes about 3 x 4 attempts, each a call on
  // every master and a cleanup where it was granted: 24 calls per master, 48 for both (22 seen
  // at most). A loop of wake-ups runs thousands of calls in 2 s.
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    INFO("master " << i);
    CHECK(script_calls(fleet, i) - before[i] <= 48);
  }
  CHECK(publishes(fleet) <= static_cast<std::int64_t>(fleet.size()));
  CHECK(d1.info().at("counters").at("wakeups").get<int>() +
            d2.info().at("counters").at("wakeups").get<int>() <=
        1);
}

TEST_CASE("two daemons - a KEEP lock across a master paused 4.5 s: waiters try at the holder's "
          "hints, not in a loop",
          "[integration][wake]") {
  // Issue 21, case 2, trigger (b): redlockd alone. The KEEP lock's renewals cannot reach the
  // paused master, so its copy expires there; once it answers again the lock is free on it and
  // held on the other four. Each waiter's attempt is granted there and refused by the majority;
  // on c2376dd each cleanup published a wake-up there and every head tried again at once.
  redis_fleet fleet;
  daemon_process d1(fleet.addresses());
  daemon_process d2(fleet.addresses());
  REQUIRE(eventually([&] { return all_wake_subscribed(d1) && all_wake_subscribed(d2); }, 10s));
  line_client holder(d1.port());
  const lock_grant held = must_lock(holder, "LOCK keepjob 2000 KEEP");
  line_client w1(d1.port());
  line_client w2(d2.port());
  w1.send("LOCK keepjob 1000 WAIT 15000\n");
  w2.send("LOCK keepjob 1000 WAIT 15000\n");
  REQUIRE(eventually([&] { return d1.info().at("waiters") == 1 && d2.info().at("waiters") == 1; }));
  fleet.pause(0);
  std::this_thread::sleep_for(4500ms);
  fleet.resume(0);
  // What master 0 runs from half a second after it answers again (the commands queued while it
  // was stopped are behind it then) for two seconds.
  std::this_thread::sleep_for(500ms);
  const std::int64_t calls_before = script_calls(fleet, 0);
  const std::int64_t publishes_before = publishes(fleet);
  std::this_thread::sleep_for(2s);
  const std::int64_t calls = script_calls(fleet, 0) - calls_before;
  INFO("master 0 after it answered again: " << calls << " script calls in 2 s, state "
                                            << node_state(d1.info(), fleet.address(0)) << " / "
                                            << node_state(d2.info(), fleet.address(0)));
  // Each waiter tries on the holder's hint (its remaining TTL, about 1.3-2 s), plus at most 3
  // split retries per release it sees, each an attempt and a cleanup; the renewals add 3. A
  // loop of wake-ups runs thousands of calls a second.
  CHECK(calls <= 48);
  CHECK(publishes(fleet) - publishes_before <= static_cast<std::int64_t>(fleet.size()));
  // The KEEP lock still holds on a majority; once its holder lets go, a waiter gets it.
  CHECK(holder.request("UNLOCK keepjob " + held.owner) == "OK");
  line_client* first = nullptr;
  std::optional<std::string> line;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!first && std::chrono::steady_clock::now() < deadline)
    for (line_client* w : {&w1, &w2})
      if (!first && (line = w->try_read_line(50ms)))
        first = w;
  REQUIRE(first);
  const auto grant = parse_lock_ok(*line);
  INFO("the first waiter's answer: " << *line);
  REQUIRE(grant);
  CHECK(first->request("UNLOCK keepjob " + grant->owner) == "OK");
  line_client& second = first == &w1 ? w2 : w1;
  second.set_timeout(10s);
  CHECK(parse_lock_ok(second.read_line()));
}

TEST_CASE("a waiter whose attempt split the masters with another attempt tries again soon, not "
          "after that attempt's TTL",
          "[integration][wake]") {
  // scripts/bench's hot row on two daemons froze for seconds: two heads woken together each took
  // two masters, each refused by the other's attempt key (TTL 10 s) and by the old holder's on
  // the fifth. Each cleanup released a minority attempt, which wakes nobody, and each head
  // slept the 10 s TTL of a key that was gone a millisecond later. Here the other attempt is a
  // plain client's on masters 0-2, deleted as its cleanup would, without a wake-up.
  redis_fleet fleet;
  daemon_process d(fleet.addresses());
  for (std::size_t i = 0; i < 3; ++i)
    REQUIRE(fleet.set_nx_px(i, "split", "another-attempt", 10000));
  line_client w(d.port());
  w.send("LOCK split 10000 WAIT 5000\n");
  // Its attempt was refused on master 0: its daemon's entry is in the wait marker there. Polled
  // without a pause: the other attempt's cleanup comes a moment after the refusals.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (fleet.keys(0, "redlockd:fence:waiting:split").empty())
    REQUIRE(std::chrono::steady_clock::now() < deadline);
  for (std::size_t i = 0; i < 3; ++i)
    fleet.run(i, "DEL", "split");
  w.set_timeout(10s);
  const auto started = std::chrono::steady_clock::now();
  const std::string reply = w.read_line();
  CHECK(starts_with(reply, "OK "));
  // Tried again within the default retry and its jitter (a few times at most), not in 10 s.
  CHECK(std::chrono::steady_clock::now() - started < 2s);
}

TEST_CASE("two daemons - hand-overs among one daemon's clients do not starve another daemon's "
          "waiter",
          "[integration][wake][fairness]") {
  redis_fleet fleet;
  daemon_process d1(fleet.addresses());
  daemon_process d2(fleet.addresses());
  REQUIRE(eventually([&] { return all_wake_subscribed(d1) && all_wake_subscribed(d2); }, 10s));
  // x and y pass the lock back and forth through d1, each UNLOCK with the other one waiting; z
  // waits through d2.
  line_client x(d1.port());
  line_client y(d1.port());
  line_client z(d2.port());
  lock_grant held = must_lock(x, "LOCK shared 30000");
  // Tickets are proposals of fencing tokens, which follow the masters' clock: the waiter that
  // asks first is the older. With z_younger, y asks first and goes first, then z.
  const bool z_younger = GENERATE(false, true);
  CAPTURE(z_younger);
  const auto z_waits = [&] {
    z.send("LOCK shared 30000 WAIT 10000\n");
    REQUIRE(eventually([&] { return d2.info().at("waiters") == 1; }));
  };
  if (!z_younger)
    z_waits();
  y.send("LOCK shared 30000 WAIT 20000\n");
  REQUIRE(eventually([&] { return d1.info().at("waiters") == 1; }));
  if (z_younger)
    z_waits();
  std::this_thread::sleep_for(100ms); // both first attempts are over

  line_client* holder = &x;
  line_client* next = &y;
  std::optional<lock_grant> z_grant;
  int exchanges = 0;
  for (; exchanges < 50 && !z_grant; ++exchanges) {
    CHECK(holder->request("UNLOCK shared " + held.owner) == "OK");
    // The lock goes to y (handed over) or to z (older, through the masters).
    std::optional<lock_grant> next_grant;
    REQUIRE(eventually(
        [&] {
          if (const auto line = z.try_read_line(0ms))
            z_grant = parse_lock_ok(*line);
          else if (const auto other = next->try_read_line(0ms))
            next_grant = parse_lock_ok(*other);
          return z_grant || next_grant;
        },
        15s));
    if (z_grant)
      break;
    held = *next_grant;
    holder->send("LOCK shared 30000 WAIT 20000\n"); // and queues again behind it
    REQUIRE(eventually([&] { return d1.info().at("waiters") == 1; }));
    std::this_thread::sleep_for(100ms); // its first attempt is over
    std::swap(holder, next);
  }
  INFO("exchanges on d1 while z waited: " << exchanges);
  REQUIRE(z_grant);
  // z's mark makes it the older waiter at once, or after d1's current head: d1 sees z's ticket
  // in that hand-over's answers, and its next waiter's ticket comes after it.
  CHECK(exchanges <= (z_younger ? 1 : 0));
  CHECK(z.request("UNLOCK shared " + z_grant->owner) == "OK");
  // The lock goes back to d1's waiter.
  next->set_timeout(10s);
  const auto back = parse_lock_ok(next->read_line());
  REQUIRE(back);
  CHECK(next->request("UNLOCK shared " + back->owner) == "OK");
}

TEST_CASE("two daemons - a wake-up that comes while the head's attempt is in flight makes it try "
          "again when that attempt fails",
          "[integration][wake]") {
  redis_fleet fleet;
  daemon_process d1(fleet.addresses());
  // d2 waits up to 2 s for a master's answer: its head's attempt stays in flight while master 0
  // is paused.
  daemon_process d2(fleet.addresses(), {{"node_timeout_ms", 2000}});
  REQUIRE(eventually([&] { return all_wake_subscribed(d1) && all_wake_subscribed(d2); }, 10s));
  // Someone holds "late" on masters 0, 3 and 4: on 0 another client for 20 s, on 3 and 4 a
  // lock that its holder releases through d1 below.
  const std::string owner(40, 'a');
  REQUIRE(fleet.set_nx_px(0, "late", "someone-else", 20000));
  REQUIRE(fleet.set_nx_px(3, "late", owner, 20000));
  REQUIRE(fleet.set_nx_px(4, "late", owner, 20000));
  // The first waiter's attempt is refused by 0, 3 and 4 (it leaves its mark there).
  const std::int64_t calls_before = script_calls(fleet, 1);
  line_client first(d2.port());
  first.send("LOCK late 30000 WAIT 20000\n");
  REQUIRE(eventually([&] { return script_calls(fleet, 1) >= calls_before + 2; }));
  line_client second(d2.port());
  second.send("LOCK late 30000 WAIT 5000\n");
  REQUIRE(eventually([&] { return d2.info().at("waiters") == 2; }));

  // Master 0 stops answering for a second; the first waiter leaves, so the second tries now:
  // granted on 1 and 2, refused on 3 and 4, its request to 0 waiting.
  fleet.run(0, "CLIENT", "PAUSE", "1000", "ALL");
  const std::int64_t attempts_before = script_calls(fleet, 3);
  first.reset();
  REQUIRE(eventually([&] { return script_calls(fleet, 3) > attempts_before; }));
  // The lock is released through d1 meanwhile: 3 and 4 publish it while that attempt is out.
  line_client holder(d1.port());
  holder.request("UNLOCK late " + owner); // NOTHELD: master 0 answers too late for d1
  // Master 0 refuses the attempt once it answers (the other client's key): it failed, but a
  // release came meanwhile, so the head tries again at once instead of sleeping 19 s.
  second.set_timeout(10s);
  const std::string reply = second.read_line();
  INFO("the head, WAIT 5000, behind a lock released while its attempt was out: " << reply);
  const auto grant = parse_lock_ok(reply);
  REQUIRE(grant);
  CHECK(nodes_holding(fleet, "late", grant->owner).size() >= 3);
}

TEST_CASE("a wake channel whose SUBSCRIBE is never answered is opened again",
          "[integration][wake]") {
  // Four real masters and one that accepts connections but never answers: the subscriber
  // connection to it must not wait for its SUBSCRIBE forever (its health check skipped
  // connections that were not subscribed yet).
  redis_fleet fleet(4);
  silent_master silent;
  daemon_options options;
  options.nodes = fleet.addresses();
  options.nodes.push_back(silent.address());
  options.ready_nodes = fleet.addresses();
  options.extra = {{"redis_stall_ms", 300}, {"redis_health_interval_ms", 100}};
  daemon_process daemon(options);
  // Each connection is given up after the stall limit (300 ms) and opened again after the
  // backoff; a new SUBSCRIBE arrives each time.
  CHECK(eventually([&] { return silent.subscriptions() >= 3; }, 10s));
  INFO("SUBSCRIBEs the silent master received: " << silent.subscriptions());
  line_client client(daemon.port());
  const lock_grant grant = must_lock(client, "LOCK still-works 10000");
  CHECK(client.request("UNLOCK still-works " + grant.owner) == "OK");
}

// Found by the simulator (issue 22, seeds 149, 424, 487): a head refused by a long-held lock
// sleeps that holder's remaining TTL; when the UNLOCK hands the lock over to another daemon's
// waiter with a much shorter TTL, that head must be woken, or it sleeps on past a free lock.
TEST_CASE("two daemons - a hand-over to a shorter TTL wakes the other daemon's head, which would "
          "sleep past it",
          "[integration][wake]") {
  redis_fleet fleet;
  daemon_process d1(fleet.addresses());
  daemon_process d2(fleet.addresses());
  REQUIRE(eventually([&] { return all_wake_subscribed(d1) && all_wake_subscribed(d2); }, 10s));
  line_client x(d2.port());
  line_client y(d2.port());
  line_client z(d1.port());
  const lock_grant held = must_lock(x, "LOCK brief 30000");
  // The hand-over must go to y, so y's ticket must be older than z's. Tickets are proposals of
  // fencing tokens: d1 uses up proposals on refused try-locks first, so z's comes after y's.
  for (int i = 0; i < 20; ++i)
    CHECK(starts_with(z.request("LOCK brief 30000"), "BUSY "));
  y.send("LOCK brief 400 WAIT 20000\n");
  REQUIRE(eventually([&] { return d2.info().at("waiters") == 1; }));
  std::this_thread::sleep_for(100ms); // y's first attempt is over
  z.send("LOCK brief 30000 WAIT 6000\n");
  REQUIRE(eventually([&] { return d1.info().at("waiters") == 1; }));
  std::this_thread::sleep_for(100ms); // z was refused: it sleeps x's 30 s, capped by its wait
  CHECK(x.request("UNLOCK brief " + held.owner) == "OK");
  const auto handed = parse_lock_ok(y.read_line());
  REQUIRE(handed); // y holds for 400 ms and lets it run out
  // z gets the lock once y's lease is over: on the code before this fix it slept its whole
  // wait (x's remaining 30 s were longer) and answered BUSY.
  z.set_timeout(10s);
  const std::string line = z.read_line();
  const auto got = parse_lock_ok(line);
  INFO("z: " << line);
  REQUIRE(got);
  CHECK(got->fence > handed->fence);
  CHECK(z.request("UNLOCK brief " + got->owner) == "OK");
}

// Found by the simulator (issue 22, seed 11034): a daemon whose head waiter is granted while
// another of its waiters stays queued keeps its wait mark, so that the lock's release through
// another daemon still wakes that waiter.
TEST_CASE("two daemons - a grant to a daemon's head keeps its mark for the waiter behind, and a "
          "release through the other daemon wakes it",
          "[integration][wake]") {
  redis_fleet fleet;
  daemon_process d1(fleet.addresses());
  daemon_process d2(fleet.addresses());
  REQUIRE(eventually([&] { return all_wake_subscribed(d1) && all_wake_subscribed(d2); }, 10s));
  line_client x(d2.port());
  line_client w1(d2.port());
  line_client w2(d2.port());
  line_client other(d1.port());
  const lock_grant held = must_lock(x, "LOCK queued 30000");
  w1.send("LOCK queued 30000 WAIT 20000\n");
  REQUIRE(eventually([&] { return d2.info().at("waiters") == 1; }));
  w2.send("LOCK queued 30000 WAIT 6000\n");
  REQUIRE(eventually([&] { return d2.info().at("waiters") == 2; }));
  std::this_thread::sleep_for(100ms);
  CHECK(x.request("UNLOCK queued " + held.owner) == "OK"); // handed over to w1
  const auto first = parse_lock_ok(w1.read_line());
  REQUIRE(first);
  // w1's owner releases through d1 (a client that failed over, say): d2 only learns of it
  // through the masters' wake channel, which needs d2's mark for w2 to be there.
  CHECK(other.request("UNLOCK queued " + first->owner) == "OK");
  w2.set_timeout(10s);
  const std::string line = w2.read_line();
  const auto got = parse_lock_ok(line);
  INFO("w2: " << line);
  REQUIRE(got); // BUSY after its 6 s on the code before this fix (w1's 30 s lease was longer)
  CHECK(w2.request("UNLOCK queued " + got->owner) == "OK");
}
