// redlock-bench: load generator for redlockd. Single thread, Boost.Asio.
// Each connection keeps up to -p cycles in flight; a cycle is LOCK <r> <ttl> [WAIT w] then, on OK,
// UNLOCK <r> <owner>. Replies come back in request order, so a FIFO of slots per connection says
// which request a reply answers. Counts only what completes inside the measured window.
// --kind picks the lock family's request instead (protocol 1.1): LOCK ... SHARED, LOCK ...
// PERMITS n, or MLOCK of k distinct resources then MUNLOCK of the same set.
// With several daemon addresses, connection i of each kind goes to address i % n; one process, one
// steady clock, so a hand-over (UNLOCK sent -> the next LOCK OK for that resource) can be timed
// across daemons. An address may be a Unix-domain socket (unix:PATH, the daemon's listen_unix).
// With --masters, the masters' CPU (INFO cpu) over the window is reported per cycle too.
// clang-format off
#include <utility> // before any Asio header: Boost 1.74 misses it in <boost/asio/awaitable.hpp>
// clang-format on

#include <boost/asio.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using stream_socket = net::generic::stream_protocol::socket; // TCP or a Unix-domain socket
using clock_type = std::chrono::steady_clock;

constexpr std::string_view usage = R"(usage: redlock-bench [options]
  -c N             cycling connections (default 50; 0: only hold KEEP locks / waiters)
  -p N             cycles in flight per connection (pipeline depth, default 1)
  -r N             resources r0..r(N-1), drawn uniformly (default 10000)
  -d S             measured seconds (default 10)
  --warmup S       seconds before the window (default 2)
  --ttl MS         lock TTL (default 10000)
  --wait MS        send LOCK ... WAIT MS (default: no WAIT); also times hand-overs: a holder's
                   UNLOCK sent -> the next grant of that resource to a LOCK sent before it
                   (per kind: see bench/README.md; none for shared, where readers never wait)
  --kind K         what a cycle locks (default exclusive): shared (LOCK ... SHARED), permits:N
                   (LOCK ... PERMITS N: one permit of the N-permit semaphore of that name) or
                   multi:K (MLOCK of K distinct resources drawn among -r, then MUNLOCK of them)
  --keep N         hold N KEEP locks on separate connections during the run
  --keep-per-conn N  KEEP locks per connection (default 500; the daemon allows 1000)
  --waiters N      park N waiters (LOCK ... WAIT) behind held locks during the run
  --waiters-per-resource N  (default 500; the daemon allows 1000)
  --idle N         hold N idle connections during the run (each has sent one PING); the daemon
                   must allow N + 1 connections (max_connections), N open files here and there
  --addr HOST:PORT[,HOST:PORT...]  daemon address(es) (default 127.0.0.1:7400); connection i of
                   each kind (cycling, KEEP, waiter, idle) goes to address i % n; unix:PATH is a
                   Unix-domain socket (the daemon's listen_unix)
  --daemon-pid PID[,PID...]  read the daemons' CPU time and RSS from /proc/PID (reported summed;
                   the text output also shows each daemon's CPU)
  --masters HOST:PORT[,HOST:PORT...]  Redis masters whose CPU over the window (INFO cpu:
                   used_cpu_sys + used_cpu_user) is reported, summed, per cycle
  --json           print one JSON line
)";

struct address {
  std::string host, port; // or, for a Unix-domain socket, the path in host and an empty port
  bool is_unix() const { return port.empty(); }
  std::string text() const { return is_unix() ? "unix:" + host : host + ":" + port; }
};

enum class lock_kind { exclusive, shared, permits, multi };

struct options {
  int connections = 50;
  int pipeline = 1;
  std::uint32_t resources = 10000;
  double seconds = 10;
  double warmup = 2;
  std::uint64_t ttl_ms = 10000;
  std::optional<std::uint64_t> wait_ms;
  lock_kind kind = lock_kind::exclusive;
  std::uint32_t kind_count = 1; // permits: the semaphore's n; multi: resources per set
  int keep = 0;
  int keep_per_conn = 500;
  int waiters = 0;
  int waiters_per_resource = 500;
  int idle = 0;
  std::vector<address> addrs{{"127.0.0.1", "7400"}};
  std::vector<int> daemon_pids;
  std::vector<address> masters;
  bool json = false;
};

[[noreturn]] void die(const std::string& message) {
  std::cerr << "redlock-bench: " << message << '\n';
  std::exit(1);
}

// "HOST:PORT" or "unix:PATH".
address parse_address(std::string_view text, const char* what) {
  if (text.rfind("unix:", 0) == 0 && text.size() > 5)
    return {std::string(text.substr(5)), ""};
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == text.size())
    die(std::string(what) + " wants HOST:PORT (or unix:PATH), got '" + std::string(text) + "'");
  return {std::string(text.substr(0, colon)), std::string(text.substr(colon + 1))};
}

template <typename T>
T parse_number(std::string_view text, const char* what) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size())
    die(std::string("bad value for ") + what + ": '" + std::string(text) + "'");
  return value;
}

// "a,b,c" -> {"a", "b", "c"}; empty items are errors.
std::vector<std::string_view> split_list(std::string_view list, const char* what) {
  std::vector<std::string_view> items;
  for (;;) {
    const auto comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    if (item.empty())
      die(std::string("empty item in ") + what);
    items.push_back(item);
    if (comma == std::string_view::npos)
      return items;
    list.remove_prefix(comma + 1);
  }
}

constexpr std::uint32_t max_set_resources = 64; // the daemon's max_resources_per_request default
constexpr std::uint64_t max_timed_permit_slots = std::uint64_t{1} << 22;

const char* kind_name(lock_kind kind) {
  switch (kind) {
  case lock_kind::exclusive:
    return "exclusive";
  case lock_kind::shared:
    return "shared";
  case lock_kind::permits:
    return "permits";
  case lock_kind::multi:
    return "multi";
  }
  return "?";
}

