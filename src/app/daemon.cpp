// The composition root: builds the fleet of Redis links, the lock engine, the status reader,
// the client listener, the metrics server (with the status page) and the supervisor, wires them
// together and runs the loop. What they report lives in status_info.cpp; signals and shutdown in
// supervisor.cpp.
#include "redlockd/app/daemon.hpp"

#include "redlockd/app/daemon_parts.hpp"
#include "redlockd/app/fleet.hpp"
#include "redlockd/app/status_info.hpp"
#include "redlockd/app/supervisor.hpp"
#include "redlockd/lock/lock_engine.hpp"
#include "redlockd/lock/lock_operator.hpp"
#include "redlockd/lock/redlock.hpp"
#include "redlockd/lock/status_query.hpp"
#include "redlockd/metrics/counter_rates.hpp"
#include "redlockd/metrics/metrics.hpp"
#include "redlockd/metrics/metrics_server.hpp"
#include "redlockd/net/net.hpp"
#include "redlockd/net/tls.hpp"
#include "redlockd/server/listener.hpp"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <sys/resource.h>

namespace redlockd {
namespace {

// Every client costs a descriptor: raise the soft limit to the hard one (often 1024 -> 524288)
// and say what is left, so max_connections is not cut short by EMFILE.
void raise_open_file_limit(spdlog::logger& log, const config& cfg) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    log.warn("cannot read the open-file limit: {}", std::strerror(errno));
    return;
  }
  const rlim_t before = limit.rlim_cur;
  if (limit.rlim_cur != limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      log.warn("cannot raise the open-file limit from {} to {}: {}", before, limit.rlim_max,
               std::strerror(errno));
      limit.rlim_cur = before;
    }
  }
  log.info("open-file limit {} (was {}, hard limit {})", limit.rlim_cur, before, limit.rlim_max);
  // Masters, the listeners, the log and a few spare.
  const rlim_t needed = static_cast<rlim_t>(cfg.max_connections) + cfg.nodes.size() + 32;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed)
    log.warn("the open-file limit {} is below max_connections {} plus the daemon's own; "
             "accepting fails with EMFILE before that (raise LimitNOFILE / ulimit -n)",
             limit.rlim_cur, cfg.max_connections);
}

void log_startup_summary(spdlog::logger& log, const config& cfg) {
  std::string nodes;
  for (const auto& node : cfg.nodes)
    nodes.append(nodes.empty() ? "" : ",").append(node.to_string());
  const std::string client_security = !cfg.tls ? "plaintext"
                                      : cfg.tls->client_ca_file.empty()
                                          ? "TLS"
                                          : "TLS, client certificates required";
  log.info("redlockd {} listening on {} ({}) with {} nodes (quorum {}{}): {}", REDLOCKD_VERSION,
           cfg.listen.to_string(), client_security, cfg.nodes.size(), quorum(cfg.nodes.size()),
           cfg.redis_tls ? ", over TLS" : "", nodes);
  if (!cfg.listen_unix.empty())
    log.info("also listening on the Unix socket {} (mode {:04o}, plaintext)", cfg.listen_unix,
             cfg.listen_unix_mode);
  log.info("node timeout {} ms, ttl {}..{} ms, drift factor {}, key prefix '{}', fence key '{}'",
           cfg.node_timeout_ms, cfg.min_ttl_ms, cfg.max_ttl_ms, cfg.clock_drift_factor,
           cfg.key_prefix, cfg.fence_key);
  log.info("client authentication {}; BREAK {}; redis authentication {}",
           cfg.client_secret.empty() ? "off (no client secret)" : "on",
           cfg.admin_secret.empty() ? "off (no admin secret)" : "on (admin secret)",
           cfg.redis_password.empty()   ? std::string("off")
           : cfg.redis_username.empty() ? std::string("on (default user)")
                                        : "on (user '" + cfg.redis_username + "')");
}

} // namespace

