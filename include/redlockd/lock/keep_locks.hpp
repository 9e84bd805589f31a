// KEEP: locks bound to a client connection, renewed by the daemon about every TTL/3 while the
// connection lives. This table owns them, their per-connection limit, and the rule that turns a
// renewal round into the next step. No I/O: the engine runs the renewal rounds.
#pragma once

#include "redlockd/lock/engine_io.hpp"
#include "redlockd/lock/lock_kind.hpp"
#include "redlockd/lock/owner.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace redlockd {

struct keep_lock {
  std::uint32_t generation = 1;
  bool active = false;
  bool renewing = false;
  lock_kind kind = lock_kind::exclusive;
  std::uint32_t permits = 0; // a semaphore's n
  std::string key;           // the hold's name (hold_target::name)
  std::string shown;         // the resource LOST names
  owner_id owner{};
  std::uint64_t ttl_ms = 0;
  clock_type::time_point valid_until{};
  std::uint32_t granted = 0; // nodes that granted the acquisition or the last renewal
  std::uint64_t fence = 0;   // its fencing token
  std::shared_ptr<reply_sink> sink;
  std::uint64_t seq = 0; // of the OK that granted it: LOST never goes out before it
  // MAXHOLD / max_hold_ms: no renewal at or after this; time_point::max() when unlimited.
  clock_type::time_point hold_until = clock_type::time_point::max();
  std::string label; // its LABEL ("" if none), for the status page
  hold_target hold() const { return {kind, key, permits}; }
};

// How long a KEEP lock is renewed in all, in ms: the LOCK's MAXHOLD capped by the config's
// max_hold_ms (0 in either: no limit from it); 0 when neither limits it.
inline std::uint64_t hold_limit(std::optional<std::uint64_t> requested, std::uint64_t configured) {
  if (!requested || *requested == 0)
    return configured;
  return configured == 0 ? *requested : std::min(*requested, configured);
}

class keep_locks {
 public:
  // A KEEP request counts against its connection from the request on, so that a burst cannot
  // overshoot the limit; the count passes to the lock if one is granted.
  bool reserve(const reply_sink* client, std::uint32_t limit);
  void unreserve(const reply_sink* client);
  void forget_client(const reply_sink* client) { per_client_.erase(client); }

  // A KEEP acquisition succeeded: the lock, with the count its request reserved. Its key, kind
  // and the rest of its description are the caller's to fill in at the index returned.
  std::uint32_t add(const std::string& key, const owner_id& owner, std::uint64_t ttl_ms,
                    clock_type::time_point valid_until, std::uint32_t granted, std::uint64_t fence,
                    std::shared_ptr<reply_sink> sink, std::uint64_t seq,
                    clock_type::time_point hold_until = clock_type::time_point::max());
  // Ends it (UNLOCK, LOST, the client gone): its count is given back.
  void drop(std::uint32_t index);
  // Names its hold anew (a KEEP set whose client released some of its members renews the rest).
  void rename(std::uint32_t index, std::string key);

  std::optional<std::uint32_t> index_of(const std::string& key, const owner_id& owner) const;
  // The KEEP locks on `key`, whoever holds them (BREAK): several for shared holds and permits.
  std::vector<std::uint32_t> all_of(const std::string& key) const;
  keep_lock* find(const std::string& key, const owner_id& owner) {
    const auto index = index_of(key, owner);
    return index ? &locks_[*index] : nullptr;
  }
  // The lock at `index` if it is still the one of `generation`.
  keep_lock* live(std::uint32_t index, std::uint32_t generation);
  const keep_lock* live(std::uint32_t index, std::uint32_t generation) const;
  keep_lock& at(std::uint32_t index) { return locks_[index]; }
  std::uint32_t slots() const { return static_cast<std::uint32_t>(locks_.size()); }
  std::size_t size() const { return locks_.size() - free_.size(); }
  // Calls f(lock) for every KEEP lock held, read-only.
  template <typename F>
  void for_each(F&& f) const {
    for (const keep_lock& k : locks_)
      if (k.active)
        f(k);
  }

 private:
  std::vector<keep_lock> locks_;
  std::vector<std::uint32_t> free_;
  std::unordered_multimap<std::string, std::uint32_t> by_key_;
  // KEEP locks and KEEP acquisitions in flight per client, for max_keep_locks_per_connection.
  std::unordered_map<const reply_sink*, std::uint32_t> per_client_;
};

// What a finished renewal round means for its KEEP lock.
struct renewal_step {
  enum class kind : std::uint8_t { renewed, lost, retry };
  kind what;
  clock_type::time_point next{}; // renewed: the next renewal; retry: the next attempt
};

// `validity_ms` is what a quorum granted (<= 0: no quorum in time); the round started at `t0`.
renewal_step judge_renewal(const keep_lock& k, std::int64_t validity_ms, bool refused_by_majority,
                           clock_type::time_point t0, clock_type::time_point now,
                           std::uint32_t node_timeout_ms);

} // namespace redlockd
