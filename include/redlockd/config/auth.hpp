// Authentication logic shared by the client sessions and the Redis links. No I/O: secrets are
// read through the callbacks of secret_sources, so that they can be tested without files.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/protocol/protocol.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace redlockd {

// True when `candidate` equals `secret`. The time taken depends only on candidate.size(): every
// byte of the candidate is looked at whatever the secret holds, and neither a mismatch nor a
// different length ends the loop early, so the secret's content and length do not leak.
bool constant_time_equals(std::string_view candidate, std::string_view secret);

// A secret file's content without its trailing newline (LF or CRLF, once).
std::string_view strip_trailing_newline(std::string_view text);

// Where secrets come from: file contents (std::nullopt when unreadable) and environment
// variables (std::nullopt when unset).
struct secret_sources {
  std::function<std::optional<std::string>(const std::string& path)> read_file;
  std::function<std::optional<std::string>(const char* name)> getenv;
};

inline constexpr const char* client_secret_env = "REDLOCKD_CLIENT_SECRET";
inline constexpr const char* admin_secret_env = "REDLOCKD_ADMIN_SECRET";
inline constexpr const char* redis_password_env = "REDLOCKD_REDIS_PASSWORD";

// Fills cfg.client_secret, cfg.admin_secret and cfg.redis_password: from the files named by
// client_secret_file, admin_secret_file and redis_password_file when those keys are set (they
// win), else from the environment variables above. A file that cannot be read or is empty, an
// environment variable that is set but empty, and a client secret that does not fit in one AUTH
// line throw config_error naming the key or variable. Messages never contain a secret.
void resolve_secrets(config& cfg, const secret_sources& sources);

// Where a connection stands with AUTH. Decides which requests are let through; the session does
// the I/O (replies, counting, logging, closing).
class connection_auth {
 public:
  // `required`: a client secret was configured when the connection was accepted.
  explicit connection_auth(bool required) : authenticated_(!required) {}

  enum class outcome : std::uint8_t { accepted, refused, refused_closing };

  bool authenticated() const { return authenticated_; }
  // PING, HELLO, AUTH and QUIT always; everything else once authenticated.
  bool allows(const request& req) const;
  // Checks an AUTH attempt against the secrets configured now: the client secret (empty: none,
  // AUTH always passes) and the admin secret (empty: none), which also authenticates and makes
  // the connection an admin's (BREAK). The `max_failures`-th refusal on this connection answers
  // refused_closing.
  outcome attempt(std::string_view candidate, std::string_view secret,
                  std::string_view admin_secret, std::uint32_t max_failures);
  std::uint32_t failures() const { return failures_; }
  // AUTH with the admin secret succeeded on this connection: BREAK is allowed.
  bool admin() const { return admin_; }

 private:
  bool authenticated_;
  bool admin_ = false;
  std::uint32_t failures_ = 0;
};

// Bounds the log lines about refused AUTHs, so that a client guessing in a loop cannot fill the
// disk: at most `per_second` lines in each second; the rest are counted and the count is reported
// with the next line that is logged.
class log_budget {
 public:
  explicit log_budget(std::uint32_t per_second) : per_second_(per_second) {}

  // True when a line may be logged at `now`; then `held_back` is the number of lines suppressed
  // since the previous one logged.
  bool take(std::chrono::steady_clock::time_point now, std::uint64_t& held_back);

 private:
  std::uint32_t per_second_;
  std::chrono::steady_clock::time_point window_start_{};
  std::uint32_t used_ = 0;
  std::uint64_t suppressed_ = 0;
};

} // namespace redlockd