// "exclusive", "shared", "permits:N" or "multi:K".
void parse_kind(std::string_view text, options& opts) {
  const auto colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  const bool counted = name == "permits" || name == "multi";
  if (counted != (colon != std::string_view::npos))
    die("--kind wants exclusive, shared, permits:N or multi:K, got '" + std::string(text) + "'");
  opts.kind_count = counted ? parse_number<std::uint32_t>(text.substr(colon + 1), "--kind") : 1;
  if (name == "exclusive")
    opts.kind = lock_kind::exclusive;
  else if (name == "shared")
    opts.kind = lock_kind::shared;
  else if (name == "permits")
    opts.kind = lock_kind::permits;
  else if (name == "multi")
    opts.kind = lock_kind::multi;
  else
    die("--kind wants exclusive, shared, permits:N or multi:K, got '" + std::string(text) + "'");
}

options parse_options(int argc, char** argv) {
  options opts;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc)
        die(std::string("missing value after ") + std::string(arg));
      return argv[++i];
    };
    if (arg == "-c")
      opts.connections = parse_number<int>(value(), "-c");
    else if (arg == "-p")
      opts.pipeline = parse_number<int>(value(), "-p");
    else if (arg == "-r")
      opts.resources = parse_number<std::uint32_t>(value(), "-r");
    else if (arg == "-d")
      opts.seconds = parse_number<double>(value(), "-d");
    else if (arg == "--warmup")
      opts.warmup = parse_number<double>(value(), "--warmup");
    else if (arg == "--ttl")
      opts.ttl_ms = parse_number<std::uint64_t>(value(), "--ttl");
    else if (arg == "--wait")
      opts.wait_ms = parse_number<std::uint64_t>(value(), "--wait");
    else if (arg == "--kind")
      parse_kind(value(), opts);
    else if (arg == "--keep")
      opts.keep = parse_number<int>(value(), "--keep");
    else if (arg == "--keep-per-conn")
      opts.keep_per_conn = parse_number<int>(value(), "--keep-per-conn");
    else if (arg == "--waiters")
      opts.waiters = parse_number<int>(value(), "--waiters");
    else if (arg == "--waiters-per-resource")
      opts.waiters_per_resource = parse_number<int>(value(), "--waiters-per-resource");
    else if (arg == "--idle")
      opts.idle = parse_number<int>(value(), "--idle");
    else if (arg == "--daemon-pid") {
      opts.daemon_pids.clear();
      for (const auto pid : split_list(value(), "--daemon-pid"))
        opts.daemon_pids.push_back(parse_number<int>(pid, "--daemon-pid"));
    } else if (arg == "--json")
      opts.json = true;
    else if (arg == "--addr") {
      opts.addrs.clear();
      for (const auto addr : split_list(value(), "--addr"))
        opts.addrs.push_back(parse_address(addr, "--addr"));
    } else if (arg == "--masters") {
      opts.masters.clear();
      for (const auto addr : split_list(value(), "--masters"))
        opts.masters.push_back(parse_address(addr, "--masters"));
    } else if (arg == "-h" || arg == "--help") {
      std::cout << usage;
      std::exit(0);
    } else {
      die("unknown option '" + std::string(arg) + "'\n" + std::string(usage));
    }
  }
  if (opts.connections < 0 || opts.pipeline < 1 || opts.resources < 1 || opts.seconds <= 0 ||
      opts.warmup < 0 || opts.keep < 0 || opts.keep_per_conn < 1 || opts.waiters < 0 ||
      opts.waiters_per_resource < 1 || opts.idle < 0)
    die("option out of range");
  if (opts.kind_count < 1 ||
      (opts.kind == lock_kind::multi &&
       (opts.kind_count > max_set_resources || opts.kind_count > opts.resources)))
    die("--kind multi:K wants 1 <= K <= " + std::to_string(max_set_resources) +
        " and K <= -r; permits:N wants N >= 1");
  // Hand-overs of permits are timed per slot: R * N states of 32 bytes.
  if (opts.kind == lock_kind::permits && opts.wait_ms &&
      std::uint64_t{opts.resources} * opts.kind_count > max_timed_permit_slots)
    die("--kind permits:N with --wait times each of the R * N permit slots: at most " +
        std::to_string(max_timed_permit_slots));
  return opts;
}

// Log-linear latency histogram in µs: exact below 256, then 128 buckets per power of two
// (< 0.8 % error). Fixed size: recording never allocates.
class histogram {
 public:
  void add(std::uint64_t us) {
    ++counts_[index(us)];
    ++total_;
  }
  std::uint64_t total() const { return total_; }
  std::uint64_t percentile(double q) const {
    if (total_ == 0)
      return 0;
    const auto rank = static_cast<std::uint64_t>(q * static_cast<double>(total_ - 1)) + 1;
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank)
        return value(i);
    }
    return value(counts_.size() - 1);
  }

 private:
  static constexpr int max_exponent = 40;
  static std::size_t index(std::uint64_t v) {
    if (v < 256)
      return v;
    const int e = std::min(63 - std::countl_zero(v), max_exponent);
    const std::uint64_t mantissa = (v >> (e - 7)) & 127;
    return 256 + static_cast<std::size_t>(e - 8) * 128 + mantissa;
  }
  static std::uint64_t value(std::size_t i) {
    if (i < 256)
      return i;
    const int e = 8 + static_cast<int>((i - 256) / 128);
    const std::uint64_t mantissa = (i - 256) % 128;
    // Middle of the bucket.
    return ((128 + mantissa) << (e - 7)) + (std::uint64_t{1} << (e - 8));
  }
  std::array<std::uint64_t, 256 + (max_exponent - 7) * 128> counts_{};
  std::uint64_t total_ = 0;
};

