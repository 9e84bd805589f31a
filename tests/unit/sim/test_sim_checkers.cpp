// The simulator's checkers (tests/sim/checkers.hpp) on hand-made histories: each must fail on the
// violation it is for, and stay quiet on the legal history next to it.
#include <catch2/catch.hpp>

#include <algorithm>

#include "../../sim/checkers.hpp"

using namespace redlockd;
using namespace redlockd::sim;

namespace {

constexpr sim_time ms = 1000;

owner_id owner(char c) {
  owner_id o;
  o.fill(c);
  return o;
}

// A history of two resources, one connection per client, healthy from 0 to 100 s.
struct builder {
  history h;
  builder() {
    h.masters = 5;
    h.daemons = 2;
    h.resources = {"a", "b"};
    h.end = 100'000 * ms;
    h.healthy = {{0, h.end}};
    h.longest_ttl_ms = 1000;
    for (std::uint32_t c = 0; c < 8; ++c)
      h.connections.push_back({c, c % 2, 0, -1});
  }
  // A granted LOCK: OK at `ok` with `validity` ms; invoked (and its round sent) 1 ms before.
  std::uint32_t grant(std::uint32_t client, std::uint32_t resource, sim_time ok,
                      std::int64_t validity, std::uint64_t fence, char who, bool keep = false) {
    request_record r;
    r.client = client;
    r.connection = client;
    r.daemon = client % 2;
    r.daemon_instance = client % 2;
    r.kind = client_op::lock;
    r.resource = resource;
    r.ttl_ms = 1000;
    r.keep = keep;
    r.owner = owner(who);
    r.invoke = ok - 1 * ms;
    r.attempt_start = r.invoke;
    r.reply = ok;
    r.result = outcome::ok;
    r.fence = fence;
    r.validity_ms = validity;
    h.requests.push_back(r);
    return static_cast<std::uint32_t>(h.requests.size() - 1);
  }
  std::uint32_t follow(client_op kind, std::uint32_t lock, sim_time invoke, sim_time reply,
                       outcome result, std::int64_t validity = 0) {
    request_record r = h.requests[lock];
    r.kind = kind;
    r.lock = lock;
    r.invoke = invoke;
    r.reply = reply;
    r.result = result;
    r.validity_ms = validity;
    r.fence = 0;
    h.requests.push_back(r);
    return static_cast<std::uint32_t>(h.requests.size() - 1);
  }
  std::uint32_t waiter(std::uint32_t client, std::uint32_t resource, sim_time invoke,
                       sim_time reply, outcome result, std::int64_t wait_ms,
                       std::uint64_t fence = 0) {
    request_record r;
    r.client = client;
    r.connection = client;
    r.daemon = client % 2;
    r.daemon_instance = client % 2;
    r.resource = resource;
    r.ttl_ms = 1000;
    r.wait_ms = wait_ms;
    r.invoke = invoke;
    r.attempt_start = result == outcome::ok ? reply - 1 * ms : -1;
    r.reply = reply;
    r.result = result;
    r.fence = fence;
    r.validity_ms = result == outcome::ok ? 900 : 0;
    r.owner = owner(static_cast<char>('k' + h.requests.size() % 10));
    h.requests.push_back(r);
    return static_cast<std::uint32_t>(h.requests.size() - 1);
  }
};

bool has(const std::vector<violation>& found, const std::string& checker) {
  return std::any_of(found.begin(), found.end(),
                     [&](const violation& v) { return v.checker == checker; });
}

} // namespace

TEST_CASE("mutual exclusion: two leases of one resource that overlap fail", "[sim]") {
  builder b;
  b.grant(0, 0, 1000 * ms, 500, 1, 'a');
  b.grant(1, 0, 1400 * ms, 500, 2, 'b'); // while the first holds it until 1500 ms
  const auto found = check_mutual_exclusion(b.h);
  REQUIRE(found.size() == 1);
  CHECK(found[0].resource == 0);
  CHECK(found[0].at == 1400 * ms);
}

TEST_CASE("mutual exclusion: back to back, on other resources, or after an UNLOCK is fine",
          "[sim]") {
  builder b;
  const auto first = b.grant(0, 0, 1000 * ms, 500, 1, 'a');
  b.grant(1, 0, 1500 * ms, 500, 2, 'b'); // the first's validity ended at 1500 ms
  b.grant(2, 1, 1200 * ms, 500, 3, 'c'); // another resource
  b.follow(client_op::unlock, first, 1100 * ms, 1101 * ms, outcome::ok);
  b.grant(3, 0, 1150 * ms, 200, 4, 'd'); // after the first's UNLOCK, before the second
  CHECK(check_mutual_exclusion(b.h).empty());
}

