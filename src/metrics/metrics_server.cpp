#include "redlockd/metrics/metrics_server.hpp"

#include "redlockd/metrics/metrics.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include <spdlog/spdlog.h>

#include <dirent.h>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <unistd.h>

namespace redlockd {
namespace {

namespace http = boost::beast::http;

// A scraper that stalls must not hold a socket for long.
constexpr auto request_timeout = std::chrono::seconds(10);

// The status page and its JSON: no script may run in them, no other site may frame them, and
// nothing keeps a copy.
void status_headers(http::response<http::string_body>& response, const char* content_type) {
  response.result(http::status::ok);
  response.set(http::field::content_type, content_type);
  response.set(http::field::cache_control, "no-store");
  response.set("Content-Security-Policy",
               "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; "
               "base-uri 'none'; form-action 'none'");
  response.set("X-Content-Type-Options", "nosniff");
  response.set("Referrer-Policy", "no-referrer");
}

// Seconds since the epoch at which the machine booted (btime in /proc/stat); 0 if unknown.
double boot_time() {
  std::ifstream in("/proc/stat");
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime" && in >> value)
      return value;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

} // namespace

process_metrics read_process_metrics() {
  process_metrics p;
  std::ifstream in("/proc/self/stat");
  std::string stat;
  if (!std::getline(in, stat))
    return p;
  // The command name (field 2) is in parentheses and may hold spaces: fields 3.. follow the
  // last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos)
    return p;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0, starttime = 0, vsize = 0, rss_pages = 0;
  // fields(3) is the state; utime is field 14, stime 15, starttime 22, vsize 23, rss 24.
  for (int n = 3; n <= 24 && fields >> field; ++n) {
    if (n == 14)
      utime = std::stod(field);
    else if (n == 15)
      stime = std::stod(field);
    else if (n == 22)
      starttime = std::stod(field);
    else if (n == 23)
      vsize = std::stod(field);
    else if (n == 24)
      rss_pages = std::stod(field);
  }
  if (!fields)
    return p;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  const double booted = boot_time();
  if (ticks <= 0 || page <= 0 || booted <= 0)
    return p;
  p.cpu_seconds = (utime + stime) / ticks;
  p.start_time_seconds = booted + starttime / ticks;
  p.virtual_bytes = vsize;
  p.resident_bytes = rss_pages * page;
  if (DIR* dir = opendir("/proc/self/fd")) {
    std::size_t entries = 0;
    while (const dirent* entry = readdir(dir))
      if (entry->d_name[0] != '.')
        ++entries;
    closedir(dir);
    p.open_fds = static_cast<double>(entries > 0 ? entries - 1 : 0); // not the one reading it
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0)
    p.max_fds = limit.rlim_cur == RLIM_INFINITY ? -1 : static_cast<double>(limit.rlim_cur);
  p.valid = true;
  return p;
}

metrics_server::metrics_server(net::io_context& io, handlers h, std::shared_ptr<spdlog::logger> log)
    : io_(io), handlers_(std::move(h)), log_(std::move(log)), acceptor_(io) {}

metrics_server::~metrics_server() = default;

void metrics_server::start(const endpoint& address) {
  open_listener(acceptor_, address);
  log_->info("metrics on http://{0}/metrics and /healthz, status page on http://{0}/",
             address.to_string());
  net::co_spawn(io_, accept_loop(), log_failure{log_, "the metrics accept loop"});
}

void metrics_server::stop() {
  error_code_t ignored;
  acceptor_.close(ignored);
}

awaitable<void> metrics_server::accept_loop() {
  while (acceptor_.is_open()) {
    error_code_t ec;
    tcp::socket socket =
        co_await acceptor_.async_accept(net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      if (!acceptor_.is_open())
        co_return;
      continue;
    }
    net::co_spawn(io_, serve(std::move(socket)), log_failure{log_, "a metrics request"});
  }
}

awaitable<void> metrics_server::serve(tcp::socket socket) {
  boost::beast::tcp_stream stream(std::move(socket));
  boost::beast::flat_buffer buffer;
  for (;;) {
    http::request<http::string_body> request;
    stream.expires_after(request_timeout);
    error_code_t ec;
    co_await http::async_read(stream, buffer, request, net::redirect_error(net::use_awaitable, ec));
    if (ec)
      co_return;
    http::response<http::string_body> response;
    response.version(request.version());
    response.keep_alive(request.keep_alive());
    response.set(http::field::server, "redlockd");
    const auto target = request.target();
    if (request.method() != http::verb::get) {
      response.result(http::status::method_not_allowed);
      response.set(http::field::allow, "GET");
      response.set(http::field::content_type, "text/plain; charset=utf-8");
      response.body() = "only GET\n";
    } else if (target == "/metrics") {
      response.result(http::status::ok);
      response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      response.body() = handlers_.metrics();
    } else if (target == "/") {
      status_headers(response, "text/html; charset=utf-8");
      response.body() = handlers_.status_page();
    } else if (target == "/v1/status") {
      status_headers(response, "application/json");
      response.body() = handlers_.status_json();
    } else if (target == "/healthz") {
      const bool healthy = handlers_.healthy();
      response.result(healthy ? http::status::ok : http::status::service_unavailable);
      response.set(http::field::content_type, "text/plain; charset=utf-8");
      response.body() = healthy ? "ok: a quorum of masters is usable\n"
                                : "unavailable: fewer than a quorum of masters is usable\n";
    } else {
      response.result(http::status::not_found);
      response.set(http::field::content_type, "text/plain; charset=utf-8");
      response.body() = "try / (status page), /v1/status, /metrics or /healthz\n";
    }
    response.prepare_payload();
    co_await http::async_write(stream, response, net::redirect_error(net::use_awaitable, ec));
    if (ec || !response.keep_alive())
      co_return;
  }
}

} // namespace redlockd
