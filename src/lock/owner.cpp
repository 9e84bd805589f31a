#include "redlockd/lock/owner.hpp"

#include <cerrno>
#include <stdexcept>
#include <sys/random.h>

namespace redlockd {

owner_id owner_generator::next() {
  constexpr std::size_t bytes = 20; // 160 bits
  if (used_ + bytes > pool_.size() && source_) {
    source_(pool_);
    used_ = 0;
  } else if (used_ + bytes > pool_.size()) {
    std::size_t filled = 0;
    while (filled < pool_.size()) {
      const ssize_t got = ::getrandom(pool_.data() + filled, pool_.size() - filled, 0);
      if (got < 0) {
        if (errno == EINTR)
          continue;
        throw std::runtime_error("getrandom failed");
      }
      filled += static_cast<std::size_t>(got);
    }
    used_ = 0;
  }
  static constexpr char hex[] = "0123456789abcdef";
  owner_id owner;
  for (std::size_t i = 0; i < bytes; ++i) {
    const std::uint8_t b = pool_[used_ + i];
    owner[2 * i] = hex[b >> 4];
    owner[2 * i + 1] = hex[b & 0x0f];
    pool_[used_ + i] = 0; // a used value is never handed out twice
  }
  used_ += bytes;
  return owner;
}

} // namespace redlockd
