// Owner values: 160 bits from the OS CSPRNG as 40 lowercase hex characters.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace redlockd {

using owner_id = std::array<char, 40>;

inline std::string_view view(const owner_id& owner) {
  return {owner.data(), owner.size()};
}

// What a hold stores on the masters: its owner, followed by ' ' and its label when it has one
// (LABEL). Scripts compare only the first 40 bytes, the owner. Built in `buffer`.
inline std::string_view hold_value(std::string& buffer, std::string_view owner,
                                   std::string_view label) {
  if (label.empty())
    return owner;
  buffer.assign(owner).append(1, ' ').append(label);
  return buffer;
}

// Fills a buffer with random bytes. Empty: the OS CSPRNG (getrandom(2)), as the daemon runs.
// The simulator (tests/sim) passes a seeded generator, so that a run replays bit for bit.
using random_bytes = std::function<void(std::span<std::uint8_t>)>;

// Hands out owner values from a buffer refilled with getrandom(2) (or `source`), so that one
// acquisition costs no system call.
class owner_generator {
 public:
  explicit owner_generator(random_bytes source = {}) : source_(std::move(source)) {}
  owner_id next();

 private:
  random_bytes source_;
  std::array<std::uint8_t, 4000> pool_{};
  std::size_t used_ = pool_.size();
};

} // namespace redlockd
