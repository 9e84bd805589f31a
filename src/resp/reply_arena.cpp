// The reply arena's chunks and their pool (see reply_arena.hpp).
#include "redlockd/resp/reply_arena.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace redlockd {

// A chunk's header; its bytes follow, aligned like malloc's.
struct alignas(reply_arena::alignment) reply_arena::chunk {
  chunk* next = nullptr; // the block's next chunk
  std::size_t size = 0;  // bytes after the header
  std::size_t used = 0;  // of them

  char* bytes() { return reinterpret_cast<char*>(this) + sizeof(chunk); }
  static chunk* of_first(void* first) {
    return reinterpret_cast<chunk*>(static_cast<char*>(first) - sizeof(chunk));
  }
};

namespace {

constexpr std::size_t standard_size = reply_arena::chunk_bytes;
// Replies are decoded and dropped one at a time; a few more cover a reply kept for a while.
constexpr std::size_t pool_limit = 8;

// Free standard chunks of this thread, linked through `next`. Trivially destructible: what a
// thread leaves here is reachable through its thread-local storage until it ends.
struct chunk_pool {
  void* head = nullptr;
  std::size_t count = 0;
};
thread_local chunk_pool pool;

} // namespace

void* reply_arena::allocate(std::size_t bytes) {
  bytes = (std::max<std::size_t>(bytes, 1) + alignment - 1) & ~(alignment - 1);
  if (current_ == nullptr || current_->size - current_->used < bytes) {
    chunk* fresh = nullptr;
    if (bytes <= standard_size && pool.head != nullptr) {
      fresh = static_cast<chunk*>(pool.head);
      pool.head = fresh->next;
      --pool.count;
    } else {
      const std::size_t size = std::max(bytes, standard_size);
      void* memory = std::malloc(sizeof(chunk) + size);
      if (memory == nullptr)
        return nullptr;
      fresh = new (memory) chunk;
      fresh->size = size;
    }
    fresh->next = nullptr;
    fresh->used = 0;
    if (current_ == nullptr)
      first_ = fresh;
    else
      current_->next = fresh;
    current_ = fresh;
  }
  void* out = current_->bytes() + current_->used;
  current_->used += bytes;
  return out;
}

void* reply_arena::finish() {
  if (first_ == nullptr)
    return nullptr;
  void* first = first_->bytes();
  first_ = current_ = nullptr;
  return first;
}

void reply_arena::discard() {
  release(finish());
}

void reply_arena::release(void* first) noexcept {
  if (first == nullptr)
    return;
  for (chunk* each = chunk::of_first(first); each != nullptr;) {
    chunk* next = each->next;
    if (each->size == standard_size && pool.count < pool_limit) {
      each->next = static_cast<chunk*>(pool.head);
      pool.head = each;
      ++pool.count;
    } else {
      each->~chunk();
      std::free(each);
    }
    each = next;
  }
}

std::size_t reply_arena::pooled() {
  return pool.count;
}

} // namespace redlockd
