#include "redlockd/lock/key_loss.hpp"

namespace redlockd {

std::uint32_t lost_keys(lease_watch& watch, std::size_t held_elsewhere,
                        clock_type::time_point now) {
  const std::uint32_t lost = watch.missing & watch.expect_held;
  if (lost == 0 || held_elsewhere == 0 || now >= watch.expect_until)
    return 0;
  watch.missing &= ~lost;
  return lost;
}

} // namespace redlockd
