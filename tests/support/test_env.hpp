// Small shared helpers of the integration tests: a fleet with a daemon in front, polling, and
// views of what the masters hold.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon_process.hpp"
#include "line_client.hpp"
#include "process.hpp"
#include "redis_fleet.hpp"

namespace redlockd::test {

inline constexpr const char* default_fence_key = "redlockd:fence";
// The daemon's other metadata key: the longest TTL ever granted (restart quarantine).
inline std::string max_ttl_key(const std::string& fence_key = default_fence_key) {
  return fence_key + ":max_ttl";
}

// One fleet of `nodes` masters and one daemon in front of all of them.
struct fleet_and_daemon {
  explicit fleet_and_daemon(nlohmann::json extra = nlohmann::json::object(), std::size_t nodes = 5)
      : fleet(nodes), daemon(fleet.addresses(), std::move(extra)) {}

  line_client client() const { return line_client(daemon.port()); }

  redis_fleet fleet;
  daemon_process daemon;
};

// One fleet of five masters and one daemon with its metrics port (/metrics, /healthz, the
// status page) on a free loopback port.
struct fleet_with_metrics {
  explicit fleet_with_metrics(nlohmann::json extra = nlohmann::json::object())
      : metrics_port(free_loopback_port()),
        daemon(fleet.addresses(), with_metrics(std::move(extra), metrics_port)) {}

  static nlohmann::json with_metrics(nlohmann::json extra, std::uint16_t port) {
    extra["metrics_listen"] = "127.0.0.1:" + std::to_string(port);
    return extra;
  }

  redis_fleet fleet;
  std::uint16_t metrics_port;
  daemon_process daemon;
};

inline bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

// Polls `predicate` every 10 ms until it is true or `timeout` passes; returns its last value.
inline bool eventually(const std::function<bool()>& predicate,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (predicate()) {
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The marker a waiting daemon leaves for a lock's release (cross-daemon wake-ups).
inline std::string wait_marker(const std::string& resource,
                               const std::string& fence_key = default_fence_key) {
  return fence_key + ":waiting:" + resource;
}

// Keys of every live master except `fence_key`, its longest-TTL record and the wait markers
// (which expire by themselves when the wait ends), as "node<i>:<key>".
inline std::vector<std::string> lock_keys(const redis_fleet& fleet,
                                          const std::string& fence_key = default_fence_key) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    if (!fleet.alive(i)) {
      continue;
    }
    for (const auto& key : fleet.keys(i)) {
      if (key != fence_key && key != max_ttl_key(fence_key) &&
          !starts_with(key, wait_marker("", fence_key))) {
        out.push_back("node" + std::to_string(i) + ":" + key);
      }
    }
  }
  return out;
}

// Indexes of the live masters where `key` holds `value`.
inline std::vector<std::size_t> nodes_holding(const redis_fleet& fleet, const std::string& key,
                                              const std::string& value) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    if (fleet.alive(i) && fleet.get(i, key) == value) {
      out.push_back(i);
    }
  }
  return out;
}

// A barrier down the daemon's connections to the masters `nodes`: plants a key with a made-up
// owner on each, has the daemon UNLOCK it (its release goes to every usable master), and waits
// until each of them deleted it. A master runs a connection's commands in order, so everything
// the daemon sent it before the barrier (a late SET, a release) has run by then. Negative checks
// of what the masters hold go after this, not after a sleep. False when it times out.
inline bool daemon_links_flushed(const daemon_process& daemon, const redis_fleet& fleet,
                                 const std::vector<std::size_t>& nodes,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  static int round = 0;
  const std::string key = "barrier-" + std::to_string(++round);
  const std::string owner(40, 'b');
  for (const auto i : nodes) {
    if (!fleet.set_nx_px(i, key, owner, 60000)) {
      return false;
    }
  }
  line_client client = daemon.connect();
  client.request("UNLOCK " + key + " " + owner); // OK or NOTHELD: the DELs went out either way
  return eventually(
      [&] {
        for (const auto i : nodes) {
          if (fleet.get(i, key)) {
            return false;
          }
        }
        return true;
      },
      timeout);
}

// Keys the live masters have expired so far (INFO stats expired_keys), summed: tells a key the
// daemon deleted from one that ran out.
inline long long expired_keys(const redis_fleet& fleet) {
  long long total = 0;
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    if (!fleet.alive(i)) {
      continue;
    }
    const std::string stats = fleet.run(i, "INFO", "stats").str;
    const auto at = stats.find("expired_keys:");
    if (at != std::string::npos) {
      total += std::stoll(stats.substr(at + 13));
    }
  }
  return total;
}

// Calls of `command` (lowercase: "evalsha", "publish", ...) master `node` has run since it
// started, scripts' own calls included (INFO commandstats); 0 if none. What the masters did,
// whatever the daemons answered.
inline std::int64_t command_calls(const redis_fleet& fleet, std::size_t node,
                                  const std::string& command) {
  const std::string stats = fleet.run(node, "INFO", "commandstats").str;
  const std::string field = "cmdstat_" + command + ":calls=";
  const auto at = stats.find(field);
  if (at == std::string::npos) {
    return 0;
  }
  return std::stoll(stats.substr(at + field.size()));
}

// Script calls (EVALSHA and EVAL) master `node` has run since it started.
inline std::int64_t script_calls(const redis_fleet& fleet, std::size_t node) {
  return command_calls(fleet, node, "evalsha") + command_calls(fleet, node, "eval");
}

// The word at `index` of a reply as an integer (std::nullopt when absent or not decimal).
inline std::optional<std::int64_t> word_int(const std::string& reply, std::size_t index) {
  const auto words = split_words(reply);
  if (index >= words.size()) {
    return std::nullopt;
  }
  return parse_int(words[index]);
}

// The redis-server arguments of an ACL fleet: the default user needs `admin` (for the test's own
// helpers) and the user "redlockd" has `password` and only the commands docs/security.md lists;
// with `wake_channel` false, the list of releases before cross-daemon wake-ups (no pub/sub).
inline std::vector<std::string> acl_args(const std::string& admin, const std::string& password,
                                         bool wake_channel = true) {
  std::vector<std::string> args = {"--requirepass",
                                   admin,
                                   "--user",
                                   "redlockd",
                                   "on",
                                   ">" + password,
                                   "~*",
                                   "resetchannels",
                                   "-@all",
                                   "+get",
                                   "+mget",
                                   "+set",
                                   "+del",
                                   "+pexpire",
                                   "+pttl",
                                   "+time",
                                   "+info",
                                   "+eval",
                                   "+evalsha",
                                   "+script|load",
                                   "+scan",
                                   "+zadd",
                                   "+zrem",
                                   "+zcard",
                                   "+zcount",
                                   "+zscore",
                                   "+zrangebyscore",
                                   "+zremrangebyscore",
                                   "+zrevrange",
                                   "+hset",
                                   "+hdel",
                                   "+hexists",
                                   "+hget"};
  if (wake_channel)
    args.insert(args.end(), {"&redlockd:fence:wake", "+publish", "+subscribe", "+ping"});
  return args;
}

} // namespace redlockd::test
