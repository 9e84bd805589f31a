// Shared helpers of the fuzz targets: the input split into a control part and a payload, and
// chunk sizes from a small deterministic generator, so one input always runs the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace redlockd::fuzz {

// Stops the run with a message; libFuzzer and the replay driver both report the abort.
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

inline void require(bool condition, const char* what) {
  if (!condition)
    fail(what);
}

// Chunk lengths for feeding a payload piecewise: 1..64 bytes, mostly small, from `seed`.
class chunker {
 public:
  explicit chunker(std::uint8_t seed) : state_(0x9e3779b9u ^ (seed * 0x85ebca6bu)) {}

  std::size_t next(std::size_t left) {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 17;
    state_ ^= state_ << 5;
    const std::size_t want = 1 + (state_ % 8 == 0 ? state_ % 64 : state_ % 4);
    return want < left ? want : left;
  }

 private:
  std::uint32_t state_;
};

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

} // namespace redlockd::fuzz
