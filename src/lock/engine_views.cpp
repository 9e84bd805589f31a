// Read-only views of the engine for the status page (lock_views.hpp): nothing here changes the
// engine. Part of lock_engine (the orchestrator is lock_engine.cpp).
#include "redlockd/lock/lock_engine.hpp"

#include <algorithm>

namespace redlockd {

std::string lock_engine::shown_name(std::string_view name) const {
  // A hold's name for people: its resource without key_prefix; a semaphore's without the
  // count key's suffix; a set's resources joined by ','.
  std::string out;
  for (std::string_view member : members_of(name)) {
    member.remove_prefix(std::min(member.size(), cfg_.key_prefix.size()));
    if (!out.empty())
      out.push_back(',');
    out.append(member);
  }
  if (out.ends_with(permits_suffix))
    out.resize(out.size() - permits_suffix.size());
  return out;
}

std::vector<held_lock> lock_engine::held_locks() const {
  const clock_type::time_point now = now_();
  std::vector<held_lock> out;
  leases_.for_each([&](const std::string& key, const lease& held) {
    if (held.valid_until > now)
      out.push_back({shown_name(key), traits_of(held.kind).name, held.label, false, held.fence,
                     held.valid_until});
  });
  keeps_.for_each([&](const keep_lock& k) {
    if (k.valid_until > now)
      out.push_back(
          {shown_name(k.key), traits_of(k.kind).name, k.label, true, k.fence, k.valid_until});
  });
  std::sort(out.begin(), out.end(),
            [](const held_lock& a, const held_lock& b) { return a.resource < b.resource; });
  return out;
}

std::vector<resource_waiters> lock_engine::waiting() const {
  std::vector<resource_waiters> out;
  queues_.for_each_queue([&](const std::string& key, std::size_t waiters) {
    out.push_back({shown_name(key), waiters});
  });
  std::sort(out.begin(), out.end(), [](const resource_waiters& a, const resource_waiters& b) {
    return a.resource < b.resource;
  });
  return out;
}

} // namespace redlockd
