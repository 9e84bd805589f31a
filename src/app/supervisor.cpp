// Signals, systemd and the shutdown sequence. Cut from the composition root because these are
// the parts that run over the daemon's whole life and touch every other part in a set order.
#include "redlockd/app/supervisor.hpp"

#include "redlockd/app/fleet.hpp"
#include "redlockd/config/logging.hpp"
#include "redlockd/lock/redlock.hpp"
#include "redlockd/lock/status_query.hpp"
#include "redlockd/metrics/metrics_server.hpp"
#include "redlockd/server/listener.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <systemd/sd-daemon.h>

namespace redlockd {

supervisor::supervisor(net::io_context& io, const daemon_parts& parts,
                       std::function<config()> reload)
    : io_(io), parts_(parts), reload_(std::move(reload)), signals_(io, SIGINT, SIGTERM),
      hangups_(io, SIGHUP) {}

void supervisor::start() {
  net::co_spawn(io_, notify_systemd(), log_failure{parts_.log, "the systemd notifier"});
  wait_for_hangup();
  signals_.async_wait([this](const error_code_t& ec, int signal) {
    if (!ec)
      begin_shutdown(signal);
  });
}

void supervisor::wait_for_hangup() {
  hangups_.async_wait([this](const error_code_t& ec, int) {
    if (ec)
      return;
    if (reload_)
      reload_config();
    else
      reconfigure_logger(*parts_.log, parts_.cfg);
    wait_for_hangup();
  });
}

// SIGHUP: reopen the log file and apply the log settings of the configuration as it is now,
// and read the secrets again: the client secret applies to AUTH from now on, the Redis
// credentials to the next (re)connect of each link.
void supervisor::reload_config() {
  config& cfg = parts_.cfg;
  try {
    const config fresh = reload_();
    reconfigure_logger(*parts_.log, fresh);
    cfg.log_level = fresh.log_level;
    cfg.log_format = fresh.log_format;
    cfg.log_file = fresh.log_file;
    const bool secret_changed = cfg.client_secret != fresh.client_secret;
    cfg.client_secret_file = fresh.client_secret_file;
    cfg.client_secret = fresh.client_secret;
    cfg.admin_secret_file = fresh.admin_secret_file;
    cfg.admin_secret = fresh.admin_secret;
    cfg.redis_username = fresh.redis_username;
    cfg.redis_password_file = fresh.redis_password_file;
    cfg.redis_password = fresh.redis_password;
    parts_.log->info("SIGHUP: log reopened (level {}, format {}), secrets read again (client "
                     "authentication {}{}); other settings need a restart",
                     cfg.log_level, cfg.log_format, cfg.client_secret.empty() ? "off" : "on",
                     secret_changed ? ", client secret changed" : "");
  } catch (const std::exception& e) {
    parts_.log->error("SIGHUP: configuration not reloaded: {}", e.what());
  }
}

// Talks to systemd (a no-op without NOTIFY_SOCKET): READY=1 once a quorum of masters is
// connected or the start-up timeout passed, STATUS= when node health changes, WATCHDOG=1 at
// half the watchdog interval.
awaitable<void> supervisor::notify_systemd() {
  const config& cfg = parts_.cfg;
  std::uint64_t watchdog_us = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_us) > 0 && watchdog_us > 0;
  const auto tick = watchdog ? std::min(std::chrono::microseconds(watchdog_us / 2),
                                        std::chrono::microseconds(500'000))
                             : std::chrono::microseconds(500'000);
  const auto ready_by = parts_.started + std::chrono::milliseconds(cfg.startup_timeout_ms);
  bool ready = false;
  std::string last_status;
  net::steady_timer timer(io_);
  while (!parts_.context.shutting_down) {
    const std::size_t ok = parts_.masters.usable_count();
    const std::size_t needed = quorum(cfg.nodes.size());
    if (!ready && (ok >= needed || clock_type::now() >= ready_by)) {
      ready = true;
      if (ok < needed)
        parts_.log->warn("only {} of {} masters reachable after {} ms; serving anyway", ok,
                         cfg.nodes.size(), cfg.startup_timeout_ms);
      sd_notify(0, "READY=1");
    }
    std::string status = std::to_string(ok) + "/" + std::to_string(cfg.nodes.size()) +
                         " masters ok (quorum " + std::to_string(needed) + ")" +
                         (ok < needed ? ", NO QUORUM" : "") + "; " +
                         std::to_string(parts_.server.clients()) + " clients";
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

void supervisor::begin_shutdown(int signal) {
  parts_.log->info("signal {} received; stopping (up to {} ms)", signal,
                   parts_.cfg.shutdown_timeout_ms);
  parts_.context.shutting_down = true;
  sd_notify(0, "STOPPING=1\nSTATUS=stopping");
  parts_.server.stop_accepting();
  parts_.engine.shutdown();
  const auto deadline =
      clock_type::now() + std::chrono::milliseconds(parts_.cfg.shutdown_timeout_ms);
  net::co_spawn(io_, finish_shutdown(deadline), log_failure{parts_.log, "shutdown"});
}

// Polls every 5 ms for at most shutdown_timeout_ms: neither the engine nor the links nor the
// client sessions say when they become idle, so there is no event to wait on instead.
awaitable<void> supervisor::finish_shutdown(clock_type::time_point deadline) {
  lock_engine& engine = parts_.engine;
  listener& server = parts_.server;
  net::steady_timer poll(io_);
  // Releases must reach the masters before the links close.
  while ((engine.operations_in_flight() > 0 || parts_.status_reads.in_flight() > 0 ||
          !parts_.masters.idle()) &&
         clock_type::now() < deadline) {
    poll.expires_after(std::chrono::milliseconds(5));
    co_await poll.async_wait(net::use_awaitable);
  }
  server.drain();
  while (server.clients() > 0 && clock_type::now() < deadline) {
    poll.expires_after(std::chrono::milliseconds(5));
    co_await poll.async_wait(net::use_awaitable);
  }
  if (engine.operations_in_flight() > 0 || !parts_.masters.idle() || server.clients() > 0)
    parts_.log->warn("shutdown timeout: {} requests in flight, {} clients still connected",
                     engine.operations_in_flight(), server.clients());
  server.stop();
  parts_.metrics.stop();
  parts_.masters.stop();
  signals_.cancel();
  hangups_.cancel();
}

} // namespace redlockd
