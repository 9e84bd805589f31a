// N independent redis-server masters on free loopback ports, for the integration tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "process.hpp"
#include "tls_files.hpp"

namespace redlockd::test {

// A decoded hiredis reply.
struct redis_reply {
  enum class kind : std::uint8_t { string, status, error, integer, nil, array };
  kind type = kind::nil;
  std::string str;                   // string, status, error
  long long integer = 0;             // integer
  std::vector<redis_reply> elements; // array

  bool is_nil() const { return type == kind::nil; }
  bool is_error() const { return type == kind::error; }
};

// A fleet that speaks TLS only: plaintext port 0, tls-port on.
struct fleet_tls {
  std::string cert_file; // every node's certificate and key
  std::string key_file;
  std::string ca_file;             // tls-ca-cert-file: the CA of clients' certificates
  bool require_client_cert = true; // tls-auth-clients
  tls_client_files test_client;    // what the fleet's own connections (command()) present
};

class redis_fleet {
 public:
  explicit redis_fleet(std::size_t count = 5, std::optional<fleet_tls> tls = std::nullopt);
  // Every redis-server also gets `extra_args` (e.g. {"--requirepass", "pw"}, or an ACL user:
  // {"--user", "name", "on", ">pass", "~*", "&*", "+@all"}), on restarts too. The helpers'
  // own connections send AUTH `helper_password` (the default user's) first when it is set.
  redis_fleet(std::size_t count, std::vector<std::string> extra_args,
              std::string helper_password = {});
  // Each node i is started (and restarted) as `launch_prefix(i)` followed by the redis-server
  // command line, e.g. {"/usr/bin/env", "LD_PRELOAD=...", ...} to run it under libfaketime.
  using launch_prefix_function = std::function<std::vector<std::string>(std::size_t)>;
  redis_fleet(std::size_t count, const launch_prefix_function& launch_prefix);
  redis_fleet(std::size_t count, std::optional<fleet_tls> tls, std::vector<std::string> extra_args,
              std::string helper_password, const launch_prefix_function& launch_prefix = nullptr);
  ~redis_fleet();
  redis_fleet(const redis_fleet&) = delete;
  redis_fleet& operator=(const redis_fleet&) = delete;

  std::size_t size() const { return nodes_.size(); }
  std::uint16_t port(std::size_t i) const;
  // "127.0.0.1:P"
  std::string address(std::size_t i) const;
  std::vector<std::string> addresses() const;
  bool alive(std::size_t i) const;

  // SIGKILL and reap; the data is lost.
  void kill(std::size_t i);
  // Starts node i again on the same port, empty; waits until it answers PING.
  void restart(std::size_t i);
  // TLS mode: restarts node i, empty, serving this certificate instead of the fleet's.
  void use_certificate(std::size_t i, const std::string& cert_file, const std::string& key_file);
  bool tls() const { return tls_.has_value(); }
  // SIGSTOP / SIGCONT: the node keeps its sockets but does not answer.
  void pause(std::size_t i);
  void resume(std::size_t i);

  // Runs one command on node i over a fresh connection (short timeouts). Throws
  // std::runtime_error when the node cannot be reached.
  redis_reply command(std::size_t i, const std::vector<std::string>& args) const;
  template <class... Args>
  redis_reply run(std::size_t i, const Args&... args) const {
    return command(i, std::vector<std::string>{std::string(args)...});
  }

  // Sorted KEYS pattern.
  std::vector<std::string> keys(std::size_t i, const std::string& pattern = "*") const;
  // PTTL: -2 when the key does not exist, -1 when it has no TTL.
  long long pttl(std::size_t i, const std::string& key) const;
  std::optional<std::string> get(std::size_t i, const std::string& key) const;
  // SET key value NX PX ttl_ms; true when set.
  bool set_nx_px(std::size_t i, const std::string& key, const std::string& value,
                 long long ttl_ms) const;

  const temp_dir& dir() const { return dir_; }

 private:
  struct node {
    std::uint16_t port = 0;
    std::string dir;
    std::string log;
    std::vector<std::string> launch_prefix;
    child_process process;
    bool alive = false;
    std::string cert_file; // TLS mode: this node's certificate and key
    std::string key_file;
  };
  void start(node& n, bool fixed_port);
  bool answers_ping(std::uint16_t port) const;
  redis_reply run_on(std::uint16_t port, const std::vector<std::string>& args,
                     std::chrono::milliseconds timeout) const;

  std::optional<fleet_tls> tls_;
  temp_dir dir_;
  std::vector<std::unique_ptr<node>> nodes_;
  std::vector<std::string> extra_args_;
  std::string helper_password_;
};

} // namespace redlockd::test
