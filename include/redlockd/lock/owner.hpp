// Owner values: 160 bits from the OS CSPRNG as 40 lowercase hex characters.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace redlockd {

using owner_id = std::array<char, 40>;

inline std::string_view view(const owner_id& owner) {
  return {owner.data(), owner.size()};
}

// Hands out owner values from a buffer refilled with getrandom(2), so that one acquisition
// costs no system call.
class owner_generator {
 public:
  owner_id next();

 private:
  std::array<std::uint8_t, 4000> pool_{};
  std::size_t used_ = pool_.size();
};

} // namespace redlockd
