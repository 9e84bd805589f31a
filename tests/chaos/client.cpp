// A chaos client process: contends for the resources through one daemon and, holding a lock,
// does read-sleep-write on the fenced register. Every operation goes to its history file as one
// JSON line, written and flushed when it completes.
#include "client.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include "history.hpp"
#include "line_client.hpp"

namespace redlockd::chaos {
namespace {

using namespace std::chrono_literals;

// A blocking line client over the register's unix socket.
class register_client {
 public:
  explicit register_client(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), std::min(path.size() + 1, sizeof(addr.sun_path)));
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
      throw std::runtime_error("cannot reach the register at " + path + ": " +
                               std::strerror(errno));
  }
  ~register_client() { ::close(fd_); }
  register_client(const register_client&) = delete;
  register_client& operator=(const register_client&) = delete;

  std::string request(const std::string& line) {
    const std::string out = line + "\n";
    std::size_t sent = 0;
    while (sent < out.size()) {
      const ssize_t n = ::write(fd_, out.data() + sent, out.size() - sent);
      if (n <= 0)
        throw std::runtime_error("register write failed");
      sent += static_cast<std::size_t>(n);
    }
    for (;;) {
      if (const auto eol = input_.find('\n'); eol != std::string::npos) {
        std::string reply = input_.substr(0, eol);
        input_.erase(0, eol + 1);
        return reply;
      }
      char buffer[65536];
      const ssize_t n = ::read(fd_, buffer, sizeof(buffer));
      if (n <= 0)
        throw std::runtime_error("register closed");
      input_.append(buffer, static_cast<std::size_t>(n));
    }
  }

 private:
  int fd_ = -1;
  std::string input_;
};

class history_writer {
 public:
  explicit history_writer(const std::string& path) : out_(path, std::ios::app) {}
  void record(const operation& op) {
    out_ << to_json(op).dump() << '\n';
    out_.flush();
  }

 private:
  std::ofstream out_;
};

} // namespace