// utime + stime of a process in µs, from /proc/PID/stat.
std::uint64_t process_cpu_us(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto paren = text.rfind(')');
  if (paren == std::string::npos)
    die("cannot read /proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields(text.substr(paren + 1));
  std::string field;
  std::uint64_t utime = 0, stime = 0;
  // After "(comm)" comes field 3 (state); utime and stime are fields 14 and 15.
  for (int n = 3; n <= 15 && fields >> field; ++n) {
    if (n == 14)
      utime = std::stoull(field);
    else if (n == 15)
      stime = std::stoull(field);
  }
  const auto ticks = static_cast<std::uint64_t>(sysconf(_SC_CLK_TCK));
  return (utime + stime) * 1'000'000 / ticks;
}

// VmRSS of a process in kB, 0 if unknown.
std::uint64_t process_rss_kb(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stoull(line.substr(6));
  return 0;
}

std::uint64_t self_cpu_us() {
  rusage self{};
  getrusage(RUSAGE_SELF, &self);
  auto us = [](const timeval& t) {
    return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000 + static_cast<std::uint64_t>(t.tv_usec);
  };
  return us(self.ru_utime) + us(self.ru_stime);
}

// splitmix64: cheap and good enough to pick resources.
struct rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
};

struct counters {
  std::uint64_t cycles = 0;
  std::uint64_t busy = 0;
  std::uint64_t noquorum = 0;
  std::uint64_t notheld = 0;
  std::uint64_t errors = 0;
  std::uint64_t lost = 0;
};

constexpr std::size_t owner_length = 40;
constexpr std::size_t read_buffer_bytes = 64 * 1024;
constexpr std::size_t idle_read_buffer_bytes = 256; // reads one PONG

class bench;

// One cycle in flight: which resource, and where it is in the cycle.
struct slot {
  std::uint32_t resource = 0;
  bool unlocking = false;
  bool counted = false; // the LOCK went out inside the window
  clock_type::time_point sent;
  std::uint64_t lock_seq = 0; // order of the LOCK among everything sent (hand-overs)
  std::array<char, owner_length> owner{};
};

// Per resource (WAIT runs only): its holder's last UNLOCK, until the next grant.
struct handover_state {
  clock_type::time_point unlock_sent;
  std::uint64_t unlock_seq = 0;
  std::uint32_t addr = 0; // the holder's daemon address
  bool pending = false;   // UNLOCK sent inside the window, no grant since
};

enum class role { cycler, keeper, waiter, idle };

struct connection {
  connection(net::io_context& io, role r)
      : socket(io), kind(r), in(r == role::idle ? idle_read_buffer_bytes : read_buffer_bytes) {}
  stream_socket socket;
  role kind;
  std::uint32_t addr = 0; // index into options::addrs
  std::vector<char> in;
  std::size_t in_used = 0;
  std::string out, writing;
  bool write_busy = false;
  bool open = true;
  std::vector<slot> slots;
  std::vector<std::uint32_t> members; // multi: slot s's set at [s * K, (s + 1) * K)
  std::vector<std::uint32_t> fifo;    // ring of slot indexes, capacity = slots.size()
  std::size_t fifo_head = 0, fifo_count = 0;
};

class bench {
 public:
  explicit bench(const options& opts)
      : opts_(opts), random_{0x5eed ^ static_cast<std::uint64_t>(getpid())} {
    ttl_text_ = std::to_string(opts.ttl_ms);
    lock_suffix_ = " " + ttl_text_;
    if (opts.kind == lock_kind::shared)
      lock_suffix_ += " SHARED";
    else if (opts.kind == lock_kind::permits)
      lock_suffix_ += " PERMITS " + std::to_string(opts.kind_count);
    if (opts.wait_ms)
      lock_suffix_ += " WAIT " + std::to_string(*opts.wait_ms);
    lock_suffix_ += '\n';
    set_prefix_ = std::to_string(opts.kind_count);
    names_.reserve(opts.resources);
    for (std::uint32_t i = 0; i < opts.resources; ++i)
      names_.push_back("r" + std::to_string(i));
    // A permit is an exclusive lock on one of the semaphore's n slots: hand-overs are timed per
    // slot. Readers never wait for readers: nothing is handed over between shared holds.
    if (opts.wait_ms && opts.kind == lock_kind::permits)
      handover_.resize(std::size_t{opts.resources} * opts.kind_count);
    else if (opts.wait_ms && opts.kind != lock_kind::shared)
      handover_.resize(opts.resources);
  }

  int run() {
    for (const auto& a : opts_.addrs)
      endpoints_.push_back(resolve(a));
    for (const auto& m : opts_.masters) {
      masters_.push_back(std::make_unique<stream_socket>(io_));
      masters_.back()->connect(resolve(m));
    }
    for (const int pid : opts_.daemon_pids)
      rss_before_kb_ += process_rss_kb(pid);
    setup_keepers();
    setup_waiters();
    setup_idle();
    for (int i = 0; i < opts_.connections; ++i) {
      auto& c = open_connection(role::cycler);
      c.slots.resize(static_cast<std::size_t>(opts_.pipeline));
      if (opts_.kind == lock_kind::multi)
        c.members.resize(c.slots.size() * opts_.kind_count);
      c.fifo.resize(c.slots.size());
    }
    now_ = clock_type::now();
    for (auto& c : conns_) {
      if (c->kind == role::cycler)
        for (std::uint32_t s = 0; s < c->slots.size(); ++s)
          send_lock(*c, s);
      start_read(*c);
      flush(*c);
    }
    timer_.expires_after(to_duration(opts_.warmup));
    timer_.async_wait([&](const boost::system::error_code&) {
      begin_window();
      timer_.expires_after(to_duration(opts_.seconds));
      timer_.async_wait([&](const boost::system::error_code&) {
        end_window();
        // Drain: no new LOCKs, UNLOCK what was granted, so the next run starts clean.
        timer_.expires_after(std::chrono::seconds(5));
        timer_.async_wait([&](const boost::system::error_code& ec) {
          if (!ec)
            close_all();
        });
        maybe_finish();
      });
    });
    io_.run();
    report();
    return 0;
  }

