// Daemon configuration: an aggregate with defaults, parsed and validated from JSON. No I/O.
#pragma once

#include "redlockd/config/config_error.hpp"
#include "redlockd/config/endpoint.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redlockd {

// TLS on the client listener. When set, `listen` speaks TLS only: no plaintext port is left open.
struct listener_tls {
  std::string cert_file; // PEM, the server certificate (chain)
  std::string key_file;  // PEM, its private key
  // When set, every client must present a certificate signed by this CA (PEM bundle).
  std::string client_ca_file;
  // A connection that has not finished its handshake this long is closed, in ms.
  std::uint32_t handshake_timeout_ms = 5000;
};

// TLS to the Redis masters. The server certificate is always verified against `ca_file`.
struct master_tls {
  std::string ca_file;   // PEM bundle of the CA(s) that sign the masters' certificates
  std::string cert_file; // optional client certificate (tls-auth-clients yes)
  std::string key_file;  // its private key, required with cert_file
  // The name the masters' certificates are verified against (and sent as SNI); empty means
  // each node's host from `nodes`.
  std::string server_name;
};

// Most masters a fleet may have.
inline constexpr std::size_t max_nodes = 16;

struct config {
  // Where clients connect.
  endpoint listen{"127.0.0.1", 7400};
  // Also accept clients on a Unix-domain socket at this absolute path (same protocol, sessions
  // and limits; plaintext, even with `tls`: the file's mode decides who may connect); empty
  // (the default) turns it off.
  std::string listen_unix;
  // The permission bits of that socket file (in JSON an octal string such as "0660").
  std::uint32_t listen_unix_mode = 0660;
  // The independent Redis masters. The embedded default is the local fleet of scripts/fleet.
  std::vector<endpoint> nodes{{"127.0.0.1", 7001},
                              {"127.0.0.1", 7002},
                              {"127.0.0.1", 7003},
                              {"127.0.0.1", 7004},
                              {"127.0.0.1", 7005}};
  // Prepended to every resource to form its Redis key.
  std::string key_prefix;
  // The never-expiring fencing counter key on every node.
  std::string fence_key = "redlockd:fence";
  // Fraction of the TTL subtracted from validity for clock drift (plus 2 ms).
  double clock_drift_factor = 0.01;
  // How long one node may take to answer one request, in ms; capped at ttl/10 per request.
  std::uint32_t node_timeout_ms = 50;
  // Accepted TTL range, in ms.
  std::uint64_t min_ttl_ms = 10;
  std::uint64_t max_ttl_ms = 3'600'000;
  // Longest request line, in bytes, without its LF.
  std::uint32_t max_line_bytes = 4096;
  // After a lock ends by expiry, by LOST or by its KEEP connection dropping, refuse new grants
  // of that resource for this long, in ms (Chubby's and Consul's lock-delay). Never after UNLOCK.
  std::uint64_t lock_delay_ms = 0;
  // The longest a KEEP lock is renewed in all, in ms: past it the daemon stops renewing (LOST
  // and release, as a failed renewal). Also caps each LOCK's MAXHOLD. 0: no cap.
  std::uint64_t max_hold_ms = 0;
  // Limits; a request beyond one is answered ERR TOO_MANY (a connection beyond
  // max_connections gets that line and is closed).
  std::uint32_t max_connections = 10000;
  std::uint32_t max_keep_locks_per_connection = 1000;
  std::uint32_t max_waiters_per_resource = 1000;
  std::uint32_t max_waiters = 100000;
  // The lock family's bounds: the largest n of LOCK ... PERMITS n (each permit is a slot the
  // acquire script may try, so a master's work per attempt grows with it), and the most
  // resources one MLOCK, MUNLOCK or MEXTEND names.
  std::uint32_t max_permits = 1024;
  std::uint32_t max_resources_per_request = 64;
  // A connection that holds part of a line this long without finishing it is closed, in ms.
  std::uint32_t partial_line_timeout_ms = 10000;
  // TCP keepalive on client connections, in s: a connection silent this long is probed, and a
  // peer that vanished without FIN or RST (crashed host, cut network) is dropped about twice
  // this long after, with its waits and KEEP locks. 0 turns probing off.
  std::uint32_t client_keepalive_s = 60;
  // A master whose clock moves ahead of the daemon's by more than this between two samples is
  // quarantined, in ms (smaller jumps are within the drift allowance and reply jitter).
  std::uint32_t clock_jump_ms = 500;
  // For tests of the test suite only: never quarantine restarted masters (unsafe).
  bool unsafe_disable_quarantine = false;
  // For tests of the test suite only: grant a permit when a majority granted any slot, each
  // master counting permits on its own (unsafe: it does not bound the holders at n).
  bool unsafe_count_permits_per_master = false;
  // For tests of the test suite only: an exclusive waiter leaves no write intent (nor wait
  // marks), so readers that keep coming starve it.
  bool unsafe_no_write_intent = false;
  // For the simulator only (tests/sim, `redlockd-sim --weaken NAME`): a rule switched off on the
  // real code path, to show that the simulator's checkers catch what the rule prevents. Not a
  // configuration key: parse_config never sets these. (`--weaken no-quarantine` sets
  // unsafe_disable_quarantine above.)
  struct weakenings {
    bool quorum_minus_one = false;       // a round is decided by one vote fewer than a majority
    bool handover_skips_keyloss = false; // a hand-over's release does not judge key loss
    bool publish_on_cleanup = false;     // a failed attempt's cleanup publishes a wake-up
  };
  weakenings weakened;
  // Keep masters whose maxmemory-policy can evict lock keys out of every quorum.
  bool refuse_unsafe_nodes = true; // masters that can evict lock keys do not vote
  // TLS for clients and for the masters; absent (the default) means plaintext TCP.
  std::optional<listener_tls> tls;
  std::optional<master_tls> redis_tls;
  // Where /metrics and /healthz are served over HTTP; empty (the default) turns it off.
  std::string metrics_listen;
  // systemd: READY=1 is sent once a quorum of masters is connected, or after this long, in ms.
  std::uint32_t startup_timeout_ms = 10000;
  // On SIGTERM/SIGINT, how long to wait for requests in flight and releases before exiting, in ms.
  std::uint32_t shutdown_timeout_ms = 5000;
  // "text" (default) or "json" (one JSON object per line).
  std::string log_format = "text";
  // Log to this file instead of stderr; SIGHUP reopens it (after logrotate).
  std::string log_file;
  // spdlog level: trace, debug, info, warn, error, critical, off.
  std::string log_level = "info";

