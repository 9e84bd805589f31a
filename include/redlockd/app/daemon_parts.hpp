// The daemon's parts, by reference, as the status reports and the supervisor see them. The
// daemon (app/daemon.cpp) owns them all; this is only a view handed to its helpers.
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/lock/lock_engine.hpp"

#include <memory>

namespace spdlog {
class logger;
}

namespace redlockd {

class fleet;
class status_reader;
class listener;
class metrics_server;
struct session_context;

struct daemon_parts {
  config& cfg; // SIGHUP changes its log settings and secrets
  std::shared_ptr<spdlog::logger> log;
  fleet& masters;
  lock_engine& engine;
  status_reader& status_reads;
  session_context& context;
  listener& server;
  metrics_server& metrics;
  clock_type::time_point started;
};

} // namespace redlockd