int run_client(const client_options& options) {
  std::mt19937_64 random(std::random_device{}());
  auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(random);
  };
  const bool keep = options.mode == "keep";
  const bool wait = options.mode == "wait";
  const bool extend = options.mode == "extend";
  const bool shared = options.mode == "shared";
  const bool permit = options.mode == "permit";
  const bool set = options.mode == "set";
  if (!keep && !wait && !extend && !shared && !permit && !set && options.mode != "lease")
    throw std::runtime_error("unknown client mode " + options.mode);
  if (set && options.resources.size() < 2)
    throw std::runtime_error("a set client needs at least two resources");
  // The history's name for how this client holds its locks.
  const std::string hold_mode = shared ? "shared" : permit ? "permit" : set ? "set" : "exclusive";
  history_writer history(options.history_file);
  register_client store(options.register_socket);
  std::optional<test::line_client> daemon;
  std::uint64_t connection = 0; // which connection `daemon` is: a KEEP lock lives on one
  // LOST lines not yet consumed, with when they were read: the client reads its connection
  // whenever it waits, so that is within a few ms of when the daemon wrote them.
  std::vector<std::pair<std::string, std::int64_t>> pushes;
  std::uint64_t sequence = 0;

  auto base = [&](const std::string& kind, const std::string& resource) {
    operation op;
    op.process = options.name;
    op.kind = kind;
    op.resource = resource;
    op.daemon = options.daemon_index;
    op.invoke_ns = monotonic_ns();
    op.mode = hold_mode;
    return op;
  };
  const auto reply_timeout = std::chrono::milliseconds(options.reply_timeout_ms);
  // One request to the daemon; std::nullopt (and a dropped connection) when it broke. LOST
  // pushes met before the reply are kept in `pushes`.
  auto ask = [&](const std::string& line, std::chrono::milliseconds timeout,
                 std::string& error) -> std::optional<std::string> {
    try {
      if (!daemon) {
        daemon.emplace(options.daemon_port, timeout);
        ++connection;
      }
      daemon->set_timeout(timeout);
      daemon->send(line + "\n");
      for (;;) {
        std::string reply = daemon->read_line();
        if (reply.rfind("LOST ", 0) == 0) {
          pushes.emplace_back(std::move(reply), monotonic_ns());
          continue;
        }
        return reply;
      }
    } catch (const std::exception& e) {
      error = e.what();
      daemon.reset();
      return std::nullopt;
    }
  };
  // Sleeps `length`, collecting LOST pushes meanwhile (a KEEP holder watches its connection).
  auto watch = [&](std::chrono::milliseconds length) {
    const auto until = std::chrono::steady_clock::now() + length;
    while (std::chrono::steady_clock::now() < until) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (!daemon) {
        std::this_thread::sleep_for(left);
        return;
      }
      const auto before = std::chrono::steady_clock::now();
      if (const auto line = daemon->try_read_line(std::max(left, std::chrono::milliseconds(1)))) {
        if (line->rfind("LOST ", 0) != 0)
          throw std::runtime_error("unexpected line from the daemon: " + *line);
        pushes.emplace_back(*line, monotonic_ns());
      } else if (std::chrono::steady_clock::now() - before < 5ms) {
        std::this_thread::sleep_for(10ms); // closed: the next request will say so
      }
    }
  };
  // The LOST push for this lock and when it was read (consumed), if the daemon sent one.
  auto take_lost =
      [&](const std::string& resource,
          const std::string& owner) -> std::optional<std::pair<std::string, std::int64_t>> {
    const std::string wanted = "LOST " + resource + " " + owner;
    for (auto it = pushes.begin(); it != pushes.end(); ++it)
      if (it->first == wanted) {
        auto found = *it;
        pushes.erase(it);
        return found;
      }
    return std::nullopt;
  };
  // The holder learnt at `when_ns` that its KEEP lock is gone.
  auto record_lost = [&](const std::string& resource, const std::string& owner,
                         const std::string& why, std::int64_t when_ns) {
    operation lost = base("lost", resource);
    lost.owner = owner;
    lost.invoke_ns = when_ns;
    lost.complete_ns = when_ns;
    lost.outcome = "ok";
    lost.reply = why;
    history.record(lost);
  };

  // READ the register with the fence (SREAD for a shared holder): the elements read, or
  // std::nullopt when refused.
  auto read_register = [&](const std::string& resource,
                           std::uint64_t fence) -> std::optional<std::string> {
    operation read = base("read", resource);
    read.fence = fence;
    const std::string reply = store.request((shared ? "SREAD " : "READ ") + resource + " " +
                                            std::to_string(fence) + " " + options.name);
    read.complete_ns = monotonic_ns();
    read.reply = reply.substr(0, 80);
    read.outcome = reply.rfind("OK ", 0) == 0 ? "ok" : "fail";
    history.record(read);
    if (read.outcome != "ok")
      return std::nullopt;
    return reply.substr(3);
  };
  // WRITE what was read plus one new element.
  auto write_register = [&](const std::string& resource, std::uint64_t fence,
                            std::string elements) {
    const std::string element = options.name + "-" + std::to_string(++sequence);
    elements = elements == "-" ? element : elements + "," + element;
    operation write = base("write", resource);
    write.fence = fence;
    write.element = element;
    const std::string reply =
        store.request("WRITE " + resource + " " + std::to_string(fence) + " " + elements);
    write.complete_ns = monotonic_ns();
    write.reply = reply;
    write.outcome = reply == "OK" ? "ok" : "fail";
    history.record(write);
  };
  auto hold = [&] {
    return std::chrono::milliseconds(uniform(options.hold_min_ms, options.hold_max_ms));
  };

  auto stopped = [&] {
    return monotonic_ns() >= options.until_ns ||
           (!options.stop_file.empty() && std::filesystem::exists(options.stop_file));
  };
  auto pick = [&](const std::vector<std::string>& from) {
    return from[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(from.size()) - 1))];
  };
  // A set's members in a random order: the daemon must take them whatever the order.
  auto shuffled = [&](std::vector<std::string> names) {
    std::shuffle(names.begin(), names.end(), random);
    return names;
  };
  auto joined = [](const std::vector<std::string>& names, const std::string& separator) {
    std::string out;
    for (const auto& name : names)
      out += (out.empty() ? "" : separator) + name;
    return out;
  };
  while (!stopped()) {
    std::vector<std::string> members; // set: 2 or 3 resources, in the order the MLOCK names them
    std::string resource;
    std::string request;
    if (set) {
      const auto count = uniform(
          2, std::min<std::int64_t>(3, static_cast<std::int64_t>(options.resources.size())));
      members = shuffled(options.resources);
      members.resize(static_cast<std::size_t>(count));
      resource = joined(members, "+");
      request = "MLOCK " + std::to_string(count) + " " + joined(members, " ") + " " +
                std::to_string(options.ttl_ms);
    } else {
      resource = pick(options.resources);
      request = "LOCK " + resource + " " + std::to_string(options.ttl_ms);
      if (shared)
        request += " SHARED";
      if (permit)
        request += " PERMITS " + std::to_string(options.permits);
    }
    operation lock = base("lock", resource);
    lock.keep = keep;
    lock.ttl_ms = options.ttl_ms;
    lock.members = members;
    if (permit)
      lock.permits = options.permits;
    std::string error;
    auto timeout = reply_timeout;
    if (wait || (set && uniform(0, 1) == 0)) {
      const auto wait_ms = uniform(500, 4000);
      request += " WAIT " + std::to_string(wait_ms);
      timeout += std::chrono::milliseconds(wait_ms);
    }
    if (keep)
      request += " KEEP";
    const auto reply = ask(request, timeout, error);
    lock.complete_ns = monotonic_ns();
    const auto grant = reply ? test::parse_lock_ok(*reply) : std::nullopt;
    if (!reply) {
      lock.outcome = "info"; // it may have been granted: nobody will ever know its owner
      lock.reply = error;
    } else if (grant) {
      lock.outcome = "ok";
      lock.reply = *reply;
      lock.owner = grant->owner;
      lock.fence = grant->fence;
      lock.validity_ms = grant->validity_ms;
      if (permit) // the owner's characters 6 to 8 are the slot, in hex
        lock.slot = std::stoi(grant->owner.substr(5, 3), nullptr, 16);
    } else {
      lock.outcome = "fail";
      lock.reply = *reply;
    }
    history.record(lock);
    if (!grant) {
      std::this_thread::sleep_for(std::chrono::milliseconds(uniform(20, 120)));
      if (!reply) // the daemon is down or paused: do not spin
        std::this_thread::sleep_for(200ms);
      continue;
    }

    if (keep) {
      // Rounds of read-sleep-ping-write until the hold is over, as long as the lock lasts.
      const auto hold_until = std::chrono::steady_clock::now() + hold();
      const auto lock_connection = connection;
      bool lost = false;
      while (!lost && std::chrono::steady_clock::now() < hold_until && !stopped()) {
        const auto elements = read_register(resource, grant->fence);
        if (!elements)
          break;
        watch(std::chrono::milliseconds(uniform(300, 900)));
        // A PONG with no LOST before it: the daemon was renewing the lock when it answered.
        operation ping = base("ping", resource);
        ping.owner = grant->owner;
        const auto pong = ask("PING", reply_timeout, error);
        ping.complete_ns = monotonic_ns();
        ping.reply = pong.value_or(error);
        ping.outcome = !pong ? "info" : *pong == "PONG" ? "ok" : "fail";
        if (const auto push = take_lost(resource, grant->owner)) {
          ping.outcome = "fail"; // the LOST came first
          history.record(ping);
          record_lost(resource, grant->owner, push->first, push->second);
          lost = true;
        } else if (!pong || *pong != "PONG" || connection != lock_connection) {
          history.record(ping);
          // The connection may have broken any time since the last PONG: count it from the
          // PING (the window ends earlier anyway, at the last PONG + ttl/4).
          record_lost(resource, grant->owner, "connection: " + ping.reply, ping.invoke_ns);
          daemon.reset(); // the daemon releases a KEEP lock whose connection closed
          lost = true;
        } else {
          history.record(ping);
          write_register(resource, grant->fence, *elements);
        }
      }
    } else if (extend) {
      for (int round = 0; round < 2; ++round) {
        const auto elements = read_register(resource, grant->fence);
        if (!elements)
          break;
        std::this_thread::sleep_for(hold());
        operation ext = base("extend", resource);
        ext.owner = grant->owner;
        ext.ttl_ms = options.ttl_ms;
        const auto extended =
            ask("EXTEND " + resource + " " + grant->owner + " " + std::to_string(options.ttl_ms),
                reply_timeout, error);
        ext.complete_ns = monotonic_ns();
        ext.reply = extended.value_or(error);
        const auto words = test::split_words(ext.reply);
        const auto validity =
            words.size() == 2 && words[0] == "OK" ? test::parse_int(words[1]) : std::nullopt;
        ext.outcome = !extended ? "info" : validity ? "ok" : "fail";
        ext.validity_ms = validity.value_or(0);
        history.record(ext);
        if (!validity)
          break; // not sure of the lock any more: no write
        write_register(resource, grant->fence, *elements);
      }
    } else if (shared) {
      // A reader reads, twice: a writer granted inside its window would make the second stale.
      if (read_register(resource, grant->fence)) {
        std::this_thread::sleep_for(hold());
        read_register(resource, grant->fence);
      }
    } else if (permit) {
      // The permit's slot is a mutex: its own register, read-sleep-write as under a lock.
      const std::string lane = resource + "#" + std::to_string(lock.slot);
      if (const auto elements = read_register(lane, grant->fence)) {
        std::this_thread::sleep_for(hold());
        write_register(lane, grant->fence, *elements);
      }
    } else if (set) {
      // Every member's register, with the set's one fence.
      std::vector<std::pair<std::string, std::string>> read;
      for (const auto& member : members)
        if (const auto elements = read_register(member, grant->fence))
          read.emplace_back(member, *elements);
      if (!read.empty()) {
        std::this_thread::sleep_for(hold());
        for (const auto& [member, elements] : read)
          write_register(member, grant->fence, elements);
      }
    } else {
      // Read-sleep-write under the lock, the fence travelling with both accesses.
      if (const auto elements = read_register(resource, grant->fence)) {
        std::this_thread::sleep_for(hold());
        write_register(resource, grant->fence, *elements);
      }
    }

    operation unlock = base("unlock", resource);
    unlock.owner = grant->owner;
    const std::string release = set ? "MUNLOCK " + std::to_string(members.size()) + " " +
                                          joined(shuffled(members), " ") + " " + grant->owner
                                    : "UNLOCK " + resource + " " + grant->owner;
    const auto unlock_reply = ask(release, reply_timeout, error);
    unlock.complete_ns = monotonic_ns();
    unlock.reply = unlock_reply.value_or(error);
    unlock.outcome = !unlock_reply ? "info" : *unlock_reply == "OK" ? "ok" : "fail";
    history.record(unlock);
    if (keep)
      if (const auto push = take_lost(resource, grant->owner)) // came before the UNLOCK's reply
        record_lost(resource, grant->owner, push->first, push->second);
    pushes.clear(); // LOSTs of locks this client no longer holds
    // A reader or a permit holder that asked again at once would take its own place back before
    // any other contender retried (they sleep between refusals): readers would starve writers,
    // and a semaphore split between two daemons would stay on one side.
    if (shared || permit)
      std::this_thread::sleep_for(std::chrono::milliseconds(uniform(100, 500)));
  }
  return 0;
}

