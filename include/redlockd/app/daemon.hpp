// The daemon: one io_context on one thread owning the Redis links, the engine and the listener.
#pragma once

#include "redlockd/config/config.hpp"

#include <functional>
#include <memory>

namespace spdlog {
class logger;
}

namespace redlockd {

class daemon {
 public:
  // `reload` reads the configuration again on SIGHUP (its log settings are applied).
  daemon(config cfg, std::shared_ptr<spdlog::logger> log, std::function<config()> reload = {});
  ~daemon();
  daemon(const daemon&) = delete;
  daemon& operator=(const daemon&) = delete;

  // Binds the listener (throws if it cannot), serves until SIGINT or SIGTERM, returns the exit
  // code.
  int run();

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace redlockd
