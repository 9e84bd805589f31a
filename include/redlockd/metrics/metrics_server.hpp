// HTTP listener for /metrics (Prometheus), /healthz, and the status page (/ and /v1/status).
#pragma once

#include "redlockd/config/config.hpp"
#include "redlockd/net/net.hpp"

#include <functional>
#include <memory>
#include <string>

namespace spdlog {
class logger;
}

namespace redlockd {

struct process_metrics;

// This process's CPU time, memory, descriptors and start time from /proc/self (Linux); valid is
// false when /proc cannot be read.
process_metrics read_process_metrics();

class metrics_server {
 public:
  struct handlers {
    std::function<std::string()> metrics;     // the exposition text
    std::function<bool()> healthy;            // a quorum of masters is usable
    std::function<std::string()> status_page; // GET /: HTML
    std::function<std::string()> status_json; // GET /v1/status: the same as JSON
  };

  metrics_server(net::io_context& io, handlers h, std::shared_ptr<spdlog::logger> log);
  ~metrics_server();

  // Binds (throws on failure) and serves until stop().
  void start(const endpoint& address);
  void stop();

 private:
  awaitable<void> accept_loop();
  awaitable<void> serve(tcp::socket socket);

  net::io_context& io_;
  handlers handlers_;
  std::shared_ptr<spdlog::logger> log_;
  tcp::acceptor acceptor_;
};

} // namespace redlockd
