// Read-only views of what the engine holds, for the status page: the locks this daemon granted
// that are still valid, and the waiters per resource. A view never carries an owner: the owner is
// the capability to UNLOCK and EXTEND. No I/O.
#pragma once

#include "redlockd/lock/engine_io.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace redlockd {

// A lease or KEEP lock granted through this daemon whose validity has not run out.
struct held_lock {
  std::string resource;                 // as the client named it (no key prefix)
  std::string_view kind = "exclusive";  // its lock kind (lock_kind_traits::name)
  std::string label;                    // the holder's label; "" when it has none
  bool keep = false;                    // a KEEP lock, renewed by this daemon
  std::uint64_t fence = 0;              // its fencing token
  clock_type::time_point valid_until{}; // the validity given to the client (or the last renewal)
};

// A resource with LOCK ... WAIT requests queued on this daemon.
struct resource_waiters {
  std::string resource; // as the client named it (no key prefix)
  std::size_t waiters = 0;
};

} // namespace redlockd