std::optional<client_options> parse_client_options(const std::vector<std::string>& args) {
  client_options o;
  for (std::size_t i = 0; i + 1 < args.size(); i += 2) {
    const std::string& key = args[i];
    const std::string& value = args[i + 1];
    if (key == "--name")
      o.name = value;
    else if (key == "--mode")
      o.mode = value;
    else if (key == "--daemon-index")
      o.daemon_index = std::stoi(value);
    else if (key == "--daemon-port")
      o.daemon_port = static_cast<std::uint16_t>(std::stoi(value));
    else if (key == "--register")
      o.register_socket = value;
    else if (key == "--history")
      o.history_file = value;
    else if (key == "--ttl-ms")
      o.ttl_ms = std::stoll(value);
    else if (key == "--hold-ms") {
      const auto dash = value.find('-');
      o.hold_min_ms = std::stoll(value.substr(0, dash));
      o.hold_max_ms = std::stoll(value.substr(dash + 1));
    } else if (key == "--until-ns")
      o.until_ns = std::stoll(value);
    else if (key == "--stop-file")
      o.stop_file = value;
    else if (key == "--reply-timeout-ms")
      o.reply_timeout_ms = std::stoll(value);
    else if (key == "--permits")
      o.permits = std::stoi(value);
    else if (key == "--resources") {
      std::istringstream in(value);
      std::string r;
      while (std::getline(in, r, ','))
        o.resources.push_back(r);
    } else
      return std::nullopt;
  }
  if (o.name.empty() || o.daemon_port == 0 || o.resources.empty() || o.history_file.empty())
    return std::nullopt;
  return o;
}

std::vector<std::string> client_options::to_args() const {
  std::string joined;
  for (const auto& r : resources)
    joined += (joined.empty() ? "" : ",") + r;
  return {"--stop-file",
          stop_file,
          "--name",
          name,
          "--mode",
          mode,
          "--daemon-index",
          std::to_string(daemon_index),
          "--daemon-port",
          std::to_string(daemon_port),
          "--register",
          register_socket,
          "--history",
          history_file,
          "--ttl-ms",
          std::to_string(ttl_ms),
          "--hold-ms",
          std::to_string(hold_min_ms) + "-" + std::to_string(hold_max_ms),
          "--until-ns",
          std::to_string(until_ns),
          "--reply-timeout-ms",
          std::to_string(reply_timeout_ms),
          "--permits",
          std::to_string(permits),
          "--resources",
          joined};
}

} // namespace redlockd::chaos
