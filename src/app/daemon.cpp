#include "redlockd/app/daemon.hpp"

#include "redlockd/server/listener.hpp"
#include "redlockd/lock/lock_engine.hpp"
#include "redlockd/config/logging.hpp"
#include "redlockd/metrics/metrics.hpp"
#include "redlockd/metrics/metrics_server.hpp"
#include "redlockd/net/net.hpp"
#include "redlockd/redis/redis_link.hpp"
#include "redlockd/net/tls.hpp"

#include <boost/asio/signal_set.hpp>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>

namespace redlockd {
namespace {

std::string_view state_name(redis_link::state s) {
  switch (s) {
  case redis_link::state::ok:
    return "ok";
  case redis_link::state::down:
    return "down";
  case redis_link::state::connecting:
  case redis_link::state::handshaking:
    return "connecting";
  }
  return "unknown";
}

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

} // namespace

// The engine's view of the fleet: routes its commands to the links and arms its one timer.
struct daemon::impl final : node_io {
  impl(config c, std::shared_ptr<spdlog::logger> l, std::function<config()> r)
      : cfg(std::move(c)), log(std::move(l)), reload(std::move(r)), io(1), engine_timer(io),
        signals(io, SIGINT, SIGTERM), hangups(io, SIGHUP), engine(cfg, *this, log),
        status_timer(io), status_reads(
                              cfg, *this, [this](std::size_t node) { return engine.votes(node); },
                              [this](clock_type::time_point when) { arm_status_timer(when); }, log),
        started(clock_type::now()),
        context{engine, cfg, request_limits{cfg.min_ttl_ms, cfg.max_ttl_ms}, hello(), {}, log},
        server(io, context), metrics(io,
                                     {[this] { return render_metrics(snapshot()); },
                                      [this] { return nodes_ok() >= quorum(cfg.nodes.size()); }},
                                     log) {
    context.info_json = [this] { return info(); };
    context.status = &status_reads;
    for (std::size_t i = 0; i < cfg.nodes.size(); ++i) {
      links.push_back(std::make_unique<redis_link>(io, i, cfg.nodes[i], cfg, log));
      links.back()->attach(engine);
      links.back()->attach(status_reads);
    }
  }

  bool usable(std::size_t node) const override { return links[node]->usable(); }
  void send(std::size_t node, const request_tag& tag, std::string_view command) override {
    links[node]->send(tag, command);
  }
  void reload_scripts(std::size_t node) override { links[node]->reload_scripts(); }
  void arm_timer(clock_type::time_point when) override {
    engine_timer.expires_at(when); // cancels the earlier wait, whose handler then does nothing
    engine_timer.async_wait([this](const error_code_t& ec) {
      if (!ec)
        engine.on_timer();
    });
  }

  void arm_status_timer(clock_type::time_point when) {
    status_timer.expires_at(when);
    status_timer.async_wait([this](const error_code_t& ec) {
      if (!ec)
        status_reads.on_timer();
    });
  }

  // SIGHUP: reopen the log file and apply the log settings of the configuration as it is now,
  // and read the secrets again: the client secret applies to AUTH from now on, the Redis
  // credentials to the next (re)connect of each link.
  void wait_for_hangup() {
    hangups.async_wait([this](const error_code_t& ec, int) {
      if (ec)
        return;
      if (reload) {
        try {
          const config fresh = reload();
          reconfigure_logger(*log, fresh);
          cfg.log_level = fresh.log_level;
          cfg.log_format = fresh.log_format;
          cfg.log_file = fresh.log_file;
          const bool secret_changed = cfg.client_secret != fresh.client_secret;
          cfg.client_secret_file = fresh.client_secret_file;
          cfg.client_secret = fresh.client_secret;
          cfg.redis_username = fresh.redis_username;
          cfg.redis_password_file = fresh.redis_password_file;
          cfg.redis_password = fresh.redis_password;
          log->info("SIGHUP: log reopened (level {}, format {}), secrets read again (client "
                    "authentication {}{}); other settings need a restart",
                    cfg.log_level, cfg.log_format, cfg.client_secret.empty() ? "off" : "on",
                    secret_changed ? ", client secret changed" : "");
        } catch (const std::exception& e) {
          log->error("SIGHUP: configuration not reloaded: {}", e.what());
        }
      } else {
        reconfigure_logger(*log, cfg);
      }
      wait_for_hangup();
    });
  }

