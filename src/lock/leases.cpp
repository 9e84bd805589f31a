#include "redlockd/lock/leases.hpp"

#include <algorithm>

namespace redlockd {

void lease_table::grant(const std::string& key, const lease& granted) {
  leases_[key] = granted;
  sweep();
}

lease* lease_table::find(const std::string& key, const owner_id& owner) {
  const auto it = leases_.find(key);
  return it != leases_.end() && it->second.owner == owner ? &it->second : nullptr;
}

void lease_table::release(const std::string& key, const owner_id& owner) {
  if (const auto it = leases_.find(key); it != leases_.end() && it->second.owner == owner)
    leases_.erase(it);
}

void lease_table::delay(const std::string& key) {
  if (delay_.count() == 0)
    return;
  delays_[key] = now_() + delay_;
  sweep();
}

std::optional<clock_type::time_point> lease_table::delayed_until(const std::string& key) {
  if (delay_.count() == 0)
    return std::nullopt;
  const clock_type::time_point now = now_();
  if (const auto ended = leases_.find(key);
      ended != leases_.end() && ended->second.expires <= now) {
    // A lease granted here ran out without an UNLOCK: its holder may still be at work.
    auto& delayed = delays_[key];
    delayed = std::max(delayed, ended->second.expires + delay_);
    leases_.erase(ended);
  }
  if (const auto delayed = delays_.find(key); delayed != delays_.end()) {
    if (delayed->second > now)
      return delayed->second;
    delays_.erase(delayed);
  }
  return std::nullopt;
}

void lease_table::sweep() {
  if (leases_.size() + delays_.size() < sweep_at_)
    return;
  const clock_type::time_point now = now_();
  std::erase_if(leases_, [&](const auto& entry) { return entry.second.expires + delay_ <= now; });
  std::erase_if(delays_, [&](const auto& entry) { return entry.second <= now; });
  // Amortised: the next sweep comes when the tables have doubled again.
  sweep_at_ = std::max<std::size_t>(1024, 2 * (leases_.size() + delays_.size()));
}

} // namespace redlockd
