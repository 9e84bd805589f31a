// The simulator's checkers: pure functions of a recorded history (history.hpp), so that each can
// be tested on a hand-made history (tests/unit/sim). What each promises and why is in
// tests/sim/README.md.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "history.hpp"

namespace redlockd::sim {

struct violation {
  std::string checker; // mutual-exclusion, fences, resurrection, contract, liveness, work
  std::uint32_t resource = none;
  sim_time at = 0;
  std::string what;
};

// A client's hold of a resource, from its OK to when it can no longer count on it: a lease
// until reply + validity (pushed on by each EXTEND OK), a KEEP lock until LOST or its
// connection ended; both cut by the holder's UNLOCK.
struct hold {
  std::uint32_t request = 0; // the granted LOCK
  std::uint32_t resource = 0;
  hold_kind kind = hold_kind::exclusive;
  sim_time begin = 0;
  sim_time end = 0;
};
std::vector<hold> holds_of(const history& h);

// Whether `next` may be held beside `active` (all holds of the same resource open when it
// begins). The lock family adds its kinds' bounds here: shared beside shared, at most n permits.
bool admitted(std::span<const hold* const> active, const hold& next);

// 1. Mutual exclusion: no hold begins while holds it may not share the resource with are open,
// unless a data loss the granting daemon had not been told of explains it.
std::vector<violation> check_mutual_exclusion(const history& h);
// 2. Fences: a grant whose request was invoked after another grant's OK carries a larger token.
std::vector<violation> check_fences(const history& h);
// 3. No resurrection: an EXTEND invoked after its lock's hold ended, with another grant of the
// resource in between, is never OK.
std::vector<violation> check_no_resurrection(const history& h);
// 4. Contract: one reply per request (none missing on a connection that stayed open), each
// decided within its rounds (after its WAIT), LOST never before its OK, an UNLOCK of a held
// lock answers OK when nothing was faulty, and one daemon's waiters are served in order.
std::vector<violation> check_contract(const history& h);

struct liveness_bounds {
  sim_time free_with_waiter = 300'000; // a resource free this long while a waiter waits
  std::uint32_t passed_over = 8;       // grants to newer waiters while one is a daemon's head
};
// 5. Liveness, while everything is healthy (and has been for the longest TTL): a waiter is not
// left waiting on a free resource, and a daemon's head waiter is not passed over without bound.
std::vector<violation> check_liveness(const history& h, const liveness_bounds& bounds = {});

// 6. Bounded work: script calls on a resource's keys over any ten seconds stay within what the
// requests on it (and its waiters' and KEEP locks' time) can account for.
std::vector<violation> check_bounded_work(const history& h);

// Every checker above.
std::vector<violation> check_all(const history& h);

// A grant's key on the masters outlives the validity it was given by at most this: the drift
// allowance, rounding, and the drift the simulator gives clocks.
sim_time drift_allowance(const history& h, std::uint64_t ttl_ms);

} // namespace redlockd::sim