  std::size_t nodes_ok() const {
    return static_cast<std::size_t>(
        std::count_if(links.begin(), links.end(), [](const auto& link) { return link->usable(); }));
  }

  // Talks to systemd (a no-op without NOTIFY_SOCKET): READY=1 once a quorum of masters is
  // connected or the start-up timeout passed, STATUS= when node health changes, WATCHDOG=1 at
  // half the watchdog interval.
  awaitable<void> supervise() {
    std::uint64_t watchdog_us = 0;
    const bool watchdog = sd_watchdog_enabled(0, &watchdog_us) > 0 && watchdog_us > 0;
    const auto tick = watchdog ? std::min(std::chrono::microseconds(watchdog_us / 2),
                                          std::chrono::microseconds(500'000))
                               : std::chrono::microseconds(500'000);
    const auto ready_by = started + std::chrono::milliseconds(cfg.startup_timeout_ms);
    bool ready = false;
    std::string last_status;
    net::steady_timer timer(io);
    while (!context.shutting_down) {
      const std::size_t ok = nodes_ok();
      const std::size_t needed = quorum(cfg.nodes.size());
      if (!ready && (ok >= needed || clock_type::now() >= ready_by)) {
        ready = true;
        if (ok < needed)
          log->warn("only {} of {} masters reachable after {} ms; serving anyway", ok,
                    cfg.nodes.size(), cfg.startup_timeout_ms);
        sd_notify(0, "READY=1");
      }
      std::string status = std::to_string(ok) + "/" + std::to_string(cfg.nodes.size()) +
                           " masters ok (quorum " + std::to_string(needed) + ")" +
                           (ok < needed ? ", NO QUORUM" : "") + "; " +
                           std::to_string(server.clients()) + " clients";
      if (status != last_status) {
        sd_notify(0, ("STATUS=" + status).c_str());
        last_status = std::move(status);
      }
      if (watchdog)
        sd_notify(0, "WATCHDOG=1");
      timer.expires_after(tick);
      error_code_t ec;
      co_await timer.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
  }

  // Stops accepting, refuses new LOCKs, ends waits and KEEP locks, lets requests in flight and
  // releases finish (up to shutdown_timeout_ms), writes every pending reply, then stops.
  void begin_shutdown(int signal) {
    log->info("signal {} received; stopping (up to {} ms)", signal, cfg.shutdown_timeout_ms);
    context.shutting_down = true;
    sd_notify(0, "STOPPING=1\nSTATUS=stopping");
    server.stop_accepting();
    engine.shutdown();
    const auto deadline = clock_type::now() + std::chrono::milliseconds(cfg.shutdown_timeout_ms);
    net::co_spawn(io, finish_shutdown(deadline), log_failure{log, "shutdown"});
  }

  bool links_idle() const {
    return std::all_of(links.begin(), links.end(), [](const auto& link) { return link->idle(); });
  }

  awaitable<void> finish_shutdown(clock_type::time_point deadline) {
    net::steady_timer poll(io);
    // Releases must reach the masters before the links close.
    while ((engine.operations_in_flight() > 0 || status_reads.in_flight() > 0 || !links_idle()) &&
           clock_type::now() < deadline) {
      poll.expires_after(std::chrono::milliseconds(5));
      co_await poll.async_wait(net::use_awaitable);
    }
    server.drain();
    while (server.clients() > 0 && clock_type::now() < deadline) {
      poll.expires_after(std::chrono::milliseconds(5));
      co_await poll.async_wait(net::use_awaitable);
    }
    if (engine.operations_in_flight() > 0 || !links_idle() || server.clients() > 0)
      log->warn("shutdown timeout: {} requests in flight, {} clients still connected",
                engine.operations_in_flight(), server.clients());
    server.stop();
    metrics.stop();
    for (auto& link : links)
      link->stop();
    engine_timer.cancel();
    status_timer.cancel();
    signals.cancel();
    hangups.cancel();
  }

  metrics_snapshot snapshot() {
    const engine_counters& c = engine.counters();
    metrics_snapshot s;
    s.version = REDLOCKD_VERSION;
    s.results = context.results;
    s.other_errors = context.errors;
    s.quorum = quorum(cfg.nodes.size());
    s.lost = c.lost;
    s.renewed = c.renewed;
    s.fence_conflicts = c.fence_conflicts;
    s.master_restarts = c.restarts;
    s.master_clock_jumps = c.clock_jumps;
    s.master_key_losses = c.key_losses;
    s.auth_failures = context.auth_failures;
    s.keep_locks = engine.keep_locks();
    s.waiters = engine.waiters();
    s.clients = server.clients();
    s.fence_high_water = engine.fence_high_water();
    s.uptime_seconds = std::chrono::duration<double>(clock_type::now() - started).count();
    for (std::size_t i = 0; i < links.size(); ++i)
      s.nodes.push_back({links[i]->address().to_string(), links[i]->usable(), links[i]->rtt_us(),
                         engine.status_of(i).remaining_ms, node_state(i)});
    s.acquire_latency = &engine.acquire_latency();
    s.process = read_process_metrics();
    return s;
  }

  // The master's state as INFO shows it; one of node_states.
  std::string_view node_state(std::size_t i) {
    const redis_link& link = *links[i];
    const auto status = engine.status_of(i);
    const std::string_view state = state_name(link.current_state());
    if (state == "ok" && status.reason == lock_engine::quarantine_reason::restart)
      return "quarantined:restart";
    if (state == "ok" && status.reason == lock_engine::quarantine_reason::keyloss)
      return "quarantined:keyloss";
    if (state == "ok" && status.reason == lock_engine::quarantine_reason::clock)
      return "quarantined:clock";
    if (state == "ok" && !link.usable())
      return "refused:eviction";
    if (state != "ok" && link.auth_refused())
      return "down:auth";
    return state;
  }

  std::string hello() const {
    return format_hello(REDLOCKD_VERSION, cfg.nodes.size(), quorum(cfg.nodes.size()));
  }

  std::string info() {
    nlohmann::json nodes = nlohmann::json::array();
    for (std::size_t i = 0; i < links.size(); ++i) {
      const redis_link& link = *links[i];
      const auto status = engine.status_of(i);
      nodes.push_back({{"address", link.address().to_string()},
                       {"state", std::string(node_state(i))},
                       {"rtt_us", link.rtt_us()},
                       {"quarantined_ms", status.remaining_ms},
                       {"evicts_keys", link.unsafe()}});
    }
    const engine_counters& c = engine.counters();
    const nlohmann::json doc = {
        {"version", REDLOCKD_VERSION},
        {"uptime_s",
         std::chrono::duration_cast<std::chrono::seconds>(clock_type::now() - started).count()},
        {"quorum", quorum(cfg.nodes.size())},
        {"nodes", nodes},
        {"counters",
         {{"acquired", c.acquired},
          {"busy", c.busy},
          {"noquorum", c.noquorum},
          {"released", c.released},
          {"extended", c.extended},
          {"notheld", c.notheld},
          {"lost", c.lost},
          {"renewed", c.renewed},
          {"delayed", c.delayed},
          {"fence_conflicts", c.fence_conflicts},
          {"restarts", c.restarts},
          {"clock_jumps", c.clock_jumps},
          {"clock_jumps_backward", c.clock_jumps_backward},
          {"key_losses", c.key_losses},
          {"auth_failures", context.auth_failures}}},
        {"fence_high_water", engine.fence_high_water()},
        {"max_ttl_granted", engine.max_ttl_granted()},
        {"clients", server.clients()},
        {"operations_in_flight", engine.operations_in_flight()},
        {"waiters", engine.waiters()},
        {"keep_locks", engine.keep_locks()},
    };
    return doc.dump();
  }

  config cfg;
  std::shared_ptr<spdlog::logger> log;
  std::function<config()> reload;
  net::io_context io;
  net::steady_timer engine_timer;
  net::signal_set signals;
  net::signal_set hangups;
  lock_engine engine;
  net::steady_timer status_timer;
  status_reader status_reads;
  clock_type::time_point started;
  session_context context;
  listener server;
  metrics_server metrics;
  std::vector<std::unique_ptr<redis_link>> links;
};

daemon::daemon(config cfg, std::shared_ptr<spdlog::logger> log, std::function<config()> reload)
    : impl_(std::make_unique<impl>(std::move(cfg), std::move(log), std::move(reload))) {}

daemon::~daemon() = default;

int daemon::run() {
  impl& d = *impl_;
  // Certificates are loaded before anything listens: a bad file stops the start.
  if (d.cfg.tls)
    d.server.use_tls(tls_context::for_listener(*d.cfg.tls));
  if (d.cfg.redis_tls) {
    const auto masters = tls_context::for_masters(*d.cfg.redis_tls);
    for (std::size_t i = 0; i < d.links.size(); ++i)
      d.links[i]->use_tls(masters, d.cfg.redis_tls->server_name.empty()
                                       ? d.cfg.nodes[i].host
                                       : d.cfg.redis_tls->server_name);
  }
  d.server.listen(d.cfg.listen);
  if (!d.cfg.metrics_listen.empty())
    d.metrics.start(parse_endpoint(d.cfg.metrics_listen));
  std::string nodes;
  for (const auto& node : d.cfg.nodes)
    nodes.append(nodes.empty() ? "" : ",").append(node.to_string());
  const std::string client_security = !d.cfg.tls ? "plaintext"
                                      : d.cfg.tls->client_ca_file.empty()
                                          ? "TLS"
                                          : "TLS, client certificates required";
  d.log->info("redlockd {} listening on {} ({}) with {} nodes (quorum {}{}): {}", REDLOCKD_VERSION,
              d.cfg.listen.to_string(), client_security, d.cfg.nodes.size(),
              quorum(d.cfg.nodes.size()), d.cfg.redis_tls ? ", over TLS" : "", nodes);
  d.log->info("node timeout {} ms, ttl {}..{} ms, drift factor {}, key prefix '{}', fence key '{}'",
              d.cfg.node_timeout_ms, d.cfg.min_ttl_ms, d.cfg.max_ttl_ms, d.cfg.clock_drift_factor,
              d.cfg.key_prefix, d.cfg.fence_key);
  d.log->info("client authentication {}; redis authentication {}",
              d.cfg.client_secret.empty() ? "off (no client secret)" : "on",
              d.cfg.redis_password.empty()   ? std::string("off")
              : d.cfg.redis_username.empty() ? std::string("on (default user)")
                                             : "on (user '" + d.cfg.redis_username + "')");
  // After the start-up summary (its first line says where we listen), before any client.
  raise_open_file_limit(*d.log, d.cfg);
  for (auto& link : d.links)
    link->start();
  d.server.start();
  net::co_spawn(d.io, d.supervise(), log_failure{d.log, "the systemd notifier"});
  d.wait_for_hangup();
  d.signals.async_wait([&d](const error_code_t& ec, int signal) {
    if (!ec)
      d.begin_shutdown(signal);
  });
  d.io.run();
  d.log->info("stopped");
  return 0;
}

} // namespace redlockd
