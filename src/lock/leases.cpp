#include "redlockd/lock/leases.hpp"

#include <algorithm>

namespace redlockd {

void lease_table::grant(const std::string& key, const lease& granted) {
  std::vector<lease>& held = leases_[key];
  // An exclusive hold (or a set) proves every earlier lease on it over; each attempt's
  // delayed_until has already seen those that ran out unreleased. Shared holders and permits
  // live side by side: only those that ran out go, once lock-delay has seen them.
  if (granted.kind == lock_kind::exclusive || granted.kind == lock_kind::multi) {
    held.clear();
  } else if (delay_.count() == 0) {
    const clock_type::time_point now = now_();
    std::erase_if(held, [&](const lease& old) { return old.expires <= now; });
  }
  held.push_back(granted);
  sweep();
}

lease* lease_table::find(const std::string& key, const owner_id& owner) {
  const auto it = leases_.find(key);
  if (it == leases_.end())
    return nullptr;
  for (lease& held : it->second)
    if (held.owner == owner)
      return &held;
  return nullptr;
}

lease* lease_table::find_set(const owner_id& owner, const std::vector<std::string_view>& members,
                             std::string* key) {
  for (auto& [set, held] : leases_) {
    for (lease& one : held) {
      if (one.owner != owner || one.kind != lock_kind::multi || !holds_members(set, members))
        continue;
      if (key != nullptr)
        *key = set;
      return &one;
    }
  }
  return nullptr;
}

void lease_table::release_members(const owner_id& owner,
                                  const std::vector<std::string_view>& members) {
  std::string set;
  const lease* found = find_set(owner, members, &set);
  if (found == nullptr)
    return;
  const lease kept = *found;
  const std::string rest = set_without(set, members);
  release(set, owner);
  if (!rest.empty())
    leases_[rest].push_back(kept);
}

void lease_table::release(const std::string& key, const owner_id& owner) {
  const auto it = leases_.find(key);
  if (it == leases_.end())
    return;
  std::erase_if(it->second, [&](const lease& held) { return held.owner == owner; });
  if (it->second.empty())
    leases_.erase(it);
}

void lease_table::delay(const std::string& key) {
  if (delay_.count() == 0)
    return;
  delay_until(key, now_() + delay_);
  sweep();
}

void lease_table::delay_until(const std::string& key, clock_type::time_point until) {
  // A set's unclean end delays each of its resources too: a holder still at work uses them all.
  for (const std::string_view name : members_of(key)) {
    auto& delayed = delays_[std::string(name)];
    delayed = std::max(delayed, until);
  }
  if (key.find(member_separator) != std::string::npos) {
    auto& delayed = delays_[key];
    delayed = std::max(delayed, until);
  }
}

std::optional<clock_type::time_point> lease_table::delayed_until(const std::string& key) {
  if (delay_.count() == 0)
    return std::nullopt;
  const clock_type::time_point now = now_();
  if (const auto held = leases_.find(key); held != leases_.end()) {
    // A lease granted here ran out without an UNLOCK: its holder may still be at work.
    std::erase_if(held->second, [&](const lease& ended) {
      if (ended.expires > now)
        return false;
      delay_until(key, ended.expires + delay_);
      return true;
    });
    if (held->second.empty())
      leases_.erase(held);
  }
  // A set is delayed while any of its resources is.
  std::optional<clock_type::time_point> until;
  const auto check = [&](const std::string& name) {
    if (const auto delayed = delays_.find(name); delayed != delays_.end()) {
      if (delayed->second > now)
        until = std::max(until.value_or(delayed->second), delayed->second);
      else
        delays_.erase(delayed);
    }
  };
  check(key);
  if (key.find(member_separator) != std::string::npos)
    for (const std::string_view member : members_of(key))
      check(std::string(member));
  return until;
}

void lease_table::sweep() {
  if (leases_.size() + delays_.size() < sweep_at_)
    return;
  const clock_type::time_point now = now_();
  for (auto& [key, held] : leases_)
    std::erase_if(held, [&](const lease& one) { return one.expires + delay_ <= now; });
  std::erase_if(leases_, [](const auto& entry) { return entry.second.empty(); });
  std::erase_if(delays_, [&](const auto& entry) { return entry.second <= now; });
  // Amortised: the next sweep comes when the tables have doubled again.
  sweep_at_ = std::max<std::size_t>(1024, 2 * (leases_.size() + delays_.size()));
}

} // namespace redlockd
