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
// connection ended; both cut by the holder's UNLOCK. A set holds each member: one hold per
// member, cut by the MUNLOCK (or UNLOCK) that names it.
struct hold {
  std::uint32_t request = 0; // the granted LOCK
  std::uint32_t resource = 0;
  hold_kind kind = hold_kind::exclusive;
  sim_time begin = 0;
  sim_time end = 0;
  std::uint32_t slot = 0;    // a permit's slot (its owner's characters 6 to 8)
  std::uint32_t permits = 0; // a permit's n, as its LOCK named it
};
std::vector<hold> holds_of(const history& h);

// Whether two holds of one resource may not overlap: an exclusive hold (a set's member is one)
// excludes every other hold; shared holds exclude only exclusive ones; two permits exclude each
// other on the same slot.
bool exclude_each_other(const hold& a, const hold& b);
// The holds of `active` (all open on the resource when `next` begins) that `next` may not begin
// beside: those that exclude it, and for a permit every other permit once n are open, or when
// it names a slot past n or another n than theirs (the bound is then not n).
std::vector<const hold*> conflicts(std::span<const hold* const> active, const hold& next);

// 1. Mutual exclusion: no hold begins while holds it may not share the resource with are open
// (conflicts()), unless a data loss the granting daemon had not been told of explains it.
std::vector<violation> check_mutual_exclusion(const history& h);
// 2. Fences: a grant whose request was invoked after another grant's OK carries a larger token.
std::vector<violation> check_fences(const history& h);
// 3. No resurrection: an EXTEND (MEXTEND) invoked after its hold ended, with a grant in between
// that the hold excludes, is never OK.
std::vector<violation> check_no_resurrection(const history& h);
// 4. Contract: one reply per request (none missing on a connection that stayed open), each
// decided within its rounds (after its WAIT), LOST never before its OK, an UNLOCK (MUNLOCK) of a
// held lock answers OK when nothing was faulty, one daemon's waiters are served in order (per
// queue), a PERMITS request with the wrong n is refused PERMITS_MISMATCH while its client holds
// a permit and nothing was faulty, and one with the right n never is but for a wrong request's
// trace.
std::vector<violation> check_contract(const history& h);

struct liveness_bounds {
  sim_time free_with_waiter = 300'000;  // a resource free this long while a waiter waits
  std::uint32_t passed_over = 8;        // grants to newer waiters while one is a daemon's head
  std::uint32_t passed_by_readers = 32; // shared grants to newer plain requests, past a writer
};
// 5. Liveness, while everything is healthy (and has been for the longest TTL): a waiter that
// heads its daemon's queue is not left waiting on what is free for its kind, and is not passed
// over without bound by newer waiters of its queue (a writer: nor by newer shared holds).
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