 private:
  stream_socket::endpoint_type resolve(const address& a) {
    if (a.is_unix())
      return net::local::stream_protocol::endpoint(a.host);
    tcp::resolver resolver(io_);
    return resolver.resolve(a.host, a.port).begin()->endpoint();
  }

  // The masters' summed used_cpu_sys + used_cpu_user (INFO cpu), in µs; 0 without --masters.
  // Synchronous: at the window's edges only.
  double masters_cpu_us() {
    double total = 0;
    for (std::size_t i = 0; i < masters_.size(); ++i) {
      auto& socket = *masters_[i];
      net::write(socket, net::buffer(std::string_view("INFO cpu\r\n")));
      std::string reply; // "$<length>\r\n<body>\r\n"
      std::size_t header_end = std::string::npos, length = 0;
      char chunk[4096];
      while (header_end == std::string::npos || reply.size() < header_end + 2 + length + 2) {
        reply.append(chunk, socket.read_some(net::buffer(chunk)));
        if (header_end == std::string::npos &&
            (header_end = reply.find("\r\n")) != std::string::npos) {
          if (reply[0] != '$')
            die("INFO cpu on " + opts_.masters[i].text() +
                " answered: " + reply.substr(0, header_end));
          length = parse_number<std::size_t>(std::string_view(reply).substr(1, header_end - 1),
                                             "INFO length");
        }
      }
      for (const std::string_view field : {"used_cpu_sys:", "used_cpu_user:"}) {
        const auto at = reply.find(field);
        if (at == std::string::npos)
          die("INFO cpu on " + opts_.masters[i].text() + " has no " + std::string(field));
        const auto end = reply.find("\r\n", at);
        total += parse_number<double>(
                     std::string_view(reply).substr(at + field.size(), end - at - field.size()),
                     "INFO cpu") *
                 1e6;
      }
    }
    return total;
  }

