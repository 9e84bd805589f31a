// LOCK ... WAIT: one first-come-first-served queue of waiting operations per resource key. Only
// the head of a queue tries to acquire; the engine decides when. No I/O.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>

namespace redlockd {

class wait_queues {
 public:
  struct waiter {
    std::uint32_t slot;   // the operation
    std::uint64_t serial; // which request in that slot
    bool operator==(const waiter&) const = default;
  };

  // Waiters on `key`, and on every key.
  std::size_t waiting_on(const std::string& key) const {
    const auto it = queues_.find(key);
    return it == queues_.end() ? 0 : it->second.size();
  }
  std::size_t total() const { return total_; }

  // Joins the back of `key`'s queue; true if it is the head (it was empty).
  bool join(const std::string& key, waiter w) {
    auto& queue = queues_[key];
    queue.push_back(w);
    ++total_;
    return queue.size() == 1;
  }

  // Leaves `key`'s queue. True when `w` was the head and others still wait: a new head that
  // must get its turn.
  bool leave(const std::string& key, waiter w) {
    --total_;
    const auto queue = queues_.find(key);
    if (queue == queues_.end())
      return false;
    auto& waiting = queue->second;
    const auto it = std::find(waiting.begin(), waiting.end(), w);
    if (it == waiting.end())
      return false;
    const bool was_head = it == waiting.begin();
    waiting.erase(it);
    if (waiting.empty()) {
      queues_.erase(queue);
      return false;
    }
    return was_head;
  }

  // Calls f(key, head) for the head of every queue.
  template <typename F>
  void for_each_head(F&& f) const {
    for (const auto& [key, waiting] : queues_)
      if (!waiting.empty())
        f(key, waiting.front());
  }

  // Calls f(key, waiters) for every queue, read-only.
  template <typename F>
  void for_each_queue(F&& f) const {
    for (const auto& [key, waiting] : queues_)
      f(key, waiting.size());
  }

  // The waiter right behind the head of `key`'s queue, if any.
  std::optional<waiter> behind_head(const std::string& key) const {
    const auto it = queues_.find(key);
    if (it == queues_.end() || it->second.size() < 2)
      return std::nullopt;
    return it->second[1];
  }
  std::optional<waiter> head(const std::string& key) const {
    const auto it = queues_.find(key);
    if (it == queues_.end() || it->second.empty())
      return std::nullopt;
    return it->second.front();
  }

 private:
  std::unordered_map<std::string, std::deque<waiter>> queues_;
  std::size_t total_ = 0;
};

} // namespace redlockd
