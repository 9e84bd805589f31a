// The daemon's life cycle around the serving parts: systemd notifications (READY, STATUS,
// WATCHDOG, STOPPING), SIGHUP (reopen the log, read the secrets again) and the graceful
// shutdown on SIGINT / SIGTERM.
#pragma once

#include "redlockd/app/daemon_parts.hpp"
#include "redlockd/net/net.hpp"

#include <boost/asio/signal_set.hpp>

#include <functional>

namespace redlockd {

class supervisor {
 public:
  // `reload` reads the configuration again on SIGHUP (empty: only the log is reopened).
  supervisor(net::io_context& io, const daemon_parts& parts, std::function<config()> reload);

  // Starts the systemd notifier and waits for the signals; the shutdown ends with every part
  // stopped, so that io.run() returns.
  void start();

 private:
  void wait_for_hangup();
  void reload_config();
  awaitable<void> notify_systemd();
  // Stops accepting, refuses new LOCKs, ends waits and KEEP locks, lets requests in flight and
  // releases finish (up to shutdown_timeout_ms), writes every pending reply, then stops.
  void begin_shutdown(int signal);
  awaitable<void> finish_shutdown(clock_type::time_point deadline);

  net::io_context& io_;
  daemon_parts parts_;
  std::function<config()> reload_;
  net::signal_set signals_;
  net::signal_set hangups_;
};

} // namespace redlockd