// Every part, in construction order: each takes references to the ones before it.
struct daemon::impl {
  impl(config c, std::shared_ptr<spdlog::logger> l, std::function<config()> reload)
      : cfg(std::move(c)), log(std::move(l)), io(1), masters(io, cfg, log),
        engine(cfg, masters, log),
        status_reads(
            cfg, masters, [this](std::size_t node) { return engine.votes(node); },
            [this](clock_type::time_point when) { masters.arm_status_timer(when); }, log),
        operations(
            cfg, masters, [this](std::size_t node) { return engine.votes(node); },
            [this](clock_type::time_point when) { masters.arm_operations_timer(when); },
            [this](const std::string& key) { engine.on_broken(key); }, log),
        started(clock_type::now()), context{engine,
                                            cfg,
                                            request_limits{cfg.min_ttl_ms, cfg.max_ttl_ms,
                                                           cfg.max_permits,
                                                           cfg.max_resources_per_request},
                                            hello(),
                                            {},
                                            log},
        server(io, context),
        metrics(io,
                {[this] { return render_metrics(snapshot(parts)); },
                 [this] { return voting_masters() >= quorum(cfg.nodes.size()); },
                 [this] { return status_page(parts, rates); },
                 [this] { return status_json(parts, rates); }},
                log),
        parts{cfg, log, masters, engine, status_reads, context, server, metrics, started},
        rates(started), life(io, parts, std::move(reload)) {
    context.info_json = [this] { return info_json(parts); };
    context.status = &status_reads;
    context.operations = &operations;
    masters.route_to(engine, status_reads, operations);
  }

  std::string hello() const {
    return format_hello(REDLOCKD_VERSION, cfg.nodes.size(), quorum(cfg.nodes.size()));
  }

  // Certificates are loaded before anything listens: a bad file stops the start.
  void load_certificates() {
    if (cfg.tls)
      server.use_tls(tls_context::for_listener(*cfg.tls));
    if (cfg.redis_tls) {
      const auto for_masters = tls_context::for_masters(*cfg.redis_tls);
      for (std::size_t i = 0; i < masters.size(); ++i)
        masters.use_tls(i, for_masters,
                        cfg.redis_tls->server_name.empty() ? cfg.nodes[i].host
                                                           : cfg.redis_tls->server_name);
    }
  }

  // Masters whose votes count now (connected, neither quarantined nor waiting for their seed):
  // what /healthz reports, so that it turns 200 when a LOCK can be granted.
  std::size_t voting_masters() const {
    std::size_t count = 0;
    for (std::size_t node = 0; node < cfg.nodes.size(); ++node)
      count += engine.votes(node) ? 1 : 0;
    return count;
  }

  config cfg;
  std::shared_ptr<spdlog::logger> log;
  net::io_context io;
  fleet masters;
  lock_engine engine;
  status_reader status_reads;
  lock_operator operations;
  clock_type::time_point started;
  session_context context;
  listener server;
  metrics_server metrics;
  daemon_parts parts;
  counter_rates rates; // the status page's rates between two of its requests
  supervisor life;
};

daemon::daemon(config cfg, std::shared_ptr<spdlog::logger> log, std::function<config()> reload)
    : impl_(std::make_unique<impl>(std::move(cfg), std::move(log), std::move(reload))) {}

daemon::~daemon() = default;

int daemon::run() {
  impl& d = *impl_;
  d.load_certificates();
  d.server.listen(d.cfg.listen);
  if (!d.cfg.listen_unix.empty())
    d.server.listen_unix(d.cfg.listen_unix, d.cfg.listen_unix_mode);
  if (!d.cfg.metrics_listen.empty())
    d.metrics.start(parse_endpoint(d.cfg.metrics_listen));
  log_startup_summary(*d.log, d.cfg);
  // After the start-up summary (its first line says where we listen), before any client.
  raise_open_file_limit(*d.log, d.cfg);
  d.masters.start();
  d.server.start();
  d.life.start();
  d.io.run();
  d.log->info("stopped");
  return 0;
}

} // namespace redlockd
