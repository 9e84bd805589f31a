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
  // Client 3 (daemon 1) waits for resource 0 from 10.05 s to 14 s while daemon 0's clients 0 and
  // 2 pass it on every 300 ms, each grant to a newer waiter.
  void waiter_passed_on_daemon_0() {
    waiter(3, 0, 10'050 * ms, 14'000 * ms, outcome::busy, 3'950);
    for (int i = 0; i < 12; ++i) {
      const sim_time at = 10'100 * ms + i * 300 * ms;
      waiter(static_cast<std::uint32_t>(i % 2 == 0 ? 0 : 2), 0, at - 50 * ms, at, outcome::ok, 1000,
             static_cast<std::uint64_t>(i + 2));
    }
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

TEST_CASE("liveness: a head held back by its own daemon's lock-delay is not passed over, "
          "another daemon's delay excuses nothing",
          "[sim]") {
  // Client 1 (daemon 1) got a lease at 9 s (TTL 1 s) and never released it through daemon 1:
  // daemon 1 refuses the name until 10 s + lock-delay (5 s) whoever unlocks it elsewhere.
  // Client 3 (daemon 1) waits from 10.05 s to 14 s while daemon 0's clients pass the lock on.
  const auto history_with = [](std::uint32_t lease_client) {
    builder b;
    b.h.lock_delay_ms = 5'000;
    const auto lease = b.grant(lease_client, 0, 9'000 * ms, 950, 1, 'a');
    b.follow(client_op::unlock, lease, 10'020 * ms, 10'021 * ms, outcome::notheld);
    b.waiter_passed_on_daemon_0();
    return b.h;
  };
  CHECK(check_liveness(history_with(1)).empty());          // daemon 1's own lease: its delay
  CHECK(has(check_liveness(history_with(0)), "liveness")); // daemon 0's lease: no excuse

  // The lease released through daemon 1 before its end: nothing delays the name there.
  history h = history_with(1);
  h.requests[1].invoke = 9'500 * ms;
  h.requests[1].reply = 9'501 * ms;
  h.requests[1].result = outcome::ok;
  CHECK(has(check_liveness(h), "liveness"));
}

TEST_CASE("liveness: a KEEP lock whose connection ended or that was LOST lock-delays the name on "
          "its own daemon only",
          "[sim]") {
  // Client 1 (daemon 1) holds a KEEP lock from 9 s; at 10 s its connection ends (or a LOST
  // comes) while it holds it: daemon 1 refuses the name for lock-delay (5 s). Client 3 (daemon 1)
  // waits from 10.05 s to 14 s while daemon 0's clients pass the lock on (seed 161497).
  const auto history_with = [](std::uint32_t keep_client, bool lost) {
    builder b;
    b.h.lock_delay_ms = 5'000;
    const auto keep = b.grant(keep_client, 0, 9'000 * ms, 950, 1, 'a', true);
    if (lost)
      b.h.requests[keep].lost = 10'000 * ms;
    else
      b.h.requests[keep].connection_ended = 10'000 * ms;
    b.waiter_passed_on_daemon_0();
    return b.h;
  };
  CHECK(check_liveness(history_with(1, false)).empty()); // daemon 1's own KEEP lock: its delay
  CHECK(check_liveness(history_with(1, true)).empty());
  CHECK(has(check_liveness(history_with(0, false)), "liveness")); // daemon 0's: no excuse
  // Still held at the end of the run (neither ended nor lost): nothing delays the name.
  history h = history_with(1, false);
  h.requests[0].connection_ended = -1;
  CHECK(has(check_liveness(h), "liveness"));
}

TEST_CASE("liveness: a grant written too late lock-delays the name on its own daemon as a lease "
          "that ran out does, unless it was KEEP",
          "[sim]") {
  // Client 1 (daemon 1) was granted at 9 s (TTL 1 s), but its OK waited behind an earlier reply
  // and was written after its validity: the client read NOQUORUM. To daemon 1 it was a lease
  // that ran out unreleased, so it refuses the name until 10 s + lock-delay (5 s) (seed
  // 8000934). A KEEP one is released when the session finds it expired, with no delay.
  const auto history_with = [](std::uint32_t client, bool keep) {
    builder b;
    b.h.lock_delay_ms = 5'000;
    const auto late = b.grant(client, 0, 9'000 * ms, 950, 1, 'a', keep);
    b.h.requests[late].reply = 10'500 * ms;
    b.h.requests[late].result = outcome::noquorum;
    b.h.requests[late].validity_ms = 0;
    b.h.requests[late].fence = 0;
    b.waiter_passed_on_daemon_0();
    return b.h;
  };
  CHECK(check_liveness(history_with(1, false)).empty());
  CHECK(has(check_liveness(history_with(0, false)), "liveness")); // daemon 0's: no excuse
  CHECK(has(check_liveness(history_with(1, true)), "liveness"));  // KEEP: released, undelayed
}

TEST_CASE("liveness: a waiter the engine answered at once is not waiting, though its line never "
          "came (seed 9501211)",
          "[sim]") {
  // Client 1 pipelines a LOCK ... WAIT behind a request whose answer never comes (its daemon
  // crashed): the engine refused it at once (an ERR), the line sat behind the other.
  builder b;
  const auto w = b.waiter(1, 0, 10'000 * ms, 10'000 * ms, outcome::pending, 2'000);
  b.h.requests[w].reply = -1;
  CHECK(has(check_liveness(b.h), "liveness")); // as if it waited 2 s on a free lock
  b.h.requests[w].decided = 10'000 * ms;
  CHECK(check_liveness(b.h).empty());
}

TEST_CASE("liveness: a KEEP grant its client never saw holds the lock until its connection "
          "ended, not for its first TTL only (seed 9502776)",
          "[sim]") {
  // Client 0 (daemon 0) was granted a KEEP lock at 10 s behind an earlier WAIT of its own; the
  // daemon renewed it until 12 s, when its connection ended unseen. Client 1 (daemon 1) waits
  // from 10.5 s to 12.5 s.
  const auto history_with = [](bool keep) {
    builder b;
    const auto unseen = b.grant(0, 0, 10'000 * ms, 950, 1, 'a', keep);
    b.h.requests[unseen].result = outcome::pending;
    b.h.requests[unseen].reply = -1;
    b.h.requests[unseen].validity_ms = 0;
    b.h.requests[unseen].fence = 0;
    b.h.connections[0].ended = 12'000 * ms;
    b.waiter(1, 0, 10'500 * ms, 12'500 * ms, outcome::busy, 2'000);
    return b.h;
  };
  CHECK(check_liveness(history_with(true)).empty());
  CHECK(has(check_liveness(history_with(false)), "liveness")); // a lease: free from about 11 s
}

TEST_CASE("bounded work: script calls far beyond what the requests account for fail", "[sim]") {
  builder b;
  b.waiter(1, 0, 10'000 * ms, 11'000 * ms, outcome::busy, 1000);
  b.h.work.push_back({0, 10, 400}); // within one waiter's second
  CHECK(check_bounded_work(b.h).empty());
  b.h.work.push_back({0, 10, 20'000}); // a wake-up loop
  CHECK(check_bounded_work(b.h).size() == 1);
}

TEST_CASE("bounded work: a waiter that leaves without the lock may unmark its daemon's entry on "
          "every master",
          "[sim]") {
  builder b;
  // 100 waiters of 5 ms in second 10, each refused: 11 seconds' base (1,100 calls), a round and
  // a cleanup three times over per request (3,000), 5 ms of retries each (300), and an unmark on
  // each of the 5 masters when each leaves (500): 4,900 (seed 160762's kind of workload).
  for (std::uint32_t i = 0; i < 100; ++i)
    b.waiter(i % 8, 0, 10'000 * ms + i * ms, 10'005 * ms + i * ms, outcome::busy, 5);
  b.h.work.push_back({0, 10, 4600});
  CHECK(check_bounded_work(b.h).empty());
  b.h.work.push_back({0, 10, 400}); // 5,000
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

// ---------------------------------------------------------------------------------------------
// The lock family: shared holds, permits (the semaphore is resource 2 here), sets.

namespace {

constexpr std::uint32_t semaphore = 2;

// A tagged owner as the engine writes them: "0000", the kind, a permit's slot, then `c`s.
owner_id tagged(hold_kind kind, std::uint32_t slot, char c) {
  owner_id o = owner(c);
  const char* hex = "0123456789abcdef";
  o[0] = o[1] = o[2] = o[3] = '0';
  o[4] = hex[static_cast<std::size_t>(kind)];
  o[5] = hex[slot >> 8 & 0xf];
  o[6] = hex[slot >> 4 & 0xf];
  o[7] = hex[slot & 0xf];
  return o;
}

struct family_builder : builder {
  family_builder() {
    h.resources.push_back("pool"); // a semaphore of 2
    h.permits = {0, 0, 2};
  }
  std::uint32_t shared(std::uint32_t client, std::uint32_t resource, sim_time ok,
                       std::int64_t validity, std::uint64_t fence, char who) {
    const auto i = grant(client, resource, ok, validity, fence, who);
    h.requests[i].hold = hold_kind::shared;
    h.requests[i].owner = tagged(hold_kind::shared, 0, who);
    return i;
  }
  std::uint32_t permit(std::uint32_t client, sim_time ok, std::int64_t validity,
                       std::uint64_t fence, std::uint32_t slot, char who, std::uint32_t n = 2) {
    const auto i = grant(client, semaphore, ok, validity, fence, who);
    h.requests[i].hold = hold_kind::permit;
    h.requests[i].permits = n;
    h.requests[i].owner = tagged(hold_kind::permit, slot, who);
    return i;
  }
  // MLOCK of resources 0 and 1 (named b, a).
  std::uint32_t set(std::uint32_t client, sim_time ok, std::int64_t validity, std::uint64_t fence,
                    char who) {
    const auto i = grant(client, 1, ok, validity, fence, who);
    request_record& r = h.requests[i];
    r.hold = hold_kind::multi;
    r.owner = tagged(hold_kind::multi, 0, who);
    r.members = {1, 0, 0, 0};
    r.member_count = 2;
    return i;
  }
};

} // namespace

TEST_CASE("mutual exclusion: two readers share, a writer and a reader do not", "[sim]") {
  family_builder b;
  b.shared(0, 0, 1000 * ms, 500, 1, 'a');
  b.shared(1, 0, 1200 * ms, 500, 2, 'b'); // beside the first reader
  CHECK(check_mutual_exclusion(b.h).empty());

  b.grant(2, 0, 1400 * ms, 100, 3, 'c'); // a writer among readers
  CHECK(check_mutual_exclusion(b.h).size() == 2);

  family_builder c;
  c.grant(0, 0, 1000 * ms, 500, 1, 'a');
  c.shared(1, 0, 1200 * ms, 500, 2, 'b'); // a reader while a writer holds
  REQUIRE(check_mutual_exclusion(c.h).size() == 1);
  CHECK(check_mutual_exclusion(c.h)[0].at == 1200 * ms);
}

TEST_CASE("mutual exclusion: at most n permits, one per slot, all of the same n", "[sim]") {
  family_builder b;
  b.permit(0, 1000 * ms, 500, 1, 0, 'a');
  b.permit(1, 1100 * ms, 500, 2, 1, 'b'); // two of two
  b.grant(3, 0, 1100 * ms, 500, 3, 'd');  // a lock of another name never counts
  CHECK(check_mutual_exclusion(b.h).empty());

  b.permit(2, 1200 * ms, 500, 4, 2, 'c'); // a third, on a slot past n
  CHECK(check_mutual_exclusion(b.h).size() == 2);

  family_builder same;
  same.permit(0, 1000 * ms, 500, 1, 1, 'a');
  same.permit(1, 1100 * ms, 500, 2, 1, 'b'); // two holders of slot 1
  CHECK(check_mutual_exclusion(same.h).size() == 1);

  family_builder wrong;
  wrong.permit(0, 1000 * ms, 500, 1, 0, 'a');
  wrong.permit(1, 1100 * ms, 500, 2, 1, 'b', 3); // granted with another n: the bound is gone
  CHECK(check_mutual_exclusion(wrong.h).size() == 1);

  family_builder after;
  after.permit(0, 1000 * ms, 500, 1, 0, 'a');
  after.permit(1, 1100 * ms, 500, 2, 1, 'b');
  after.permit(2, 1500 * ms, 500, 3, 0, 'c'); // the first's slot, once it ended
  CHECK(check_mutual_exclusion(after.h).empty());
}

TEST_CASE("mutual exclusion: a free slot granted beside two holders of one slot that a data loss "
          "excuses is no third holder",
          "[sim]") {
  // Seed 110179: a's slot 0 was lost on master 2 and b, through a daemon not told, took slot 0
  // too (excused); c then took slot 1, free since its holder's UNLOCK. Three holders of a
  // semaphore of 2, but only because of the loss.
  family_builder b;
  b.permit(0, 1000 * ms, 5000, 1, 0, 'a');
  b.permit(1, 3000 * ms, 2000, 2, 0, 'b');
  b.permit(3, 3500 * ms, 500, 3, 1, 'c');
  data_loss loss;
  loss.master = 2;
  loss.at = 2000 * ms;
  loss.locks.emplace_back(semaphore, tagged(hold_kind::permit, 0, 'a'));
  b.h.losses.push_back(loss);
  CHECK(check_mutual_exclusion(b.h).empty());
  b.h.losses.clear(); // without the loss, b is a second holder of slot 0: that one report only
  const auto found = check_mutual_exclusion(b.h);
  REQUIRE(found.size() == 1);
  CHECK(found[0].at == 3000 * ms);
}

TEST_CASE("mutual exclusion: a set holds each member exclusively until MUNLOCK names it", "[sim]") {
  family_builder b;
  b.set(0, 1000 * ms, 500, 1, 'a');
  b.grant(1, 0, 1200 * ms, 500, 2, 'b');  // a lock on a member
  b.shared(2, 1, 1300 * ms, 500, 3, 'c'); // a reader of the other
  const auto found = check_mutual_exclusion(b.h);
  REQUIRE(found.size() == 2);
  CHECK(found[0].resource == 0);
  CHECK(found[1].resource == 1);

  family_builder c;
  const auto held = c.set(0, 1000 * ms, 5000, 1, 'a');
  // UNLOCK of member 0 with the set's owner, then MUNLOCK of the rest.
  const auto one = c.follow(client_op::unlock, held, 1100 * ms, 1101 * ms, outcome::ok);
  c.h.requests[one].member_count = 0;
  c.h.requests[one].resource = 0;
  c.grant(1, 0, 1200 * ms, 500, 2, 'b'); // member 0 is free
  c.grant(2, 1, 1300 * ms, 500, 3, 'c'); // member 1 is not
  CHECK(check_mutual_exclusion(c.h).size() == 1);
  const auto rest = c.follow(client_op::unlock, held, 1250 * ms, 1251 * ms, outcome::ok);
  c.h.requests[rest].members = {1, 0, 0, 0};
  c.h.requests[rest].member_count = 1;
  CHECK(check_mutual_exclusion(c.h).empty());
}

TEST_CASE("mutual exclusion: a lost reader member excuses its writer until told", "[sim]") {
  family_builder b;
  b.shared(0, 0, 1000 * ms, 5000, 1, 'a');
  const auto writer = b.grant(1, 0, 3000 * ms, 500, 2, 'b');
  data_loss loss;
  loss.master = 2;
  loss.at = 2000 * ms;
  loss.locks.emplace_back(0, tagged(hold_kind::shared, 0, 'a'));
  b.h.losses.push_back(loss);
  CHECK(check_mutual_exclusion(b.h).empty());
  b.h.evidence.push_back({b.h.requests[writer].daemon_instance, 2, 2500 * ms});
  CHECK(check_mutual_exclusion(b.h).size() == 1);
}

TEST_CASE("no resurrection: by kind, only a grant the extended hold excludes counts", "[sim]") {
  family_builder b;
  const auto reader = b.shared(0, 0, 1000 * ms, 500, 1, 'a');
  b.shared(1, 0, 1600 * ms, 100, 2, 'b'); // another reader in the gap proves nothing
  b.follow(client_op::extend, reader, 1800 * ms, 1801 * ms, outcome::ok, 500);
  CHECK(check_no_resurrection(b.h).empty());
  b.grant(2, 0, 1700 * ms, 50, 3, 'c'); // a writer in the gap: the reader's entry was gone
  CHECK(check_no_resurrection(b.h).size() == 1);

  family_builder c;
  const auto set = c.set(0, 1000 * ms, 500, 1, 'a');
  c.grant(1, 0, 1600 * ms, 100, 2, 'b'); // a lock of a member in the gap
  const auto extend = c.follow(client_op::extend, set, 1800 * ms, 1801 * ms, outcome::ok, 500);
  c.h.requests[extend].members = {0, 1, 0, 0}; // MEXTEND 2 a b
  CHECK(check_no_resurrection(c.h).size() == 1);
}

TEST_CASE("contract: PERMITS with the wrong n is refused PERMITS_MISMATCH, the right n never",
          "[sim]") {
  family_builder b;
  b.permit(0, 1000 * ms, 900, 1, 0, 'a');
  const auto wrong = b.waiter(0, semaphore, 1100 * ms, 1102 * ms, outcome::busy, -1);
  b.h.requests[wrong].hold = hold_kind::permit;
  b.h.requests[wrong].permits = 3;
  b.h.requests[wrong].decided = 1102 * ms;
  CHECK(check_contract(b.h).size() == 1); // its client held a permit: n was in force
  b.h.requests[wrong].result = outcome::permits_mismatch;
  CHECK(check_contract(b.h).empty());

  const auto right = b.waiter(1, semaphore, 1500 * ms, 1502 * ms, outcome::permits_mismatch, -1);
  b.h.requests[right].hold = hold_kind::permit;
  b.h.requests[right].permits = 2;
  CHECK(check_contract(b.h).empty()); // the wrong request's 'pool permits' may still live
  b.h.requests[right].invoke = 9000 * ms;
  b.h.requests[right].reply = 9002 * ms;
  CHECK(check_contract(b.h).size() == 1); // long after: n was changed
}

TEST_CASE("liveness: readers do not keep a reader waiting, a writer's wait is what readers "
          "pass",
          "[sim]") {
  family_builder b;
  b.shared(0, 0, 10'000 * ms, 2000, 1, 'a');
  const auto reader = b.waiter(1, 0, 10'100 * ms, 11'500 * ms, outcome::busy, 1400);
  b.h.requests[reader].hold = hold_kind::shared;
  CHECK(has(check_liveness(b.h), "liveness")); // only another reader held it
  b.h.requests[reader].hold = hold_kind::exclusive;
  CHECK(check_liveness(b.h).empty()); // a writer waits for the reader

  // The writer at 20 s is passed by forty readers that came after it, until it gives up.
  family_builder c;
  c.waiter(1, 0, 20'000 * ms, 28'000 * ms, outcome::busy, 8'000);
  for (int i = 0; i < 40; ++i)
    c.shared(static_cast<std::uint32_t>(i % 2 == 0 ? 0 : 2), 0, 20'100 * ms + i * 200 * ms, 300,
             static_cast<std::uint64_t>(i + 1), 'r');
  CHECK(has(check_liveness(c.h), "liveness"));
  liveness_bounds lenient;
  lenient.passed_by_readers = 50;
  CHECK(check_liveness(c.h, lenient).empty());
}

TEST_CASE("liveness: a set's head waiter passed over again and again fails too", "[sim]") {
  // Sets were left out of this check while they left no wait marks (until 447b206).
  family_builder b;
  const auto as_set = [&](std::uint32_t i) {
    request_record& r = b.h.requests[i];
    r.resource = 1;
    r.hold = hold_kind::multi;
    r.members = {1, 0, 0, 0};
    r.member_count = 2;
    r.owner = tagged(hold_kind::multi, 0, static_cast<char>('k' + i % 10));
  };
  as_set(b.waiter(1, 1, 10'000 * ms, 18'000 * ms, outcome::busy, 8'000));
  for (int i = 0; i < 20; ++i) {
    const sim_time at = 10'100 * ms + i * 400 * ms;
    as_set(b.waiter(static_cast<std::uint32_t>(i % 2 == 0 ? 0 : 2), 1, at - 50 * ms, at,
                    outcome::ok, 1000, static_cast<std::uint64_t>(i + 1)));
  }
  REQUIRE(has(check_liveness(b.h), "liveness"));
  // Passed over, not some other rule: with 25 grants allowed it passes.
  liveness_bounds generous;
  generous.passed_over = 25;
  CHECK(check_liveness(b.h, generous).empty());
}

TEST_CASE("liveness: a permit waiter waits while all n are held, not once one is free", "[sim]") {
  family_builder b;
  b.permit(0, 10'000 * ms, 3000, 1, 0, 'a');
  b.permit(2, 10'000 * ms, 1000, 2, 1, 'b'); // slot 1 is free from about 11 s
  const auto waiter = b.waiter(1, semaphore, 10'100 * ms, 12'000 * ms, outcome::busy, 1900);
  b.h.requests[waiter].hold = hold_kind::permit;
  b.h.requests[waiter].permits = 2;
  CHECK(has(check_liveness(b.h), "liveness"));
  b.h.requests[waiter].reply = 11'100 * ms; // it gave up soon after
  CHECK(check_liveness(b.h).empty());
}
