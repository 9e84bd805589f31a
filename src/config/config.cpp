// Parsing and validation of the daemon's JSON configuration. One table per kind of key (integer,
// string, flag) names each key's member and its rule; parse_config and validate both read them,
// so a range is written once. Keys with structure (listen, listen_unix_mode, nodes,
// clock_drift_factor, metrics_listen, tls, redis_tls) keep small dedicated code.
#include "redlockd/config/config.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <variant>

namespace redlockd {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(std::string_view key, std::string_view what) {
  throw config_error(std::string(key) + ": " + std::string(what));
}

std::string range_message(std::uint64_t min, std::uint64_t max) {
  return "must be an integer between " + std::to_string(min) + " and " + std::to_string(max);
}

// An integer key: the member it sets and the range both parsing and validate() enforce.
struct integer_key {
  std::string_view name;
  std::variant<std::uint32_t config::*, std::uint64_t config::*> member;
  std::uint64_t min;
  std::uint64_t max;

  std::uint64_t get(const config& cfg) const {
    return std::visit([&](auto field) -> std::uint64_t { return cfg.*field; }, member);
  }
  void set(config& cfg, std::uint64_t value) const {
    std::visit(
        [&](auto field) {
          cfg.*field = static_cast<std::remove_reference_t<decltype(cfg.*field)>>(value);
        },
        member);
  }
  void check(const config& cfg) const {
    const std::uint64_t value = get(cfg);
    if (value < min || value > max)
      fail(name, range_message(min, max));
  }
  // The range fits the member's type (checked at compile time below).
  constexpr bool fits() const {
    const bool narrow = std::holds_alternative<std::uint32_t config::*>(member);
    return min <= max && (!narrow || max <= std::numeric_limits<std::uint32_t>::max());
  }
};

constexpr integer_key integer_keys[] = {
    {"node_timeout_ms", &config::node_timeout_ms, 1, 10'000},
    {"min_ttl_ms", &config::min_ttl_ms, 1, 86'400'000},
    {"max_ttl_ms", &config::max_ttl_ms, 1, 86'400'000},
    {"max_line_bytes", &config::max_line_bytes, 64, 1'048'576},
    {"lock_delay_ms", &config::lock_delay_ms, 0, 3'600'000},
    {"max_hold_ms", &config::max_hold_ms, 0, 86'400'000'000},
    {"max_connections", &config::max_connections, 1, 1'000'000},
    {"max_keep_locks_per_connection", &config::max_keep_locks_per_connection, 0, 1'000'000},
    {"max_waiters_per_resource", &config::max_waiters_per_resource, 0, 1'000'000},
    {"max_waiters", &config::max_waiters, 0, 10'000'000},
    {"max_permits", &config::max_permits, 1, 4096},
    {"max_resources_per_request", &config::max_resources_per_request, 1, 1024},
    {"partial_line_timeout_ms", &config::partial_line_timeout_ms, 100, 3'600'000},
    {"client_keepalive_s", &config::client_keepalive_s, 0, 3600},
    {"clock_jump_ms", &config::clock_jump_ms, 10, 3'600'000},
    {"startup_timeout_ms", &config::startup_timeout_ms, 0, 600'000},
    {"shutdown_timeout_ms", &config::shutdown_timeout_ms, 0, 600'000},
    {"max_auth_failures", &config::max_auth_failures, 1, 1000},
    {"auth_timeout_ms", &config::auth_timeout_ms, 100, 3'600'000},
    {"redis_connect_timeout_ms", &config::redis_connect_timeout_ms, 100, 60'000},
    {"redis_health_interval_ms", &config::redis_health_interval_ms, 10, 10'000},
    {"redis_backoff_min_ms", &config::redis_backoff_min_ms, 1, 60'000},
    {"redis_backoff_max_ms", &config::redis_backoff_max_ms, 1, 600'000},
    {"redis_stall_ms", &config::redis_stall_ms, 0, 3'600'000},
};
static_assert(std::all_of(std::begin(integer_keys), std::end(integer_keys),
                          [](const integer_key& key) { return key.fits(); }));

// Pairs of integer keys where the second may not be below the first.
struct ordered_keys {
  std::string_view low;
  std::string_view high;
};
constexpr ordered_keys ordered_pairs[] = {
    {"min_ttl_ms", "max_ttl_ms"},
    {"redis_backoff_min_ms", "redis_backoff_max_ms"},
};

// tls.handshake_timeout_ms, inside its block.
constexpr std::uint64_t handshake_timeout_min = 100;
constexpr std::uint64_t handshake_timeout_max = 60'000;

void check_token(std::string_view key, const std::string& value) {
  if (value.size() > 256 || !printable_token(value))
    fail(key, "must be at most 256 printable ASCII bytes without spaces");
}

void check_fence_key(std::string_view key, const std::string& value) {
  if (value.empty() || value.size() > 256 || !printable_token(value))
    fail(key, "must be 1-256 printable ASCII bytes without spaces");
}

void check_log_format(std::string_view key, const std::string& value) {
  if (value != "text" && value != "json")
    fail(key, "must be \"text\" or \"json\"");
}

void check_log_level(std::string_view key, const std::string& value) {
  constexpr std::array<std::string_view, 7> levels = {"trace", "debug",    "info", "warn",
                                                      "error", "critical", "off"};
  if (std::find(levels.begin(), levels.end(), value) == levels.end())
    fail(key, "must be one of trace, debug, info, warn, error, critical, off");
}

// sockaddr_un's sun_path holds 108 bytes with the terminating NUL (Linux).
constexpr std::size_t max_unix_path = 107;

void check_unix_path(std::string_view key, const std::string& value) {
  if (!value.empty() && (value.front() != '/' || value.size() > max_unix_path))
    fail(key, "must be empty or an absolute path of at most " + std::to_string(max_unix_path) +
                  " bytes");
}

// A string key: the member it sets and the rule validate() applies (none for file paths).
struct string_key {
  std::string_view name;
  std::string config::*member;
  void (*check)(std::string_view key, const std::string& value);
};

constexpr string_key string_keys[] = {
    {"key_prefix", &config::key_prefix, check_token},
    {"listen_unix", &config::listen_unix, check_unix_path},
    {"fence_key", &config::fence_key, check_fence_key},
    {"log_format", &config::log_format, check_log_format},
    {"log_file", &config::log_file, nullptr},
    {"log_level", &config::log_level, check_log_level},
    {"client_secret_file", &config::client_secret_file, nullptr},
    {"admin_secret_file", &config::admin_secret_file, nullptr},
    {"redis_username", &config::redis_username, check_token},
    {"redis_password_file", &config::redis_password_file, nullptr},
};

struct flag_key {
  std::string_view name;
  bool config::*member;
};

constexpr flag_key flag_keys[] = {
    {"unsafe_disable_quarantine", &config::unsafe_disable_quarantine},
    {"unsafe_count_permits_per_master", &config::unsafe_count_permits_per_master},
    {"unsafe_no_write_intent", &config::unsafe_no_write_intent},
    {"refuse_unsafe_nodes", &config::refuse_unsafe_nodes},
};

template <typename Key, std::size_t N>
const Key* find_key(const Key (&table)[N], std::string_view name) {
  const auto* found = std::find_if(std::begin(table), std::end(table),
                                   [&](const Key& key) { return key.name == name; });
  return found == std::end(table) ? nullptr : found;
}

std::string get_string(const json& value, std::string_view key) {
  if (!value.is_string())
    fail(key, "must be a string");
  return value.get<std::string>();
}

std::uint64_t get_integer(const json& value, std::string_view key, std::uint64_t min,
                          std::uint64_t max) {
  if (!value.is_number_integer() && !value.is_number_unsigned())
    fail(key, range_message(min, max));
  if (value.is_number_integer() && !value.is_number_unsigned() && value.get<std::int64_t>() < 0)
    fail(key, range_message(min, max));
  const auto n = value.get<std::uint64_t>();
  if (n < min || n > max)
    fail(key, range_message(min, max));
  return n;
}

endpoint get_endpoint(const json& value, std::string_view key) {
  const std::string text = get_string(value, key);
  try {
    return parse_endpoint(text);
  } catch (const config_error& e) {
    fail(key, e.what());
  }
}

// listen_unix_mode: permission bits, written in octal ("0660", "660", "0600").
std::uint32_t get_file_mode(const json& value, std::string_view key) {
  const std::string text = get_string(value, key);
  std::uint32_t mode = 0;
  const bool octal =
      !text.empty() && text.size() <= 4 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '7'; });
  if (octal)
    for (const char c : text)
      mode = mode * 8 + static_cast<std::uint32_t>(c - '0');
  if (!octal || mode > 0777)
    fail(key, "must be octal permission bits such as \"0660\" (at most \"0777\")");
  return mode;
}

// A file path inside a TLS block: a non-empty string.
std::string get_path(const json& value, std::string_view key) {
  std::string path = get_string(value, key);
  if (path.empty())
    fail(key, "must be a file path");
  return path;
}

listener_tls get_listener_tls(const json& block, std::string_view key) {
  if (!block.is_object())
    fail(key, "must be an object with cert_file, key_file and optionally client_ca_file");
  listener_tls tls;
  for (const auto& [name, value] : block.items()) {
    const std::string full = std::string(key) + "." + name;
    if (name == "cert_file")
      tls.cert_file = get_path(value, full);
    else if (name == "key_file")
      tls.key_file = get_path(value, full);
    else if (name == "client_ca_file")
      tls.client_ca_file = get_path(value, full);
    else if (name == "handshake_timeout_ms")
      tls.handshake_timeout_ms = static_cast<std::uint32_t>(
          get_integer(value, full, handshake_timeout_min, handshake_timeout_max));
    else
      fail(key, "unknown key " + quote_for_message(name));
  }
  if (tls.cert_file.empty())
    fail(std::string(key) + ".cert_file", "is required");
  if (tls.key_file.empty())
    fail(std::string(key) + ".key_file", "is required");
  return tls;
}

master_tls get_master_tls(const json& block, std::string_view key) {
  if (!block.is_object())
    fail(key, "must be an object with ca_file and optionally cert_file, key_file, server_name");
  master_tls tls;
  for (const auto& [name, value] : block.items()) {
    const std::string full = std::string(key) + "." + name;
    if (name == "ca_file")
      tls.ca_file = get_path(value, full);
    else if (name == "cert_file")
      tls.cert_file = get_path(value, full);
    else if (name == "key_file")
      tls.key_file = get_path(value, full);
    else if (name == "server_name") {
      tls.server_name = get_string(value, full);
      if (tls.server_name.empty() || tls.server_name.size() > 253 ||
          !printable_token(tls.server_name))
        fail(full, "must be a host name or address (1-253 printable bytes, no spaces)");
    } else
      fail(key, "unknown key " + quote_for_message(name));
  }
  // Without a CA the masters' certificates could not be verified: refuse rather than trust all.
  if (tls.ca_file.empty())
    fail(std::string(key) + ".ca_file", "is required (the masters' certificates are verified)");
  if (tls.cert_file.empty() != tls.key_file.empty())
    fail(std::string(key) + (tls.cert_file.empty() ? ".cert_file" : ".key_file"),
         "cert_file and key_file go together");
  return tls;
}

// The keys no table describes; false when `key` is none of them either.
bool read_structured_key(config& cfg, const std::string& key, const json& value) {
  if (key == "listen") {
    cfg.listen = get_endpoint(value, key);
  } else if (key == "listen_unix_mode") {
    cfg.listen_unix_mode = get_file_mode(value, key);
  } else if (key == "nodes") {
    if (!value.is_array() || value.empty())
      fail(key, "must be a non-empty array of \"host:port\" strings");
    cfg.nodes.clear();
    for (std::size_t i = 0; i < value.size(); ++i)
      cfg.nodes.push_back(get_endpoint(value[i], "nodes[" + std::to_string(i) + "]"));
  } else if (key == "clock_drift_factor") {
    if (!value.is_number())
      fail(key, "must be a number between 0 and 0.1");
    cfg.clock_drift_factor = value.get<double>();
  } else if (key == "metrics_listen") {
    const std::string text = get_string(value, key);
    if (!text.empty())
      get_endpoint(value, key); // validated here, parsed when the listener starts
    cfg.metrics_listen = text;
  } else if (key == "tls") {
    cfg.tls = get_listener_tls(value, key);
  } else if (key == "redis_tls") {
    cfg.redis_tls = get_master_tls(value, key);
  } else {
    return false;
  }
  return true;
}

void read_key(config& cfg, const std::string& key, const json& value) {
  if (const integer_key* integer = find_key(integer_keys, key)) {
    integer->set(cfg, get_integer(value, key, integer->min, integer->max));
  } else if (const string_key* text = find_key(string_keys, key)) {
    cfg.*text->member = get_string(value, key);
  } else if (const flag_key* flag = find_key(flag_keys, key)) {
    if (!value.is_boolean())
      fail(key, "must be true or false");
    cfg.*flag->member = value.get<bool>();
  } else if (!read_structured_key(cfg, key, value)) {
    throw config_error("unknown key " + quote_for_message(key));
  }
}

void validate_nodes(const config& cfg) {
  if (cfg.nodes.empty())
    fail("nodes", "at least one node is needed");
  if (cfg.nodes.size() > max_nodes)
    fail("nodes", "at most " + std::to_string(max_nodes) + " nodes are supported");
  for (std::size_t i = 0; i < cfg.nodes.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (cfg.nodes[i] == cfg.nodes[j])
        fail("nodes[" + std::to_string(i) + "]", "duplicate of " + cfg.nodes[j].to_string());
}

void validate_integers(const config& cfg) {
  for (const integer_key& key : integer_keys)
    key.check(cfg);
  for (const ordered_keys& pair : ordered_pairs) {
    const integer_key* low = find_key(integer_keys, pair.low);
    const integer_key* high = find_key(integer_keys, pair.high);
    if (high->get(cfg) < low->get(cfg))
      fail(high->name,
           "must be between " + std::string(low->name) + " and " + std::to_string(high->max));
  }
  // Below node_timeout_ms a link would be dropped while a request may still be answered in time.
  if (cfg.redis_stall_ms != 0 && cfg.redis_stall_ms < cfg.node_timeout_ms)
    fail("redis_stall_ms", "must be 0 or at least node_timeout_ms");
  if (cfg.tls && (cfg.tls->handshake_timeout_ms < handshake_timeout_min ||
                  cfg.tls->handshake_timeout_ms > handshake_timeout_max))
    fail("tls.handshake_timeout_ms", range_message(handshake_timeout_min, handshake_timeout_max));
}

} // namespace

void validate(const config& cfg) {
  validate_nodes(cfg);
  for (const string_key& key : string_keys)
    if (key.check != nullptr)
      key.check(key.name, cfg.*key.member);
  if (cfg.listen_unix_mode > 0777)
    fail("listen_unix_mode", "must be octal permission bits of at most \"0777\"");
  if (!(cfg.clock_drift_factor >= 0.0 && cfg.clock_drift_factor <= 0.1))
    fail("clock_drift_factor", "must be a number between 0 and 0.1");
  validate_integers(cfg);
}

std::uint32_t redis_stall_limit_ms(const config& cfg) {
  if (cfg.redis_stall_ms != 0)
    return cfg.redis_stall_ms;
  return std::max<std::uint32_t>(1000, cfg.node_timeout_ms * 20);
}

config parse_config(std::string_view json_text) {
  json doc;
  try {
    doc = json::parse(json_text);
  } catch (const json::exception& e) {
    // Not only parse_error: a number like 1e400 throws out_of_range while parsing.
    throw config_error(std::string("invalid JSON: ") + e.what());
  }
  if (!doc.is_object())
    throw config_error("the configuration must be a JSON object");

  config cfg;
  for (const auto& [key, value] : doc.items())
    read_key(cfg, key, value);
  validate(cfg);
  return cfg;
}

} // namespace redlockd