  template <typename Seconds>
  static clock_type::duration to_duration(Seconds s) {
    return std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(s));
  }

  connection& open_connection(role kind) {
    conns_.push_back(std::make_unique<connection>(io_, kind));
    auto& c = *conns_.back();
    c.addr = next_addr_[static_cast<std::size_t>(kind)]++ %
             static_cast<std::uint32_t>(endpoints_.size());
    boost::system::error_code ec;
    c.socket.connect(endpoints_[c.addr], ec);
    if (ec)
      die("cannot connect to " + opts_.addrs[c.addr].text() + ": " + ec.message());
    if (!opts_.addrs[c.addr].is_unix())
      c.socket.set_option(tcp::no_delay(true));
    return c;
  }

  // Reads one reply line synchronously (setup only).
  static std::string read_line_sync(connection& c) {
    for (;;) {
      const auto* begin = c.in.data();
      const auto* nl = static_cast<const char*>(std::memchr(begin, '\n', c.in_used));
      if (nl) {
        std::string line(begin, nl);
        const std::size_t rest = c.in_used - static_cast<std::size_t>(nl + 1 - begin);
        std::memmove(c.in.data(), nl + 1, rest);
        c.in_used = rest;
        return line;
      }
      if (c.in_used == c.in.size())
        die("reply line too long");
      boost::system::error_code ec;
      const std::size_t n =
          c.socket.read_some(net::buffer(c.in.data() + c.in_used, c.in.size() - c.in_used), ec);
      if (ec)
        die("setup read failed: " + ec.message());
      c.in_used += n;
    }
  }

  // Sends `lines` requests on c at once and checks every reply starts with OK.
  void expect_ok(connection& c, const std::string& requests, int lines, const char* what) {
    net::write(c.socket, net::buffer(requests));
    for (int i = 0; i < lines; ++i) {
      const std::string reply = read_line_sync(c);
      if (reply.rfind("OK ", 0) != 0)
        die(std::string(what) + " refused: " + reply);
    }
  }

  // KEEP locks k0..k(N-1), spread over connections below the daemon's per-connection limit.
  void setup_keepers() {
    for (int first = 0; first < opts_.keep; first += opts_.keep_per_conn) {
      const int last = std::min(opts_.keep, first + opts_.keep_per_conn);
      auto& c = open_connection(role::keeper);
      std::string requests;
      for (int i = first; i < last; ++i)
        requests += "LOCK k" + std::to_string(i) + " " + ttl_text_ + " KEEP\n";
      expect_ok(c, requests, last - first, "KEEP lock");
    }
  }

  // Holders take KEEP locks on w0.., then waiters queue behind them with a WAIT that outlasts
  // the run. Closing the connections at the end removes both.
  void setup_waiters() {
    if (opts_.waiters == 0)
      return;
    const int per_res = opts_.waiters_per_resource;
    const int resources = (opts_.waiters + per_res - 1) / per_res;
    for (int first = 0; first < resources; first += opts_.keep_per_conn) {
      const int last = std::min(resources, first + opts_.keep_per_conn);
      auto& holder = open_connection(role::keeper);
      std::string requests;
      for (int i = first; i < last; ++i)
        requests += "LOCK w" + std::to_string(i) + " " + ttl_text_ + " KEEP\n";
      expect_ok(holder, requests, last - first, "holder lock");
    }
    const std::string wait = " " + ttl_text_ + " WAIT 3600000\n";
    for (int first = 0; first < opts_.waiters; first += per_res) {
      const int last = std::min(opts_.waiters, first + per_res);
      auto& c = open_connection(role::waiter);
      std::string requests;
      for (int i = first; i < last; ++i)
        requests += "LOCK w" + std::to_string(i / per_res) + wait;
      net::write(c.socket, net::buffer(requests));
    }
    // The daemon reads the waiters asynchronously: wait until INFO counts them all.
    for (int tries = 0; tries < 100 && info_number("waiters") < opts_.waiters; ++tries)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }

  // Connections that each send one PING, read its PONG and then stay silent; in batches, so a
  // daemon that stopped accepting shows up as a failed connect, not a full accept queue.
  void setup_idle() {
    constexpr int batch = 500;
    for (int first = 0; first < opts_.idle; first += batch) {
      const int last = std::min(opts_.idle, first + batch);
      const std::size_t from = conns_.size();
      for (int i = first; i < last; ++i)
        net::write(open_connection(role::idle).socket, net::buffer(std::string_view("PING\n")));
      for (std::size_t i = from; i < conns_.size(); ++i)
        if (const std::string reply = read_line_sync(*conns_[i]); reply != "PONG")
          die("idle connection " + std::to_string(first + (i - from)) + " got: " + reply);
    }
  }

  // A number from the daemons' INFO JSON ("key":N), summed over the daemons that report it; -1 if
  // none does. Synchronous, setup/teardown only.
  long long info_number(std::string_view key) {
    if (infos_.empty())
      for (std::size_t i = 0; i < endpoints_.size(); ++i)
        infos_.push_back(std::make_unique<connection>(io_, role::keeper));
    long long sum = -1;
    for (std::size_t i = 0; i < infos_.size(); ++i) {
      auto& info = *infos_[i];
      if (!info.socket.is_open())
        info.socket.connect(endpoints_[i]);
      net::write(info.socket, net::buffer(std::string_view("INFO\n")));
      const std::string reply = read_line_sync(info);
      const std::string needle = "\"" + std::string(key) + "\":";
      const auto at = reply.find(needle);
      if (at == std::string::npos)
        continue;
      long long value = -1;
      const char* first = reply.data() + at + needle.size();
      if (std::from_chars(first, reply.data() + reply.size(), value).ec == std::errc{})
        sum = (sum < 0 ? 0 : sum) + value;
    }
    return sum;
  }

  void send_lock(connection& c, std::uint32_t s) {
    if (opts_.kind == lock_kind::multi)
      return send_mlock(c, s);
    auto& sl = c.slots[s];
    sl.resource = static_cast<std::uint32_t>(random_.next() % opts_.resources);
    sl.unlocking = false;
    sl.counted = measuring_;
    sl.sent = now_;
    sl.lock_seq = ++sequence_;
    c.out += "LOCK ";
    c.out += names_[sl.resource];
    c.out += lock_suffix_;
    push(c, s);
  }

  // MLOCK K r_a r_b ... <ttl> [WAIT w]: K distinct resources, in the order drawn (the daemon takes
  // a set in any order without deadlock, so the bench does not sort them).
  void send_mlock(connection& c, std::uint32_t s) {
    auto& sl = c.slots[s];
    std::uint32_t* members = set_of(c, s);
    for (std::uint32_t i = 0; i < opts_.kind_count; ++i) {
      std::uint32_t drawn;
      do
        drawn = static_cast<std::uint32_t>(random_.next() % opts_.resources);
      while (std::find(members, members + i, drawn) != members + i);
      members[i] = drawn;
    }
    sl.unlocking = false;
    sl.counted = measuring_;
    sl.sent = now_;
    sl.lock_seq = ++sequence_;
    c.out += "MLOCK ";
    append_set(c, s);
    c.out += lock_suffix_;
    push(c, s);
  }

  std::uint32_t* set_of(connection& c, std::uint32_t s) const {
    return c.members.data() + std::size_t{s} * opts_.kind_count;
  }

  // "K r_a r_b ..." of slot s's set.
  void append_set(connection& c, std::uint32_t s) const {
    c.out += set_prefix_;
    const std::uint32_t* members = set_of(c, s);
    for (std::uint32_t i = 0; i < opts_.kind_count; ++i) {
      c.out += ' ';
      c.out += names_[members[i]];
    }
  }

  void send_unlock(connection& c, std::uint32_t s) {
    auto& sl = c.slots[s];
    sl.unlocking = true;
    // The clock read of this batch: the UNLOCK goes out at its end.
    if (!handover_.empty() && opts_.kind != lock_kind::multi) {
      auto& h = handover_[handover_index(sl)];
      h.pending = measuring_;
      h.unlock_sent = now_;
      h.unlock_seq = ++sequence_;
      h.addr = c.addr;
    }
    if (opts_.kind == lock_kind::multi) {
      if (!handover_.empty()) { // one release for every member of the set
        const std::uint64_t seq = ++sequence_;
        const std::uint32_t* members = set_of(c, s);
        for (std::uint32_t i = 0; i < opts_.kind_count; ++i)
          handover_[members[i]] = {now_, seq, c.addr, measuring_};
      }
      c.out += "MUNLOCK ";
      append_set(c, s);
    } else {
      c.out += "UNLOCK ";
      c.out += names_[sl.resource];
    }
    c.out += ' ';
    c.out.append(sl.owner.data(), sl.owner.size());
    c.out += '\n';
    push(c, s);
  }

  void push(connection& c, std::uint32_t s) {
    c.fifo[(c.fifo_head + c.fifo_count) % c.fifo.size()] = s;
    ++c.fifo_count;
    ++in_flight_total_;
  }

  void start_read(connection& c) {
    if (c.in_used == c.in.size())
      die("reply line too long");
    c.socket.async_read_some(net::buffer(c.in.data() + c.in_used, c.in.size() - c.in_used),
                             [this, &c](const boost::system::error_code& ec, std::size_t n) {
                               if (ec) {
                                 if (c.open && !finishing_)
                                   die("connection lost: " + ec.message());
                                 return;
                               }
                               now_ = clock_type::now(); // one clock read per batch of replies
                               c.in_used += n;
                               const char* begin = c.in.data();
                               const char* end = begin + c.in_used;
                               const char* p = begin;
                               while (const auto* nl =
                                          static_cast<const char*>(std::memchr(p, '\n', end - p))) {
                                 on_line(c, std::string_view(p, static_cast<std::size_t>(nl - p)));
                                 p = nl + 1;
                               }
                               c.in_used = static_cast<std::size_t>(end - p);
                               if (c.in_used)
                                 std::memmove(c.in.data(), p, c.in_used);
                               flush(c);
                               maybe_finish();
                               if (c.open)
                                 start_read(c);
                             });
  }

  void on_line(connection& c, std::string_view line) {
    if (line.rfind("LOST ", 0) == 0) { // a push, not a reply
      if (measuring_)
        ++counts_.lost;
      return;
    }
    if (c.kind != role::cycler) {
      if (!finishing_)
        die("unexpected reply on a KEEP/waiter connection: " + std::string(line));
      return;
    }
    if (c.fifo_count == 0)
      die("reply without a request: " + std::string(line));
    const std::uint32_t s = c.fifo[c.fifo_head];
    c.fifo_head = (c.fifo_head + 1) % c.fifo.size();
    --c.fifo_count;
    --in_flight_total_;
    auto& sl = c.slots[s];
    const bool ok = line.size() >= 2 && line[0] == 'O' && line[1] == 'K';
    if (!sl.unlocking) {
      if (ok && line.size() >= 3 + owner_length) {
        if (sl.counted && measuring_)
          latency_.add(static_cast<std::uint64_t>(
              std::chrono::duration_cast<std::chrono::microseconds>(now_ - sl.sent).count()));
        std::memcpy(sl.owner.data(), line.data() + 3, owner_length);
        if (opts_.kind == lock_kind::multi && !handover_.empty())
          on_set_granted(c, s);
        else if (!handover_.empty())
          on_granted(c, sl);
        send_unlock(c, s);
        return;
      }
      if (measuring_) {
        if (line.rfind("BUSY", 0) == 0)
          ++counts_.busy;
        else if (line.rfind("NOQUORUM", 0) == 0)
          ++counts_.noquorum;
        else
          count_error(line);
      }
    } else if (measuring_) {
      if (ok)
        ++counts_.cycles;
      else if (line.rfind("NOTHELD", 0) == 0)
        ++counts_.notheld;
      else
        count_error(line);
    }
    if (!stopping_)
      send_lock(c, s);
  }

  // The first grant of a resource (a permit slot) after its holder's UNLOCK went out ends a
  // hand-over; it counts when that UNLOCK went out inside the window, the grant arrives inside it,
  // and the LOCK it answers was sent before the UNLOCK (a waiter, not a newcomer).
  void on_granted(const connection& c, const slot& sl) {
    auto& h = handover_[handover_index(sl)];
    if (!h.pending)
      return;
    h.pending = false;
    if (!measuring_ || sl.lock_seq > h.unlock_seq)
      return;
    add_handover(c, h);
  }

  // A set's grant is the next grant of each of its members: it ends every member's pending
  // hand-over, and counts once, from the latest of those members' releases that went out after
  // the MLOCK (the last one it waited for). Members it did not wait for end uncounted.
  void on_set_granted(const connection& c, std::uint32_t s) {
    const slot& sl = c.slots[s];
    const std::uint32_t* members = c.members.data() + std::size_t{s} * opts_.kind_count;
    const handover_state* last = nullptr;
    for (std::uint32_t i = 0; i < opts_.kind_count; ++i) {
      auto& h = handover_[members[i]];
      if (!h.pending)
        continue;
      h.pending = false;
      if (measuring_ && sl.lock_seq < h.unlock_seq && (!last || h.unlock_sent > last->unlock_sent))
        last = &h;
    }
    if (last)
      add_handover(c, *last);
  }

  void add_handover(const connection& c, const handover_state& h) {
    const auto us = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(now_ - h.unlock_sent).count());
    handover_all_.add(us);
    (h.addr == c.addr ? handover_same_ : handover_cross_).add(us);
  }

  // The resource, or for a permit the semaphore's slot its owner carries (characters 6 to 8,
  // hex: proto/PROTOCOL.md), each slot being an exclusive lock.
  std::size_t handover_index(const slot& sl) const {
    if (opts_.kind != lock_kind::permits)
      return sl.resource;
    std::uint32_t permit = 0;
    const char* digits = sl.owner.data() + 5;
    if (std::from_chars(digits, digits + 3, permit, 16).ptr != digits + 3 ||
        permit >= opts_.kind_count)
      die("permit owner without a slot below " + std::to_string(opts_.kind_count) + ": " +
          std::string(sl.owner.data(), sl.owner.size()));
    return std::size_t{sl.resource} * opts_.kind_count + permit;
  }

  void count_error(std::string_view line) {
    if (counts_.errors++ == 0)
      std::cerr << "redlock-bench: first error reply: " << line << '\n';
  }

  void flush(connection& c) {
    if (c.write_busy || c.out.empty() || !c.open)
      return;
    c.writing.swap(c.out); // both keep their capacity: no allocation in steady state
    c.out.clear();
    c.write_busy = true;
    net::async_write(c.socket, net::buffer(c.writing),
                     [this, &c](const boost::system::error_code& ec, std::size_t) {
                       c.write_busy = false;
                       c.writing.clear();
                       if (ec) {
                         if (c.open && !finishing_)
                           die("write failed: " + ec.message());
                         return;
                       }
                       flush(c);
                     });
  }

  void begin_window() {
    counts_ = {};
    measuring_ = true;
    window_start_ = clock_type::now();
    client_cpu0_ = self_cpu_us();
    masters_cpu_ = masters_cpu_us();
    daemon_cpu_each_.clear();
    for (const int pid : opts_.daemon_pids)
      daemon_cpu_each_.push_back(process_cpu_us(pid));
  }

  void end_window() {
    measuring_ = false;
    stopping_ = true;
    window_seconds_ = std::chrono::duration<double>(clock_type::now() - window_start_).count();
    client_cpu_ = self_cpu_us() - client_cpu0_;
    masters_cpu_ = masters_cpu_us() - masters_cpu_;
    for (std::size_t i = 0; i < opts_.daemon_pids.size(); ++i) {
      daemon_cpu_each_[i] = process_cpu_us(opts_.daemon_pids[i]) - daemon_cpu_each_[i];
      daemon_cpu_ += daemon_cpu_each_[i];
      rss_end_kb_ += process_rss_kb(opts_.daemon_pids[i]);
    }
    daemon_keep_locks_ = info_number("keep_locks");
    daemon_waiters_ = info_number("waiters");
  }

  void maybe_finish() {
    if (stopping_ && !finishing_ && in_flight_total_ == 0)
      close_all();
  }

  void close_all() {
    finishing_ = true;
    timer_.cancel();
    for (auto& info : infos_) {
      boost::system::error_code ignored;
      info->socket.close(ignored);
    }
    for (auto& c : conns_) {
      c->open = false;
      boost::system::error_code ignored;
      c->socket.close(ignored);
    }
  }

  void report() const {
    const double cycles = static_cast<double>(counts_.cycles);
    const double per_s = cycles / window_seconds_;
    auto per_cycle = [&](std::uint64_t us) { return counts_.cycles ? us / cycles : 0.0; };
    auto per_cycle_double = [&](double us) { return counts_.cycles ? us / cycles : 0.0; };
    const double daemon_pct = static_cast<double>(daemon_cpu_) / (window_seconds_ * 1e4);
    char buffer[2048];
    if (opts_.json) {
      std::snprintf(
          buffer, sizeof buffer,
          "{\"tool\":\"redlock-bench\",\"c\":%d,\"p\":%d,\"r\":%u,\"ttl\":%llu,\"wait\":%lld,"
          "\"keep\":%d,\"waiters\":%d,\"idle\":%d,\"seconds\":%.3f,\"cycles\":%llu,\"cycles_per_"
          "s\":%.1f,"
          "\"busy\":%llu,\"noquorum\":%llu,\"notheld\":%llu,\"errors\":%llu,\"lost\":%llu,"
          "\"acquires\":%llu,\"acquire_p50_us\":%llu,\"acquire_p99_us\":%llu,"
          "\"acquire_p999_us\":%llu,\"client_cpu_us_per_cycle\":%.2f,\"daemon_cpu_us\":%llu,"
          "\"daemon_cpu_us_per_cycle\":%.2f,\"daemon_cpu_pct\":%.2f,\"daemon_rss_before_kb\":%llu,"
          "\"daemon_rss_kb\":%llu,\"daemon_keep_locks\":%lld,\"daemon_waiters\":%lld}",
          opts_.connections, opts_.pipeline, opts_.resources,
          static_cast<unsigned long long>(opts_.ttl_ms),
          opts_.wait_ms ? static_cast<long long>(*opts_.wait_ms) : -1LL, opts_.keep, opts_.waiters,
          opts_.idle, window_seconds_, static_cast<unsigned long long>(counts_.cycles), per_s,
          static_cast<unsigned long long>(counts_.busy),
          static_cast<unsigned long long>(counts_.noquorum),
          static_cast<unsigned long long>(counts_.notheld),
          static_cast<unsigned long long>(counts_.errors),
          static_cast<unsigned long long>(counts_.lost),
          static_cast<unsigned long long>(latency_.total()),
          static_cast<unsigned long long>(latency_.percentile(0.5)),
          static_cast<unsigned long long>(latency_.percentile(0.99)),
          static_cast<unsigned long long>(latency_.percentile(0.999)), per_cycle(client_cpu_),
          static_cast<unsigned long long>(daemon_cpu_), per_cycle(daemon_cpu_), daemon_pct,
          static_cast<unsigned long long>(rss_before_kb_),
          static_cast<unsigned long long>(rss_end_kb_), daemon_keep_locks_, daemon_waiters_);
      std::string line = buffer;
      line.pop_back(); // the closing brace: the fields below came later
      std::snprintf(buffer, sizeof buffer,
                    ",\"masters\":%zu,\"masters_cpu_us\":%.0f,\"masters_cpu_us_per_cycle\":%.2f,"
                    "\"addrs\":%zu,\"daemon_cpu_us_each\":[",
                    opts_.masters.size(), masters_cpu_, per_cycle_double(masters_cpu_),
                    opts_.addrs.size());
      line += buffer;
      for (std::size_t i = 0; i < daemon_cpu_each_.size(); ++i)
        line += (i ? "," : "") + std::to_string(daemon_cpu_each_[i]);
      line += ']';
      auto handovers = [&](const char* infix, const histogram& h) {
        std::snprintf(buffer, sizeof buffer,
                      ",\"handovers%s\":%llu,\"handover%s_p50_us\":%llu,\"handover%s_p99_us\":%llu",
                      infix, static_cast<unsigned long long>(h.total()), infix,
                      static_cast<unsigned long long>(h.percentile(0.5)), infix,
                      static_cast<unsigned long long>(h.percentile(0.99)));
        line += buffer;
      };
      handovers("", handover_all_);
      handovers("_same", handover_same_);
      handovers("_cross", handover_cross_);
      std::snprintf(buffer, sizeof buffer, ",\"kind\":\"%s\",\"kind_n\":%u", kind_name(opts_.kind),
                    opts_.kind_count);
      line += buffer;
      std::cout << line << '}' << std::endl;
      return;
    }
    std::printf("window        %.2f s, c=%d p=%d r=%u ttl=%llu%s keep=%d waiters=%d idle=%d\n",
                window_seconds_, opts_.connections, opts_.pipeline, opts_.resources,
                static_cast<unsigned long long>(opts_.ttl_ms), opts_.wait_ms ? " WAIT" : "",
                opts_.keep, opts_.waiters, opts_.idle);
    if (opts_.kind == lock_kind::permits)
      std::printf("kind          permits: one of %u per semaphore\n", opts_.kind_count);
    else if (opts_.kind == lock_kind::multi)
      std::printf("kind          multi: MLOCK of %u resources\n", opts_.kind_count);
    else
      std::printf("kind          %s\n", kind_name(opts_.kind));
    if (opts_.addrs.size() > 1) {
      std::printf("addresses    ");
      for (std::size_t i = 0; i < opts_.addrs.size(); ++i)
        std::printf(" %zu:%s", i, opts_.addrs[i].text().c_str());
      std::printf(" (connection i of each kind on address i %% %zu)\n", opts_.addrs.size());
    }
    std::printf("cycles        %llu (%.0f /s)\n", static_cast<unsigned long long>(counts_.cycles),
                per_s);
    std::printf("replies       busy %llu, noquorum %llu, notheld %llu, errors %llu, lost %llu\n",
                static_cast<unsigned long long>(counts_.busy),
                static_cast<unsigned long long>(counts_.noquorum),
                static_cast<unsigned long long>(counts_.notheld),
                static_cast<unsigned long long>(counts_.errors),
                static_cast<unsigned long long>(counts_.lost));
    std::printf("acquire       p50 %llu us, p99 %llu us, p99.9 %llu us (%llu samples)\n",
                static_cast<unsigned long long>(latency_.percentile(0.5)),
                static_cast<unsigned long long>(latency_.percentile(0.99)),
                static_cast<unsigned long long>(latency_.percentile(0.999)),
                static_cast<unsigned long long>(latency_.total()));
    if (!handover_.empty()) {
      auto handovers = [](const histogram& h) {
        std::printf("p50 %llu us, p99 %llu us (%llu)",
                    static_cast<unsigned long long>(h.percentile(0.5)),
                    static_cast<unsigned long long>(h.percentile(0.99)),
                    static_cast<unsigned long long>(h.total()));
      };
      std::printf("hand-over     ");
      handovers(handover_all_);
      std::printf("\n  same daemon ");
      handovers(handover_same_);
      std::printf("\n  other daemon ");
      handovers(handover_cross_);
      std::printf("\n");
    }
    std::printf("client cpu    %.1f us/cycle\n", per_cycle(client_cpu_));
    if (!opts_.daemon_pids.empty())
      std::printf(
          "daemon        %.1f us/cycle, %.1f %% of one core, rss %llu kB (before %llu kB)%s\n",
          per_cycle(daemon_cpu_), daemon_pct, static_cast<unsigned long long>(rss_end_kb_),
          static_cast<unsigned long long>(rss_before_kb_),
          opts_.daemon_pids.size() > 1 ? ", summed" : "");
    if (opts_.daemon_pids.size() > 1)
      for (std::size_t i = 0; i < opts_.daemon_pids.size(); ++i)
        std::printf("  pid %-9d %.1f us/cycle, %.1f %% of one core\n", opts_.daemon_pids[i],
                    per_cycle(daemon_cpu_each_[i]),
                    static_cast<double>(daemon_cpu_each_[i]) / (window_seconds_ * 1e4));
    if (!opts_.masters.empty())
      std::printf("masters       %.1f us/cycle (INFO cpu of %zu masters, summed)\n",
                  per_cycle_double(masters_cpu_), opts_.masters.size());
    std::printf("daemon INFO   keep_locks %lld, waiters %lld (at the end of the window%s)\n",
                daemon_keep_locks_, daemon_waiters_, opts_.addrs.size() > 1 ? ", summed" : "");
  }

  const options& opts_;
  net::io_context io_{1};
  std::vector<stream_socket::endpoint_type> endpoints_; // one per opts_.addrs
  std::vector<std::unique_ptr<stream_socket>> masters_; // one per opts_.masters (INFO cpu)
  std::array<std::uint32_t, 4> next_addr_{};            // per role: round-robin over endpoints_
  std::vector<std::unique_ptr<connection>> conns_;
  std::vector<std::string> names_;
  std::string ttl_text_, lock_suffix_, set_prefix_;
  rng random_;
  clock_type::time_point now_;
  bool measuring_ = false, stopping_ = false, finishing_ = false;
  std::uint64_t in_flight_total_ = 0;
  net::steady_timer timer_{io_};
  counters counts_;
  histogram latency_;
  std::vector<handover_state> handover_; // per resource, or per permit slot (handover_index)
  std::uint64_t sequence_ = 0;           // counts LOCKs and UNLOCKs sent
  histogram handover_all_, handover_same_, handover_cross_;
  clock_type::time_point window_start_;
  double window_seconds_ = 0;
  std::uint64_t client_cpu0_ = 0, client_cpu_ = 0, daemon_cpu_ = 0;
  double masters_cpu_ = 0;                     // at the window's start, then used over it
  std::vector<std::uint64_t> daemon_cpu_each_; // per --daemon-pid: at the start, then used
  std::uint64_t rss_before_kb_ = 0, rss_end_kb_ = 0;
  long long daemon_keep_locks_ = -1, daemon_waiters_ = -1;
  std::vector<std::unique_ptr<connection>> infos_; // one INFO connection per address
};

} // namespace

int main(int argc, char** argv) {
  const options opts = parse_options(argc, argv);
  try {
    // The histogram is large: keep the bench object off the stack.
    auto b = std::make_unique<bench>(opts);
    return b->run();
  } catch (const std::exception& e) {
    die(e.what());
  }
}
