// Key-loss detection (PROTOCOL.md, quarantined:keyloss): a master that granted a lock, or its
// last renewal, says the key is gone while the lock is still valid, and another master still
// held it for the same owner (so it was not released elsewhere): the master lost a live key
// without restarting (eviction, FLUSHALL, a clock jump). Judged the same way wherever this
// daemon releases, extends or renews a lock it granted. No I/O.
#pragma once

#include "redlockd/lock/engine_io.hpp"

#include <cstddef>
#include <cstdint>

namespace redlockd {

// What an operation on a lock knows for this. lock: the masters that granted. unlock, extend,
// renew and the release of a granted lock nobody waits for: the masters that granted the lock
// this daemon gave for (key, owner), while it is valid (until expect_until), and the masters
// that answered that the key is gone.
struct lease_watch {
  bool drain = false; // after the reply, collect the other masters' answers (phase draining)
  std::uint32_t granted = 0;
  std::uint32_t expect_held = 0;
  clock_type::time_point expect_until{};
  std::uint32_t missing = 0;
};

// A lock known to be held on the masters `held` until `until`.
inline lease_watch expecting(std::uint32_t held, clock_type::time_point until) {
  lease_watch watch;
  watch.expect_held = held;
  watch.expect_until = until;
  return watch;
}

// The masters judged to have lost the key now, given how many masters answered that they still
// held it (`held_elsewhere`); they leave `watch.missing`, so each is judged once.
std::uint32_t lost_keys(lease_watch& watch, std::size_t held_elsewhere, clock_type::time_point now);

} // namespace redlockd
