#include "redis_fleet.hpp"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <netinet/in.h>
#include <stdexcept>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

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

redis_reply run_plain(std::uint16_t port, const std::vector<std::string>& args,
                      std::chrono::milliseconds timeout, const std::string& password) {
  auto ctx = connect(port, timeout);
  if (!password.empty()) {
    reply_ptr auth(static_cast<redisReply*>(
        redisCommand(ctx.get(), "AUTH %b", password.data(), password.size())));
    if (!auth || auth->type == REDIS_REPLY_ERROR) {
      throw std::runtime_error("redis 127.0.0.1:" + std::to_string(port) + ": AUTH failed");
    }
  }
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

// hiredis 0.14 has no TLS: the command is formatted and the reply parsed by hiredis, the bytes
// travel over a tls_socket.
redis_reply run_tls(std::uint16_t port, const std::vector<std::string>& args,
                    std::chrono::milliseconds timeout, const tls_client_files& files,
                    const std::string& password) {
  const auto deadline = clock_type::now() + timeout;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_fd{fd};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw std::runtime_error("redis 127.0.0.1:" + std::to_string(port) + ": connect failed");
  }
  tls_socket tls(fd, files, deadline);
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto format = [](std::vector<const char*> words, const std::vector<std::size_t>& sizes) {
    char* formatted = nullptr;
    const int length = redisFormatCommandArgv(&formatted, static_cast<int>(words.size()),
                                              words.data(), sizes.data());
    std::string command(formatted, static_cast<std::size_t>(length));
    redisFreeCommand(formatted);
    return command;
  };
  // With a password, AUTH goes first in the same write; its reply is checked before the other.
  std::size_t replies_to_skip = 0;
  std::string command;
  if (!password.empty()) {
    command = format({"AUTH", password.c_str()}, {4, password.size()});
    replies_to_skip = 1;
  }
  command += format(argv, lens);
  tls.write(command, deadline);
  std::unique_ptr<redisReader, decltype(&redisReaderFree)> reader(redisReaderCreate(),
                                                                  &redisReaderFree);
  std::string received;
  for (;;) {
    void* reply = nullptr;
    if (redisReaderGetReply(reader.get(), &reply) != REDIS_OK) {
      throw std::runtime_error("redis 127.0.0.1:" + std::to_string(port) + ": bad reply");
    }
    if (reply != nullptr) {
      reply_ptr owned(static_cast<redisReply*>(reply));
      if (replies_to_skip > 0) {
        --replies_to_skip;
        if (owned->type == REDIS_REPLY_ERROR) {
          throw std::runtime_error("redis 127.0.0.1:" + std::to_string(port) + ": AUTH failed");
        }
        continue;
      }
      return convert(owned.get());
    }
    received.clear();
    if (tls.read(received, deadline) != tls_socket::result::data) {
      throw std::runtime_error("redis 127.0.0.1:" + std::to_string(port) + ": no reply over TLS");
    }
    redisReaderFeed(reader.get(), received.data(), received.size());
  }
}

} // namespace

redis_reply redis_fleet::run_on(std::uint16_t port, const std::vector<std::string>& args,
                                std::chrono::milliseconds timeout) const {
  return tls_ ? run_tls(port, args, timeout, tls_->test_client, helper_password_)
              : run_plain(port, args, timeout, helper_password_);
}

redis_fleet::redis_fleet(std::size_t count, std::vector<std::string> extra_args,
                         std::string helper_password)
    : redis_fleet(count, std::nullopt, std::move(extra_args), std::move(helper_password)) {}

redis_fleet::redis_fleet(std::size_t count, std::optional<fleet_tls> tls)
    : redis_fleet(count, std::move(tls), {}, {}) {}

redis_fleet::redis_fleet(std::size_t count, const launch_prefix_function& launch_prefix)
    : redis_fleet(count, std::nullopt, {}, {}, launch_prefix) {}

redis_fleet::redis_fleet(std::size_t count, std::optional<fleet_tls> tls,
                         std::vector<std::string> extra_args, std::string helper_password,
                         const launch_prefix_function& launch_prefix)
    : tls_(std::move(tls)), dir_("redlockd-fleet"), extra_args_(std::move(extra_args)),
      helper_password_(std::move(helper_password)) {
  for (std::size_t i = 0; i < count; ++i) {
    auto n = std::make_unique<node>();
    if (launch_prefix) {
      n->launch_prefix = launch_prefix(i);
    }
    if (tls_) {
      n->cert_file = tls_->cert_file;
      n->key_file = tls_->key_file;
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
    std::vector<std::string> args{"--port",
                                  std::to_string(n.port),
                                  "--bind",
                                  "127.0.0.1",
                                  "--save",
                                  "",
                                  "--appendonly",
                                  "no",
                                  "--protected-mode",
                                  "no",
                                  "--daemonize",
                                  "no",
                                  "--dir",
                                  n.dir};
    if (tls_) {
      args[1] = "0"; // no plaintext port at all
      args.insert(args.end(), {"--tls-port", std::to_string(n.port), "--tls-cert-file", n.cert_file,
                               "--tls-key-file", n.key_file, "--tls-ca-cert-file", tls_->ca_file,
                               "--tls-auth-clients", tls_->require_client_cert ? "yes" : "no"});
    }
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    // Under a launch prefix the first word of the prefix is what runs.
    std::vector<std::string> command = n.launch_prefix;
    command.push_back(REDIS_SERVER_BINARY);
    command.insert(command.end(), args.begin(), args.end());
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

void redis_fleet::use_certificate(std::size_t i, const std::string& cert_file,
                                  const std::string& key_file) {
  auto& n = *nodes_.at(i);
  n.cert_file = cert_file;
  n.key_file = key_file;
  restart(i);
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
