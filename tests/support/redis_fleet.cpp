#include "redis_fleet.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <stdexcept>
#include <thread>

#ifndef REDIS_SERVER_BINARY
#define REDIS_SERVER_BINARY "redis-server"
#endif

namespace redlockd::test {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

struct context_deleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
using context_ptr = std::unique_ptr<redisContext, context_deleter>;

struct reply_deleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_deleter>;

context_ptr connect(std::uint16_t port, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  context_ptr ctx(redisConnectWithTimeout("127.0.0.1", port, tv));
  if (!ctx) {
    throw std::runtime_error("redis: cannot allocate a context");
  }
  if (ctx->err != 0) {
    throw std::runtime_error("redis 127.0.0.1:" + std::to_string(port) + ": " + ctx->errstr);
  }
  redisSetTimeout(ctx.get(), tv);
  return ctx;
}

redis_reply convert(const redisReply* r) {
  redis_reply out;
  switch (r->type) {
  case REDIS_REPLY_STRING:
    out.type = redis_reply::kind::string;
    out.str.assign(r->str, r->len);
    break;
  case REDIS_REPLY_STATUS:
    out.type = redis_reply::kind::status;
    out.str.assign(r->str, r->len);
    break;
  case REDIS_REPLY_ERROR:
    out.type = redis_reply::kind::error;
    out.str.assign(r->str, r->len);
    break;
  case REDIS_REPLY_INTEGER:
    out.type = redis_reply::kind::integer;
    out.integer = r->integer;
    break;
  case REDIS_REPLY_ARRAY:
    out.type = redis_reply::kind::array;
    for (std::size_t k = 0; k < r->elements; ++k) {
      out.elements.push_back(convert(r->element[k]));
    }
    break;
  default:
    out.type = redis_reply::kind::nil;
    break;
  }
  return out;
}

redis_reply run_on(std::uint16_t port, const std::vector<std::string>& args,
                   std::chrono::milliseconds timeout) {
  auto ctx = connect(port, timeout);
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  reply_ptr reply(static_cast<redisReply*>(
      redisCommandArgv(ctx.get(), static_cast<int>(args.size()), argv.data(), lens.data())));
  if (!reply) {
    throw std::runtime_error("redis 127.0.0.1:" + std::to_string(port) + ": " + ctx->errstr);
  }
  return convert(reply.get());
}

} // namespace

redis_fleet::redis_fleet(std::size_t count) : redis_fleet(count, nullptr) {}

redis_fleet::redis_fleet(std::size_t count,
                         const std::function<std::vector<std::string>(std::size_t)>& launch_prefix)
    : dir_("redlockd-fleet") {
  for (std::size_t i = 0; i < count; ++i) {
    auto n = std::make_unique<node>();
    if (launch_prefix) {
      n->launch_prefix = launch_prefix(i);
    }
    n->dir = (dir_.path() / ("node" + std::to_string(i))).string();
    n->log = (dir_.path() / ("node" + std::to_string(i) + ".log")).string();
    fs::create_directories(n->dir);
    nodes_.push_back(std::move(n));
  }
  for (auto& n : nodes_) {
    start(*n, false);
  }
}

redis_fleet::~redis_fleet() {
  for (auto& n : nodes_) {
    n->process.kill();
  }
}

bool redis_fleet::answers_ping(std::uint16_t port) const {
  try {
    const auto r = run_on(port, {"PING"}, std::chrono::milliseconds(200));
    return r.type == redis_reply::kind::status && r.str == "PONG";
  } catch (const std::exception&) {
    return false;
  }
}

void redis_fleet::start(node& n, bool fixed_port) {
  // A port picked by free_loopback_port() may be taken by someone else before redis binds it:
  // try a few ports unless the port is fixed (restart).
  const int attempts = fixed_port ? 1 : 5;
  std::string last_error;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (!fixed_port) {
      n.port = free_loopback_port();
    }
    std::vector<std::string> command = n.launch_prefix;
    command.insert(command.end(), {REDIS_SERVER_BINARY, "--port", std::to_string(n.port), "--bind",
                                   "127.0.0.1", "--save", "", "--appendonly", "no",
                                   "--protected-mode", "no", "--daemonize", "no", "--dir", n.dir});
    const std::string binary = command.front();
    command.erase(command.begin());
    n.process = child_process(binary, command, n.log);
    const auto deadline = clock_type::now() + std::chrono::seconds(10);
    while (clock_type::now() < deadline) {
      if (answers_ping(n.port)) {
        n.alive = true;
        return;
      }
      if (!n.process.running()) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    n.process.kill();
    last_error = file_tail(n.log, 2000);
  }
  throw std::runtime_error("redis-server on port " + std::to_string(n.port) + " did not start:\n" +
                           last_error);
}

std::uint16_t redis_fleet::port(std::size_t i) const {
  return nodes_.at(i)->port;
}

std::string redis_fleet::address(std::size_t i) const {
  return "127.0.0.1:" + std::to_string(port(i));
}

std::vector<std::string> redis_fleet::addresses() const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    out.push_back(address(i));
  }
  return out;
}

bool redis_fleet::alive(std::size_t i) const {
  return nodes_.at(i)->alive;
}

void redis_fleet::kill(std::size_t i) {
  auto& n = *nodes_.at(i);
  n.process.kill();
  n.alive = false;
}

void redis_fleet::restart(std::size_t i) {
  auto& n = *nodes_.at(i);
  n.process.kill();
  n.alive = false;
  start(n, true);
}

void redis_fleet::pause(std::size_t i) {
  nodes_.at(i)->process.signal(SIGSTOP);
}

void redis_fleet::resume(std::size_t i) {
  nodes_.at(i)->process.signal(SIGCONT);
}

redis_reply redis_fleet::command(std::size_t i, const std::vector<std::string>& args) const {
  return run_on(port(i), args, std::chrono::milliseconds(1000));
}

std::vector<std::string> redis_fleet::keys(std::size_t i, const std::string& pattern) const {
  const auto r = command(i, {"KEYS", pattern});
  if (r.type != redis_reply::kind::array) {
    throw std::runtime_error("KEYS: unexpected reply " + r.str);
  }
  std::vector<std::string> out;
  for (const auto& e : r.elements) {
    out.push_back(e.str);
  }
  std::sort(out.begin(), out.end());
  return out;
}

long long redis_fleet::pttl(std::size_t i, const std::string& key) const {
  const auto r = command(i, {"PTTL", key});
  if (r.type != redis_reply::kind::integer) {
    throw std::runtime_error("PTTL: unexpected reply " + r.str);
  }
  return r.integer;
}

std::optional<std::string> redis_fleet::get(std::size_t i, const std::string& key) const {
  const auto r = command(i, {"GET", key});
  if (r.type == redis_reply::kind::nil) {
    return std::nullopt;
  }
  if (r.type != redis_reply::kind::string) {
    throw std::runtime_error("GET: unexpected reply " + r.str);
  }
  return r.str;
}

bool redis_fleet::set_nx_px(std::size_t i, const std::string& key, const std::string& value,
                            long long ttl_ms) const {
  const auto r = command(i, {"SET", key, value, "NX", "PX", std::to_string(ttl_ms)});
  if (r.is_error()) {
    throw std::runtime_error("SET: " + r.str);
  }
  return r.type == redis_reply::kind::status && r.str == "OK";
}

} // namespace redlockd::test
