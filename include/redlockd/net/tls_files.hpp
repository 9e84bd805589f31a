// Checking the TLS files a configuration names, without pulling Asio or OpenSSL headers into the
// caller (redlockd --check-config). Defined in tls.cpp.
#pragma once

#include "redlockd/config/config.hpp"

namespace redlockd {

// Loads the certificates and keys of the `tls` and `redis_tls` blocks, as the daemon will at
// start; throws std::runtime_error naming the key and the file (for --check-config).
void check_tls_files(const config& cfg);

} // namespace redlockd
