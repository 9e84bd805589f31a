#include "redlockd/lock/keep_locks.hpp"

#include "redlockd/lock/redlock.hpp"

#include <algorithm>

namespace redlockd {

bool keep_locks::reserve(const reply_sink* client, std::uint32_t limit) {
  auto& held = per_client_[client];
  if (held >= limit)
    return false;
  ++held;
  return true;
}

void keep_locks::unreserve(const reply_sink* client) {
  const auto it = per_client_.find(client);
  if (it != per_client_.end() && --it->second == 0)
    per_client_.erase(it);
}

std::uint32_t keep_locks::add(const std::string& key, const owner_id& owner, std::uint64_t ttl_ms,
                              clock_type::time_point valid_until, std::uint32_t granted,
                              std::uint64_t fence, std::shared_ptr<reply_sink> sink,
                              std::uint64_t seq, clock_type::time_point hold_until) {
  // Entries are reused rather than freed: their strings keep their capacity.
  std::uint32_t index = 0;
  if (free_.empty()) {
    index = static_cast<std::uint32_t>(locks_.size());
    locks_.emplace_back();
  } else {
    index = free_.back();
    free_.pop_back();
  }
  keep_lock& k = locks_[index];
  k.active = true;
  k.renewing = false;
  k.key = key;
  k.hold_until = hold_until;
  k.owner = owner;
  k.ttl_ms = ttl_ms;
  k.valid_until = valid_until;
  k.granted = granted;
  k.fence = fence;
  k.sink = std::move(sink);
  k.seq = seq;
  k.kind = lock_kind::exclusive;
  k.permits = 0;
  k.shown.clear();
  k.label.clear();
  by_key_.emplace(k.key, index);
  return index;
}

void keep_locks::rename(std::uint32_t index, std::string key) {
  keep_lock& k = locks_[index];
  const auto [first, last] = by_key_.equal_range(k.key);
  for (auto it = first; it != last; ++it)
    if (it->second == index) {
      by_key_.erase(it);
      break;
    }
  k.key = std::move(key);
  by_key_.emplace(k.key, index);
}

void keep_locks::drop(std::uint32_t index) {
  keep_lock& k = locks_[index];
  if (!k.active)
    return;
  const auto [first, last] = by_key_.equal_range(k.key);
  for (auto it = first; it != last; ++it)
    if (it->second == index) {
      by_key_.erase(it);
      break;
    }
  k.active = false;
  k.renewing = false;
  unreserve(k.sink.get());
  k.sink.reset();
  k.generation = next_generation(k.generation);
  free_.push_back(index);
}

std::optional<std::uint32_t> keep_locks::index_of(const std::string& key,
                                                  const owner_id& owner) const {
  const auto [first, last] = by_key_.equal_range(key);
  for (auto it = first; it != last; ++it)
    if (locks_[it->second].owner == owner)
      return it->second;
  return std::nullopt;
}

std::vector<std::uint32_t> keep_locks::all_of(const std::string& key) const {
  std::vector<std::uint32_t> out;
  const auto [first, last] = by_key_.equal_range(key);
  for (auto it = first; it != last; ++it)
    out.push_back(it->second);
  return out;
}

keep_lock* keep_locks::live(std::uint32_t index, std::uint32_t generation) {
  if (index >= locks_.size() || !locks_[index].active || locks_[index].generation != generation)
    return nullptr;
  return &locks_[index];
}

const keep_lock* keep_locks::live(std::uint32_t index, std::uint32_t generation) const {
  return const_cast<keep_locks*>(this)->live(index, generation);
}

renewal_step judge_renewal(const keep_lock& k, std::int64_t validity_ms, bool refused_by_majority,
                           clock_type::time_point t0, clock_type::time_point now,
                           std::uint32_t node_timeout_ms) {
  if (validity_ms > 0)
    return {renewal_step::kind::renewed, t0 + std::chrono::milliseconds(k.ttl_ms / 3)};
  if (refused_by_majority)
    return {renewal_step::kind::lost}; // the key is gone or someone else's on a majority
  // Too few nodes answered: try again soon, but give up (LOST) while a third of the TTL is still
  // valid, so that the holder has time to stop before the lock can go to someone else.
  const auto retry = std::chrono::milliseconds(std::max<std::uint64_t>(1, k.ttl_ms / 10));
  const auto budget = node_timeout_for(k.ttl_ms, node_timeout_ms);
  const auto reserve = std::chrono::milliseconds(k.ttl_ms / 3);
  if (now + retry + budget + reserve < k.valid_until)
    return {renewal_step::kind::retry, now + retry};
  return {renewal_step::kind::lost};
}

} // namespace redlockd
