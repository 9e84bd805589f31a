// Memory for the objects of one parsed reply: the reader builds each reply (hiredis' redisReply
// tree, its element slots and its strings) into one block of chunks by bumping a pointer, and
// hands the whole block to the reply when it is complete. Freeing a reply gives its first chunk
// back to a small per-thread pool, so a steady stream of ordinary replies allocates nothing; a
// large one (INFO, a long array) takes chunks of its own size. Pure: no I/O.
#pragma once

#include <cstddef>

namespace redlockd {

class reply_arena {
 public:
  // The first chunk of a block: an ordinary script reply (an array of five and its strings, a
  // few hundred bytes) fits in it.
  static constexpr std::size_t chunk_bytes = 1024;
  static constexpr std::size_t alignment = 16;

  reply_arena() = default;
  ~reply_arena() { discard(); }
  reply_arena(const reply_arena&) = delete;
  reply_arena& operator=(const reply_arena&) = delete;

  // `bytes` (rounded up to the alignment) in the block being built, which the first call after
  // finish() or discard() starts; they stay where they are until the block is freed. Null when
  // memory runs out.
  void* allocate(std::size_t bytes);
  // The block being built is complete: returns its first allocation, which now owns the block
  // (free it with release()), and the next allocate() starts another. Null if nothing was
  // allocated.
  void* finish();
  // Frees the block being built (a reply that will not complete).
  void discard();
  // Frees the block whose first allocation is `first`, as finish() returned it. Null is ignored.
  static void release(void* first) noexcept;

  // Chunks of the standard size kept for reuse by this thread (for tests).
  static std::size_t pooled();

 private:
  struct chunk;

  chunk* first_ = nullptr;   // the block being built
  chunk* current_ = nullptr; // its chunk with room, where the next allocation goes
};

} // namespace redlockd