TEST_CASE("mutual exclusion: an EXTEND pushes the hold on, a KEEP lock holds until LOST", "[sim]") {
  builder b;
  const auto lease = b.grant(0, 0, 1000 * ms, 500, 1, 'a');
  b.follow(client_op::extend, lease, 1400 * ms, 1401 * ms, outcome::ok, 500);
  b.grant(1, 0, 1600 * ms, 100, 2, 'b'); // inside the extended hold (until 1901 ms)
  const auto keep = b.grant(2, 1, 1000 * ms, 300, 3, 'c', true);
  b.h.requests[keep].lost = 5000 * ms;
  b.grant(3, 1, 4000 * ms, 300, 4, 'd'); // long after the OK's validity, before LOST
  const auto found = check_mutual_exclusion(b.h);
  REQUIRE(found.size() == 2);
  CHECK(found[0].resource == 0);
  CHECK(found[1].resource == 1);
}

TEST_CASE("mutual exclusion: a key a fault destroyed excuses the overlap until the granting "
          "daemon is told",
          "[sim]") {
  builder b;
  b.grant(0, 0, 1000 * ms, 5000, 1, 'a');
  const auto second = b.grant(1, 0, 3000 * ms, 500, 2, 'b');
  data_loss loss;
  loss.master = 2;
  loss.at = 2000 * ms;
  loss.locks.emplace_back(0, owner('a'));
  b.h.losses.push_back(loss);
  CHECK(check_mutual_exclusion(b.h).empty()); // daemon 1 was not told

  b.h.evidence.push_back({0, 2, 2500 * ms}); // another daemon was told: no excuse for daemon 1
  CHECK(check_mutual_exclusion(b.h).empty());

  b.h.evidence.push_back({b.h.requests[second].daemon_instance, 2, 2500 * ms});
  CHECK(check_mutual_exclusion(b.h).size() == 1); // it was told before its round

  // A loss that took the fence register (FLUSHALL) excuses nothing: no grant counts there.
  b.h.evidence.clear();
  CHECK(check_mutual_exclusion(b.h).empty());
  b.h.losses.back().register_lost = true;
  CHECK(check_mutual_exclusion(b.h).size() == 1);
}

TEST_CASE("fences: a later request with a token not above an earlier grant's fails", "[sim]") {
  builder b;
  b.grant(0, 0, 1000 * ms, 500, 10, 'a');
  b.grant(1, 1, 2000 * ms, 500, 9, 'b'); // invoked at 1999 ms, after the first's OK
  auto found = check_fences(b.h);
  REQUIRE(found.size() == 1);
  CHECK(found[0].resource == 1);

  builder c;
  c.grant(0, 0, 1000 * ms, 500, 10, 'a');
  c.grant(1, 1, 1000 * ms + 500, 500, 9, 'b'); // invoked before the first's OK: concurrent
  CHECK(check_fences(c.h).empty());
  c.grant(2, 1, 3000 * ms, 500, 10, 'c'); // the same token twice
  found = check_fences(c.h);
  CHECK(found.size() == 2); // a duplicate, and not above the first's
}

TEST_CASE("no resurrection: an EXTEND after the lock ended, with another grant in between, "
          "fails",
          "[sim]") {
  builder b;
  const auto lease = b.grant(0, 0, 1000 * ms, 500, 1, 'a');
  b.grant(1, 0, 1600 * ms, 100, 2, 'b');
  b.follow(client_op::extend, lease, 1800 * ms, 1801 * ms, outcome::ok, 500);
  CHECK(check_no_resurrection(b.h).size() == 1);

  builder c;
  const auto alone = c.grant(0, 0, 1000 * ms, 500, 1, 'a');
  c.follow(client_op::extend, alone, 1800 * ms, 1801 * ms, outcome::ok, 500); // nobody between
  CHECK(check_no_resurrection(c.h).empty());
}

TEST_CASE("contract: two replies, LOST before OK and a missing reply fail", "[sim]") {
  builder b;
  const auto a = b.grant(0, 0, 1000 * ms, 500, 1, 'a');
  b.h.requests[a].extra_replies = 1;
  const auto k = b.grant(2, 1, 1000 * ms, 500, 2, 'c', true);
  b.h.requests[k].lost_before_ok = true;
  b.h.requests[k].lost = 900 * ms;
  b.waiter(4, 0, 2000 * ms, -1, outcome::pending, 100); // connection 4 stays open
  const auto found = check_contract(b.h);
  CHECK(found.size() == 3);

  b.h.connections[4].ended = 2050 * ms; // the connection ended: no reply is owed
  CHECK(check_contract(b.h).size() == 2);
}

TEST_CASE("contract: an UNLOCK of a held lock answers OK when nothing was faulty", "[sim]") {
  builder b;
  const auto lock = b.grant(0, 0, 1000 * ms, 500, 1, 'a');
  b.follow(client_op::unlock, lock, 1100 * ms, 1101 * ms, outcome::notheld);
  CHECK(check_contract(b.h).size() == 1);

  b.h.faults.push_back({fault_kind::partition, 0, 1, 1050 * ms, 1200 * ms, 0, false});
  CHECK(check_contract(b.h).empty()); // a named fault explains it
  b.h.faults.clear();
  b.h.healthy = {{0, 1050 * ms}, {1150 * ms, b.h.end}};
  CHECK(check_contract(b.h).empty()); // and so does a time that was not healthy
}

