#include "redlockd/config/auth.hpp"

#include <algorithm>
#include <variant>

namespace redlockd {
namespace {

[[noreturn]] void fail(std::string_view key, std::string_view what) {
  throw config_error(std::string(key) + ": " + std::string(what));
}

// The content of a secret file named by `key`, without its trailing newline.
std::string read_secret_file(const secret_sources& sources, std::string_view key,
                             const std::string& path) {
  std::optional<std::string> content = sources.read_file ? sources.read_file(path) : std::nullopt;
  if (!content)
    fail(key, "cannot read '" + path + "'");
  std::string secret(strip_trailing_newline(*content));
  if (secret.empty())
    fail(key, "'" + path + "' is empty");
  return secret;
}

// The value of an environment variable; "" when unset. Set but empty is an error: an operator
// who exported it meant to turn authentication on, and must not get an open daemon instead.
std::string read_secret_env(const secret_sources& sources, const char* name) {
  std::optional<std::string> value = sources.getenv ? sources.getenv(name) : std::nullopt;
  if (!value)
    return {};
  std::string secret(strip_trailing_newline(*value));
  if (secret.empty())
    fail(name, "is set but empty");
  return secret;
}

// A secret that travels as the one argument of "AUTH <secret>" on one request line.
void check_auth_secret(const config& cfg, const std::string& secret, const char* where) {
  if (secret.empty())
    return;
  if (!std::all_of(secret.begin(), secret.end(), [](char c) { return c >= 0x21 && c <= 0x7e; }))
    fail(where, "the secret must be printable ASCII without spaces or line breaks");
  if (secret.size() + 5 > cfg.max_line_bytes)
    fail(where, "the secret is longer than an AUTH line may be (max_line_bytes - 5)");
}

} // namespace

bool constant_time_equals(std::string_view candidate, std::string_view secret) {
  // Walk the candidate (whose length the caller already knows) and compare it with the secret
  // repeated: no branch and no loop bound depends on the secret.
  const std::size_t secret_size = secret.size();
  const unsigned char* secret_bytes = reinterpret_cast<const unsigned char*>(secret.data());
  volatile unsigned char difference = 0;
  for (std::size_t i = 0; i < candidate.size(); ++i) {
    const unsigned char expected = secret_size == 0 ? 0 : secret_bytes[i % secret_size];
    difference = static_cast<unsigned char>(difference |
                                            (static_cast<unsigned char>(candidate[i]) ^ expected));
  }
  const std::size_t size_difference = candidate.size() ^ secret_size;
  return (difference | static_cast<unsigned char>(size_difference != 0)) == 0;
}

std::string_view strip_trailing_newline(std::string_view text) {
  if (text.ends_with('\n'))
    text.remove_suffix(1);
  if (text.ends_with('\r'))
    text.remove_suffix(1);
  return text;
}

void resolve_secrets(config& cfg, const secret_sources& sources) {
  cfg.client_secret = cfg.client_secret_file.empty()
                          ? read_secret_env(sources, client_secret_env)
                          : read_secret_file(sources, "client_secret_file", cfg.client_secret_file);
  check_auth_secret(cfg, cfg.client_secret,
                    cfg.client_secret_file.empty() ? client_secret_env : "client_secret_file");
  cfg.admin_secret = cfg.admin_secret_file.empty()
                         ? read_secret_env(sources, admin_secret_env)
                         : read_secret_file(sources, "admin_secret_file", cfg.admin_secret_file);
  check_auth_secret(cfg, cfg.admin_secret,
                    cfg.admin_secret_file.empty() ? admin_secret_env : "admin_secret_file");
  cfg.redis_password =
      cfg.redis_password_file.empty()
          ? read_secret_env(sources, redis_password_env)
          : read_secret_file(sources, "redis_password_file", cfg.redis_password_file);
  if (!cfg.redis_username.empty() && cfg.redis_password.empty())
    fail("redis_username",
         std::string("needs a password (redis_password_file or ") + redis_password_env + ")");
}

bool connection_auth::allows(const request& req) const {
  return authenticated_ || std::holds_alternative<ping_request>(req) ||
         std::holds_alternative<hello_request>(req) || std::holds_alternative<auth_request>(req) ||
         std::holds_alternative<quit_request>(req);
}

connection_auth::outcome connection_auth::attempt(std::string_view candidate,
                                                  std::string_view secret,
                                                  std::string_view admin_secret,
                                                  std::uint32_t max_failures) {
  // Both comparisons always run, so the time taken does not tell which secret matched.
  const bool admin = !admin_secret.empty() && constant_time_equals(candidate, admin_secret);
  const bool client = secret.empty() || constant_time_equals(candidate, secret);
  if (admin || client) {
    authenticated_ = true;
    admin_ = admin_ || admin;
    return outcome::accepted;
  }
  // A refused attempt does not undo an earlier success (as in Redis), but it counts.
  ++failures_;
  return failures_ >= max_failures ? outcome::refused_closing : outcome::refused;
}

bool log_budget::take(std::chrono::steady_clock::time_point now, std::uint64_t& held_back) {
  if (now - window_start_ >= std::chrono::seconds(1)) {
    window_start_ = now;
    used_ = 0;
  }
  if (used_ >= per_second_) {
    ++suppressed_;
    return false;
  }
  ++used_;
  held_back = suppressed_;
  suppressed_ = 0;
  return true;
}

} // namespace redlockd
