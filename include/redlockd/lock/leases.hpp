// Plain (non-KEEP) leases this daemon granted, and lock-delay. A lease remembers which masters
// granted it, so that a master that later says its key is gone can be caught; a lease that ran
// out without an UNLOCK, or a KEEP lock that was lost, keeps its resource refused for
// lock_delay_ms (per daemon). No I/O.
#pragma once

#include "redlockd/lock/engine_io.hpp"
#include "redlockd/lock/lock_kind.hpp"
#include "redlockd/lock/owner.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace redlockd {

struct lease {
  owner_id owner{};
  clock_type::time_point expires{};     // its TTL on the masters
  clock_type::time_point valid_until{}; // the validity given to the client
  std::uint32_t granted = 0;            // masters that granted it
  std::uint64_t fence = 0;              // its fencing token
  std::string label{};                  // its LABEL ("" if none), for the status page
  lock_kind kind = lock_kind::exclusive;
};

class lease_table {
 public:
  using now_function = std::function<clock_type::time_point()>;
  lease_table(std::uint32_t lock_delay_ms, const now_function& now)
      : delay_(lock_delay_ms), now_(now) {}

  // A hold may have several leases at once (shared holders, permits of one semaphore), each
  // its own owner's.
  void grant(const std::string& key, const lease& granted);
  // The lease on `key` if `owner` holds it.
  lease* find(const std::string& key, const owner_id& owner);
  void release(const std::string& key, const owner_id& owner);
  // The set lease of `owner` that holds every one of `members` (some of a set, named in any
  // order), and the key it is kept under. Looked through: there is no index by owner.
  lease* find_set(const owner_id& owner, const std::vector<std::string_view>& members,
                  std::string* key = nullptr);
  // Some members of a set released: its lease goes on under the rest (or ends with the last).
  void release_members(const owner_id& owner, const std::vector<std::string_view>& members);
  // The leases on `key` ended whoever held them (BREAK).
  void forget(const std::string& key) { leases_.erase(key); }

  // The resource's holder lost it without an UNLOCK: refuse it for lock_delay_ms (a set: each
  // of its resources too).
  void delay(const std::string& key);
  // Until when `key` is refused, if it is; a lease that ran out unreleased starts a delay.
  std::optional<clock_type::time_point> delayed_until(const std::string& key);

  // Calls f(key, lease) for every lease still remembered (some may have run out), read-only.
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& [key, held] : leases_)
      for (const lease& one : held)
        f(key, one);
  }

 private:
  void sweep();
  void delay_until(const std::string& key, clock_type::time_point until);

  std::chrono::milliseconds delay_;
  const now_function& now_;
  std::unordered_map<std::string, std::vector<lease>> leases_;
  std::unordered_map<std::string, clock_type::time_point> delays_;
  std::size_t sweep_at_ = 1024; // sweep expired entries when the tables grow past this
};

} // namespace redlockd