TEST_CASE("liveness: a waiter on a free resource, all healthy, fails", "[sim]") {
  builder b;
  const auto lock = b.grant(0, 0, 10'000 * ms, 500, 1, 'a');
  b.follow(client_op::unlock, lock, 10'100 * ms, 10'101 * ms, outcome::ok);
  // Waiting since 10.05 s, answered BUSY at 12 s: the resource was free from 10.101 s on.
  b.waiter(1, 0, 10'050 * ms, 12'000 * ms, outcome::busy, 1950);
  CHECK(has(check_liveness(b.h), "liveness"));

  builder c;
  const auto held = c.grant(0, 0, 10'000 * ms, 500, 1, 'a');
  c.follow(client_op::unlock, held, 10'100 * ms, 10'101 * ms, outcome::ok);
  c.waiter(1, 0, 10'050 * ms, 10'110 * ms, outcome::ok, 1950, 2); // granted at once
  CHECK(check_liveness(c.h).empty());
}

TEST_CASE("liveness: a daemon's head waiter passed over again and again fails", "[sim]") {
  builder b;
  // Client 1 (daemon 1) waits from 10 s to 18 s; clients 0 and 2 (daemon 0) pass the lock back
  // and forth, each grant to a newer waiter.
  b.waiter(1, 0, 10'000 * ms, 18'000 * ms, outcome::busy, 8'000);
  for (int i = 0; i < 20; ++i) {
    const sim_time at = 10'100 * ms + i * 400 * ms;
    b.waiter(static_cast<std::uint32_t>(i % 2 == 0 ? 0 : 2), 0, at - 50 * ms, at, outcome::ok, 1000,
             static_cast<std::uint64_t>(i + 1));
  }
  const auto found = check_liveness(b.h);
  REQUIRE(has(found, "liveness"));

  liveness_bounds generous;
  generous.passed_over = 25;
  CHECK(check_liveness(b.h, generous).empty());
}

TEST_CASE("bounded work: script calls far beyond what the requests account for fail", "[sim]") {
  builder b;
  b.waiter(1, 0, 10'000 * ms, 11'000 * ms, outcome::busy, 1000);
  b.h.work.push_back({0, 10, 400}); // within one waiter's second
  CHECK(check_bounded_work(b.h).empty());
  b.h.work.push_back({0, 10, 20'000}); // a wake-up loop
  CHECK(check_bounded_work(b.h).size() == 1);
}

TEST_CASE("contract: a request is answered within its rounds, after its WAIT", "[sim]") {
  builder b;
  const auto slow = b.waiter(1, 0, 1000 * ms, 3100 * ms, outcome::busy, -1);
  b.h.requests[slow].decided = 3100 * ms; // no WAIT: 2.1 s is far beyond six node timeouts
  CHECK(check_contract(b.h).size() == 1);
  b.h.requests[slow].wait_ms = 2000; // with WAIT 2000 it is on time
  CHECK(check_contract(b.h).empty());
}

TEST_CASE("contract: one daemon serves its waiters first come, first served", "[sim]") {
  builder b;
  const auto first = b.waiter(1, 0, 1000 * ms, 5000 * ms, outcome::busy, 4000);
  const auto second = b.waiter(3, 0, 1100 * ms, 1200 * ms, outcome::ok, 4000, 7);
  b.h.requests[first].decided = 5000 * ms;
  b.h.requests[second].decided = 1200 * ms;
  // Clients 1 and 3 are both on daemon 1: the later waiter went first.
  const auto found = check_contract(b.h);
  REQUIRE(found.size() == 1);
  CHECK(found[0].at == 1200 * ms);

  b.h.requests[first].daemon_instance = 0; // on different daemons, their order is not promised
  CHECK(check_contract(b.h).empty());
}

TEST_CASE("mutual exclusion: the lost key may be the one of the grant answered last", "[sim]") {
  builder b;
  // Request a won its quorum (with master 2) before master 2 was emptied, but its OK came after
  // request b, which master 2 then granted.
  const auto a = b.grant(0, 0, 3000 * ms, 500, 1, 'a');
  b.h.requests[a].attempt_start = 1000 * ms;
  b.grant(1, 0, 2500 * ms, 600, 2, 'b'); // held until 3100 ms: a's OK at 3000 ms overlaps it
  data_loss loss;
  loss.master = 2;
  loss.at = 2000 * ms;
  loss.locks.emplace_back(0, owner('a'));
  b.h.losses.push_back(loss);
  CHECK(check_mutual_exclusion(b.h).empty());
  b.h.losses.clear();
  CHECK(check_mutual_exclusion(b.h).size() == 1);
}
