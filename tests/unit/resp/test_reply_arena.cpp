#include "redlockd/resp/reply_arena.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

using namespace redlockd;

namespace {

bool aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % reply_arena::alignment == 0;
}

} // namespace

TEST_CASE("an arena hands out aligned bytes that stay put, the first one owning the block",
          "[reply_arena]") {
  reply_arena arena;
  CHECK(arena.finish() == nullptr); // nothing built yet

  void* first = arena.allocate(48);
  REQUIRE(first != nullptr);
  std::vector<char*> pieces;
  // Past one chunk: later chunks come, and nothing written earlier moves or is overwritten.
  for (int i = 0; i < 200; ++i) {
    auto* piece = static_cast<char*>(arena.allocate(static_cast<std::size_t>(1 + i % 37)));
    REQUIRE(piece != nullptr);
    CHECK(aligned(piece));
    std::memset(piece, i, static_cast<std::size_t>(1 + i % 37));
    pieces.push_back(piece);
  }
  // Larger than a chunk: a chunk of its own size.
  auto* big = static_cast<char*>(arena.allocate(3 * reply_arena::chunk_bytes));
  REQUIRE(big != nullptr);
  std::memset(big, 0x5a, 3 * reply_arena::chunk_bytes);
  for (int i = 0; i < 200; ++i)
    CHECK(static_cast<unsigned char>(pieces[static_cast<std::size_t>(i)][0]) ==
          static_cast<unsigned char>(i));

  CHECK(arena.finish() == first);
  CHECK(arena.finish() == nullptr); // the arena starts over
  reply_arena::release(first);
  reply_arena::release(nullptr); // ignored
}

TEST_CASE("released blocks are reused: a steady stream of small replies allocates nothing",
          "[reply_arena]") {
  reply_arena arena;
  void* warm = arena.allocate(64);
  reply_arena::release(arena.finish());
  const std::size_t pooled = reply_arena::pooled();
  CHECK(pooled >= 1);
  for (int round = 0; round < 100; ++round) {
    void* first = arena.allocate(48);
    CHECK(first == warm); // the same chunk, taken from the pool and given back
    CHECK(arena.allocate(400) != nullptr);
    CHECK(reply_arena::pooled() == pooled - 1);
    reply_arena::release(arena.finish());
    CHECK(reply_arena::pooled() == pooled);
  }
}

TEST_CASE("the pool keeps a few chunks, and discard frees what was being built", "[reply_arena]") {
  std::vector<void*> kept;
  for (int i = 0; i < 32; ++i) {
    reply_arena arena;
    REQUIRE(arena.allocate(16) != nullptr);
    kept.push_back(arena.finish());
  }
  for (void* first : kept)
    reply_arena::release(first);
  CHECK(reply_arena::pooled() <= 8);

  reply_arena arena;
  REQUIRE(arena.allocate(16) != nullptr);
  REQUIRE(arena.allocate(2 * reply_arena::chunk_bytes) != nullptr);
  arena.discard();
  CHECK(arena.finish() == nullptr);
}