  // Client authentication: a file holding the secret clients send with AUTH (without the
  // trailing newline). Unset: the environment variable REDLOCKD_CLIENT_SECRET, if set.
  std::string client_secret_file;
  // BREAK: a file holding the admin secret (AUTH with it allows BREAK and also authenticates as
  // a client). Unset: the environment variable REDLOCKD_ADMIN_SECRET, if set; neither: BREAK
  // is refused with ERR NOAUTH.
  std::string admin_secret_file;
  // The AUTH failures one connection may have; the last one is answered and the connection closed.
  std::uint32_t max_auth_failures = 3;
  // With a client secret, a connection not authenticated this long after accept is closed, in ms.
  std::uint32_t auth_timeout_ms = 10000;
  // Redis ACL: the masters are sent AUTH [redis_username] <password> on every connect. The
  // password comes from redis_password_file, or else the environment variable
  // REDLOCKD_REDIS_PASSWORD; neither: no AUTH.
  std::string redis_username;
  std::string redis_password_file;
  // The links to the masters, in ms. A connection attempt (TCP, and TLS with redis_tls) that has
  // not finished after redis_connect_timeout_ms is abandoned. Every redis_health_interval_ms an
  // idle link sends TIME (health check and clock sample) and a stalled one is looked for.
  std::uint32_t redis_connect_timeout_ms = 1000;
  std::uint32_t redis_health_interval_ms = 500;
  // Reconnect backoff: doubles per failed attempt from redis_backoff_min_ms up to
  // redis_backoff_max_ms, each wait jittered into [d/2, d].
  std::uint32_t redis_backoff_min_ms = 50;
  std::uint32_t redis_backoff_max_ms = 2000;
  // A link whose oldest request has gone unanswered this long is dropped and reconnected;
  // 0 means max(1000, 20 x node_timeout_ms).
  std::uint32_t redis_stall_ms = 0;

  // Not configuration keys: the secrets themselves, filled by resolve_secrets() (auth.hpp).
  // Never logged, never shown in INFO or in error messages.
  std::string client_secret;
  std::string admin_secret;
  std::string redis_password;
};

// How long a link's oldest request may go unanswered before the link is dropped, in ms:
// redis_stall_ms, or when that is 0, max(1000, 20 x node_timeout_ms).
std::uint32_t redis_stall_limit_ms(const config& cfg);

// Parses a JSON document into a config, starting from the defaults above.
// Unknown keys, wrong types and out-of-range values throw config_error naming the key.
config parse_config(std::string_view json_text);

// Checks every rule parse_config checks (each key's range, the cross-field rules) on an assembled
// config, e.g. after command-line overrides; also run by parse_config. Throws config_error.
void validate(const config& cfg);

} // namespace redlockd
