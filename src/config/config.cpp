#include "redlockd/config/config.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>

namespace redlockd {
namespace {

using json = nlohmann::json;

[[noreturn]] void fail(std::string_view key, std::string_view what) {
  throw config_error(std::string(key) + ": " + std::string(what));
}

std::string get_string(const json& value, std::string_view key) {
  if (!value.is_string())
    fail(key, "must be a string");
  return value.get<std::string>();
}

std::uint64_t get_integer(const json& value, std::string_view key, std::uint64_t min,
                          std::uint64_t max) {
  const std::string range =
      "must be an integer between " + std::to_string(min) + " and " + std::to_string(max);
  if (!value.is_number_integer() && !value.is_number_unsigned())
    fail(key, range);
  if (value.is_number_integer() && !value.is_number_unsigned() && value.get<std::int64_t>() < 0)
    fail(key, range);
  const auto n = value.get<std::uint64_t>();
  if (n < min || n > max)
    fail(key, range);
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
      tls.handshake_timeout_ms = static_cast<std::uint32_t>(get_integer(value, full, 100, 60'000));
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

constexpr std::array<std::string_view, 7> log_levels = {"trace", "debug",    "info", "warn",
                                                        "error", "critical", "off"};

} // namespace

void validate(const config& cfg) {
  if (cfg.nodes.empty())
    fail("nodes", "at least one node is needed");
  if (cfg.nodes.size() > max_nodes)
    fail("nodes", "at most " + std::to_string(max_nodes) + " nodes are supported");
  for (std::size_t i = 0; i < cfg.nodes.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (cfg.nodes[i] == cfg.nodes[j])
        fail("nodes[" + std::to_string(i) + "]", "duplicate of " + cfg.nodes[j].to_string());
  if (cfg.key_prefix.size() > 256 || !printable_token(cfg.key_prefix))
    fail("key_prefix", "must be at most 256 printable ASCII bytes without spaces");
  if (cfg.fence_key.empty() || cfg.fence_key.size() > 256 || !printable_token(cfg.fence_key))
    fail("fence_key", "must be 1-256 printable ASCII bytes without spaces");
  if (!(cfg.clock_drift_factor >= 0.0 && cfg.clock_drift_factor <= 0.1))
    fail("clock_drift_factor", "must be a number between 0 and 0.1");
  if (cfg.node_timeout_ms < 1 || cfg.node_timeout_ms > 10000)
    fail("node_timeout_ms", "must be an integer between 1 and 10000");
  if (cfg.min_ttl_ms < 1)
    fail("min_ttl_ms", "must be at least 1");
  if (cfg.max_ttl_ms < cfg.min_ttl_ms || cfg.max_ttl_ms > 86'400'000)
    fail("max_ttl_ms", "must be between min_ttl_ms and 86400000");
  if (cfg.max_line_bytes < 64 || cfg.max_line_bytes > 1'048'576)
    fail("max_line_bytes", "must be an integer between 64 and 1048576");
  if (cfg.lock_delay_ms > 3'600'000)
    fail("lock_delay_ms", "must be an integer between 0 and 3600000");
  if (cfg.log_format != "text" && cfg.log_format != "json")
    fail("log_format", "must be \"text\" or \"json\"");
  if (cfg.redis_username.size() > 256 || !printable_token(cfg.redis_username))
    fail("redis_username", "must be at most 256 printable ASCII bytes without spaces");
  if (cfg.max_auth_failures < 1 || cfg.max_auth_failures > 1000)
    fail("max_auth_failures", "must be an integer between 1 and 1000");
  if (cfg.auth_timeout_ms < 100 || cfg.auth_timeout_ms > 3'600'000)
    fail("auth_timeout_ms", "must be an integer between 100 and 3600000");
  if (std::find(log_levels.begin(), log_levels.end(), cfg.log_level) == log_levels.end())
    fail("log_level", "must be one of trace, debug, info, warn, error, critical, off");
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
  for (const auto& [key, value] : doc.items()) {
    if (key == "listen") {
      cfg.listen = get_endpoint(value, key);
    } else if (key == "nodes") {
      if (!value.is_array() || value.empty())
        fail(key, "must be a non-empty array of \"host:port\" strings");
      cfg.nodes.clear();
      for (std::size_t i = 0; i < value.size(); ++i)
        cfg.nodes.push_back(get_endpoint(value[i], "nodes[" + std::to_string(i) + "]"));
    } else if (key == "key_prefix") {
      cfg.key_prefix = get_string(value, key);
    } else if (key == "fence_key") {
      cfg.fence_key = get_string(value, key);
    } else if (key == "clock_drift_factor") {
      if (!value.is_number())
        fail(key, "must be a number between 0 and 0.1");
      cfg.clock_drift_factor = value.get<double>();
    } else if (key == "node_timeout_ms") {
      cfg.node_timeout_ms = static_cast<std::uint32_t>(get_integer(value, key, 1, 10000));
    } else if (key == "min_ttl_ms") {
      cfg.min_ttl_ms = get_integer(value, key, 1, 86'400'000);
    } else if (key == "max_ttl_ms") {
      cfg.max_ttl_ms = get_integer(value, key, 1, 86'400'000);
    } else if (key == "max_line_bytes") {
      cfg.max_line_bytes = static_cast<std::uint32_t>(get_integer(value, key, 64, 1'048'576));
    } else if (key == "lock_delay_ms") {
      cfg.lock_delay_ms = get_integer(value, key, 0, 3'600'000);
    } else if (key == "max_connections") {
      cfg.max_connections = static_cast<std::uint32_t>(get_integer(value, key, 1, 1'000'000));
    } else if (key == "max_keep_locks_per_connection") {
      cfg.max_keep_locks_per_connection =
          static_cast<std::uint32_t>(get_integer(value, key, 0, 1'000'000));
    } else if (key == "max_waiters_per_resource") {
      cfg.max_waiters_per_resource =
          static_cast<std::uint32_t>(get_integer(value, key, 0, 1'000'000));
    } else if (key == "max_waiters") {
      cfg.max_waiters = static_cast<std::uint32_t>(get_integer(value, key, 0, 10'000'000));
    } else if (key == "partial_line_timeout_ms") {
      cfg.partial_line_timeout_ms =
          static_cast<std::uint32_t>(get_integer(value, key, 100, 3'600'000));
    } else if (key == "client_keepalive_s") {
      cfg.client_keepalive_s = static_cast<std::uint32_t>(get_integer(value, key, 0, 3600));
    } else if (key == "clock_jump_ms") {
      cfg.clock_jump_ms = static_cast<std::uint32_t>(get_integer(value, key, 10, 3'600'000));
    } else if (key == "unsafe_disable_quarantine" || key == "refuse_unsafe_nodes") {
      if (!value.is_boolean())
        fail(key, "must be true or false");
      (key == "refuse_unsafe_nodes" ? cfg.refuse_unsafe_nodes : cfg.unsafe_disable_quarantine) =
          value.get<bool>();
    } else if (key == "tls") {
      cfg.tls = get_listener_tls(value, key);
    } else if (key == "redis_tls") {
      cfg.redis_tls = get_master_tls(value, key);
    } else if (key == "metrics_listen") {
      const std::string text = get_string(value, key);
      if (!text.empty())
        get_endpoint(value, key); // validated here, parsed when the listener starts
      cfg.metrics_listen = text;
    } else if (key == "startup_timeout_ms") {
      cfg.startup_timeout_ms = static_cast<std::uint32_t>(get_integer(value, key, 0, 600'000));
    } else if (key == "shutdown_timeout_ms") {
      cfg.shutdown_timeout_ms = static_cast<std::uint32_t>(get_integer(value, key, 0, 600'000));
    } else if (key == "log_format") {
      cfg.log_format = get_string(value, key);
    } else if (key == "log_file") {
      cfg.log_file = get_string(value, key);
    } else if (key == "log_level") {
      cfg.log_level = get_string(value, key);
    } else if (key == "client_secret_file") {
      cfg.client_secret_file = get_string(value, key);
    } else if (key == "max_auth_failures") {
      cfg.max_auth_failures = static_cast<std::uint32_t>(get_integer(value, key, 1, 1000));
    } else if (key == "auth_timeout_ms") {
      cfg.auth_timeout_ms = static_cast<std::uint32_t>(get_integer(value, key, 100, 3'600'000));
    } else if (key == "redis_username") {
      cfg.redis_username = get_string(value, key);
    } else if (key == "redis_password_file") {
      cfg.redis_password_file = get_string(value, key);
    } else {
      throw config_error("unknown key " + quote_for_message(key));
    }
  }
  validate(cfg);
  return cfg;
}

} // namespace redlockd
