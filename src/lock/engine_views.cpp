// Read-only views of the engine for the status page (lock_views.hpp): nothing here changes the
// engine. Part of lock_engine (the orchestrator is lock_engine.cpp).
#include "redlockd/lock/lock_engine.hpp"

#include <algorithm>

namespace redlockd {

std::vector<held_lock> lock_engine::held_locks() const {
  const clock_type::time_point now = now_();
  const auto resource = [this](const std::string& key) {
    return key.substr(std::min(key.size(), cfg_.key_prefix.size()));
  };
  std::vector<held_lock> out;
  leases_.for_each([&](const std::string& key, const lease& held) {
    if (held.valid_until > now)
      out.push_back({resource(key), "exclusive", "", false, held.fence, held.valid_until});
  });
  keeps_.for_each([&](const keep_lock& k) {
    if (k.valid_until > now)
      out.push_back({resource(k.key), "exclusive", "", true, k.fence, k.valid_until});
  });
  std::sort(out.begin(), out.end(),
            [](const held_lock& a, const held_lock& b) { return a.resource < b.resource; });
  return out;
}

std::vector<resource_waiters> lock_engine::waiting() const {
  std::vector<resource_waiters> out;
  queues_.for_each_queue([&](const std::string& key, std::size_t waiters) {
    out.push_back({key.substr(std::min(key.size(), cfg_.key_prefix.size())), waiters});
  });
  std::sort(out.begin(), out.end(), [](const resource_waiters& a, const resource_waiters& b) {
    return a.resource < b.resource;
  });
  return out;
}

} // namespace redlockd
