// redlockd-chaos: a Jepsen-style fault-injection suite for redlockd. See tests/chaos/README.md.
//
//   redlockd-chaos --short            restart and clock-jump schedules, redlockd and weakened
//   redlockd-chaos --long [MINUTES]   every nemesis, redlockd then the weakened daemon
//   redlockd-chaos client ...         one client process (started by the harness)
#include <nlohmann/json.hpp>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client.hpp"
#include "daemon_process.hpp"
#include "fault_proxy.hpp"
#include "fenced_register.hpp"
#include "history.hpp"
#include "line_client.hpp"
#include "proc.hpp"
#include "process.hpp"
#include "redis_fleet.hpp"

#ifndef CHAOS_MALLOC_SHIM
#define CHAOS_MALLOC_SHIM ""
#endif
#ifndef CHAOS_LIBFAKETIME
#define CHAOS_LIBFAKETIME "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
#endif

namespace redlockd::chaos {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using test::child_process;
using test::daemon_process;
using test::redis_fleet;

constexpr std::size_t master_count = 5;
// The master that runs under libfaketime and takes the clock jumps and the split restarts.
constexpr std::size_t clock_node = 2;
// The two masters the split schedules stop, so that grants land on exactly 0, 1 and 2.
constexpr std::size_t split_nodes[] = {3, 4};

std::string seconds_text(std::int64_t ns) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << static_cast<double>(ns) / 1e9 << " s";
  return out.str();
}

void log_line(const std::string& text) {
  std::cerr << "[chaos " << seconds_text(monotonic_ns()) << "] " << text << std::endl;
}

// What one run does.
struct run_spec {
  std::string schedule; // "split-restart", "split-clock" or "mixed"
  bool weakened = false;
  int cycles = 3;                      // split schedules: how many times
  std::chrono::seconds duration = 60s; // mixed: how long the nemesis runs
  int clients = 4;
  int daemons = 2;
  int resources = 3;
  std::int64_t ttl_ms = 5000;
  std::int64_t hold_min_ms = 1500; // long enough to outlast the heal of a split
  std::int64_t hold_max_ms = 3500;
  std::uint64_t seed = std::random_device{}();
};

struct run_report {
  std::string title;
  std::string error; // set when the harness itself failed (no verdict)
  std::map<std::string, std::map<std::string, std::size_t>> ops; // kind -> outcome -> count
  std::map<std::string, std::size_t> faults;
  std::vector<checker_result> checks;
  stale_write_counts stale;
  register_state store;
  std::int64_t liveness_max_ms = 0;
  std::string detected; // what the daemons' INFO counters say they noticed

  std::size_t safety_violations() const {
    std::size_t n = 0;
    for (const auto& c : checks)
      if (c.name != "locks can be taken after heal" && c.name != "no lock key left after heal" &&
          c.name != "daemons alive, logs clean")
        n += c.violations;
    return n;
  }
  std::size_t all_violations() const {
    std::size_t n = 0;
    for (const auto& c : checks)
      n += c.violations;
    return n;
  }
};

// The masters, daemons, register and clients of one run, and the nemesis's hands on them.
class cluster {
 public:
  explicit cluster(const run_spec& spec)
      : spec_(spec), work_("redlockd-chaos"), random_(spec.seed),
        fleet_(master_count, [this](std::size_t i) { return launch_prefix(i); }),
        server_(store_, work_.path() / "register.sock") {
    for (int d = 0; d < spec_.daemons; ++d) {
      // Each daemon reaches each master through its own fault proxy.
      proxies_.emplace_back();
      test::daemon_options options;
      for (std::size_t i = 0; i < master_count; ++i) {
        proxies_.back().push_back(std::make_unique<fault_proxy>(fleet_.port(i)));
        options.nodes.push_back("127.0.0.1:" + std::to_string(proxies_.back().back()->port()));
      }
      options.extra = {{"key_prefix", "chaos:"},
                       {"node_timeout_ms", 100},
                       {"unsafe_disable_quarantine", spec_.weakened},
                       {"max_ttl_ms", 60000}};
      options.min_ok_nodes = 3; // restarted masters may be quarantined when a daemon restarts
      daemons_.push_back(std::make_unique<daemon_process>(options));
    }
    for (int r = 0; r < spec_.resources; ++r)
      resources_.push_back("r" + std::to_string(r));
  }

  ~cluster() { heal_everything(); }

  void start_clients(std::int64_t until_ns) {
    for (int c = 0; c < spec_.clients; ++c) {
      client_options o;
      o.name = "c" + std::to_string(c);
      o.daemon_index = c % spec_.daemons;
      o.daemon_port = daemons_[static_cast<std::size_t>(o.daemon_index)]->port();
      o.register_socket = server_.path().string();
      o.history_file = (work_.path() / (o.name + ".history")).string();
      o.resources = resources_;
      o.ttl_ms = spec_.ttl_ms;
      o.hold_min_ms = spec_.hold_min_ms;
      o.hold_max_ms = spec_.hold_max_ms;
      o.until_ns = until_ns;
      o.stop_file = (work_.path() / "stop").string();
      std::vector<std::string> args{"client"};
      const auto rest = o.to_args();
      args.insert(args.end(), rest.begin(), rest.end());
      history_files_.push_back(o.history_file);
      client_names_.push_back(o.name);
      clients_.emplace_back(fs::read_symlink("/proc/self/exe").string(), args,
                            work_.path() / (o.name + ".log"));
    }
  }

  // Tells the clients to stop starting operations and waits for them to finish the current
  // one; kills stragglers after `grace`.
  void stop_clients(std::chrono::milliseconds grace) {
    test::write_file(work_.path() / "stop", "stop\n");
    for (auto& c : clients_)
      if (!c.wait_for(grace))
        c.kill();
    clients_done_ns_ = monotonic_ns();
  }

  std::vector<operation> history() const {
    std::vector<operation> all;
    for (const auto& f : history_files_) {
      auto part = read_history(f);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }

  // ---- nemeses: each applies its fault, waits, heals, and records it -----------------------

  void kill_restart_masters(const std::vector<std::size_t>& nodes) {
    fault f{nodes.size() == 1 ? "kill-1-master" : "kill-2-masters", node_names(nodes),
            monotonic_ns()};
    for (auto i : nodes)
      fleet_.kill(i);
    for (auto i : nodes)
      fleet_.restart(i); // at once and empty: the masters forgot every lock they held
    wait_connected(nodes);
    finish(f);
  }

  void pause_master(std::size_t node, std::chrono::milliseconds length) {
    fault f{"pause-master", node_names({node}), monotonic_ns()};
    fleet_.pause(node);
    std::this_thread::sleep_for(length);
    fleet_.resume(node);
    finish(f);
  }

  void pause_daemon(std::size_t d, std::chrono::milliseconds length) {
    const int pid = test::daemon_pid(*daemons_[d]);
    if (pid <= 0)
      return;
    fault f{"pause-daemon", "daemon" + std::to_string(d), monotonic_ns()};
    ::kill(pid, SIGSTOP);
    std::this_thread::sleep_for(length);
    ::kill(pid, SIGCONT);
    finish(f);
  }

  void restart_daemon(std::size_t d) {
    fault f{"kill-restart-daemon", "daemon" + std::to_string(d), monotonic_ns()};
    daemons_[d]->restart(); // SIGKILL, same port and config, waits for a quorum of masters
    finish(f);
  }

  // Kleppmann's GC pause: stop the client that most recently read a register (most likely in
  // its critical section) for longer than the TTL.
  void pause_client() {
    std::optional<std::pair<std::string, std::int64_t>> latest;
    for (const auto& r : resources_)
      if (auto reader = store_.last_reader(r);
          reader && (!latest || reader->second > latest->second))
        latest = reader;
    if (!latest)
      return;
    const auto it = std::find(client_names_.begin(), client_names_.end(), latest->first);
    if (it == client_names_.end())
      return;
    auto& client = clients_[static_cast<std::size_t>(it - client_names_.begin())];
    fault f{"pause-client", latest->first, monotonic_ns()};
    client.signal(SIGSTOP);
    std::this_thread::sleep_for(std::chrono::milliseconds(spec_.ttl_ms + 1500));
    client.signal(SIGCONT);
    finish(f);
  }

  // libfaketime re-reads the offset file on every clock call: the jump is immediate.
  void jump_clock(std::chrono::seconds forward) {
    fault f{"clock-jump", node_names({clock_node}), monotonic_ns()};
    clock_offset_ += forward;
    test::write_file(clock_file(), "+" + std::to_string(clock_offset_.count()) + "s\n");
    finish(f);
  }

  // Network faults through the proxies, for every daemon: a master that swallows everything,
  // or one whose replies come later than the node timeout.
  void blackhole_master(std::size_t node, std::chrono::milliseconds length) {
    fault f{"blackhole-master", node_names({node}), monotonic_ns()};
    set_proxies({node}, fault_proxy::mode::blackhole);
    std::this_thread::sleep_for(length);
    set_proxies({node}, fault_proxy::mode::pass);
    finish(f);
  }

  void delay_master(std::size_t node, int delay_ms, std::chrono::milliseconds length) {
    fault f{"delay-master-" + std::to_string(delay_ms) + "ms", node_names({node}), monotonic_ns()};
    set_proxies({node}, fault_proxy::mode::delay, delay_ms);
    std::this_thread::sleep_for(length);
    set_proxies({node}, fault_proxy::mode::pass);
    finish(f);
  }

  // Two daemons, two views (Kleppmann's A,B,C vs C,D,E): daemon 0 loses masters 3 and 4,
  // daemon 1 loses masters 0 and 1; both still see a majority that overlaps only in master 2.
  void split_daemons(std::chrono::milliseconds length) {
    if (daemons_.size() < 2)
      return;
    fault f{"split-daemons", "daemon0:-node3,node4 daemon1:-node0,node1", monotonic_ns()};
    for (auto i : {3, 4})
      proxies_[0][static_cast<std::size_t>(i)]->set_mode(fault_proxy::mode::blackhole);
    for (auto i : {0, 1})
      proxies_[1][static_cast<std::size_t>(i)]->set_mode(fault_proxy::mode::blackhole);
    std::this_thread::sleep_for(length);
    set_proxies({0, 1, 3, 4}, fault_proxy::mode::pass);
    finish(f);
  }

  void flushall(std::size_t node) {
    fault f{"flushall", node_names({node}), monotonic_ns()};
    fleet_.run(node, "FLUSHALL");
    finish(f);
  }

  // The reliable road to a double grant when quarantine is off: cut two masters off so that the
  // next grants land on exactly three, let one land, then make one of the three forget it
  // (restart it empty, or jump its clock past the TTL), and bring the two back. Whoever asks
  // for that resource next finds it free on three masters out of five.
  //
  // The cut is a blackhole in the proxies, not SIGSTOP: commands sent to a stopped master wait
  // in its socket buffer and run when it resumes, so the SET NX of the holder's lock lands on
  // the two late, with a fresh TTL, and blocks the intruder (seen in the first runs).
  void split_then(const std::string& what) {
    const std::vector<std::size_t> stopped(std::begin(split_nodes), std::end(split_nodes));
    fault split{"split-" + what, node_names(stopped) + "+" + node_names({clock_node}),
                monotonic_ns()};
    set_proxies(stopped, fault_proxy::mode::blackhole);
    // Until every daemon has given up on them, commands may still queue towards them.
    wait_states(
        stopped, [](const std::string& s) { return s != "ok"; }, 10s);
    // Keys the two still hold from before the cut (their UNLOCKs no longer arrive) would block
    // the intruder on the healed side: let them expire first.
    std::this_thread::sleep_for(std::chrono::milliseconds(spec_.ttl_ms + 200));
    log_line("split: masters 3 and 4 are out; " + owners_by_node());
    wait_fresh_grant(6s);
    log_line("fresh grant: " + owners_by_node());
    if (what == "restart") {
      fleet_.kill(clock_node);
      fleet_.restart(clock_node);
      wait_connected({clock_node});
    } else {
      jump_clock(std::chrono::seconds(spec_.ttl_ms / 1000 * 3));
      std::this_thread::sleep_for(700ms); // a health probe reads the jumped TIME
    }
    set_proxies(stopped, fault_proxy::mode::pass);
    wait_states(
        stopped, [](const std::string& s) { return s == "ok"; }, 10s);
    log_line("after the split: " + owners_by_node());
    finish(split);
  }

  void heal_everything() {
    for (std::size_t i = 0; i < master_count; ++i) {
      if (fleet_.alive(i)) {
        fleet_.resume(i);
        continue;
      }
      try {
        fleet_.restart(i); // a restart the nemesis could not finish
      } catch (const std::exception& e) {
        log_line(std::string("heal: ") + e.what());
      }
    }
    for (auto& per_daemon : proxies_)
      for (auto& proxy : per_daemon)
        proxy->set_mode(fault_proxy::mode::pass);
    for (auto& c : clients_)
      c.signal(SIGCONT);
    for (auto& d : daemons_)
      if (const int pid = test::daemon_pid(*d); pid > 0)
        ::kill(pid, SIGCONT);
  }

  // ---- the final phase: liveness and leaks ------------------------------------------------

  // Every resource through every daemon must be lockable within the longest TTL plus the
  // quarantine (also the longest TTL), plus a little for reconnects.
  checker_result check_liveness(std::int64_t& max_ms) {
    checker_result result{"locks can be taken after heal"};
    const auto start = monotonic_ns();
    const auto bound_ns = (2 * spec_.ttl_ms + 3000) * 1'000'000;
    for (std::size_t d = 0; d < daemons_.size(); ++d)
      for (const auto& r : resources_) {
        ++result.checked;
        std::string last;
        bool done = false;
        while (!done && monotonic_ns() - start < bound_ns) {
          try {
            test::line_client c(daemons_[d]->port(), 3s);
            last = c.request("LOCK " + r + " " + std::to_string(spec_.ttl_ms));
            if (const auto grant = test::parse_lock_ok(last)) {
              max_ms = std::max(max_ms, (monotonic_ns() - start) / 1'000'000);
              c.request("UNLOCK " + r + " " + grant->owner);
              done = true;
            }
          } catch (const std::exception& e) {
            last = e.what();
          }
          if (!done)
            std::this_thread::sleep_for(100ms);
        }
        if (!done)
          result.add(r + " through daemon" + std::to_string(d) + " not lockable within " +
                     seconds_text(bound_ns) + "; last reply: " + last);
      }
    return result;
  }

  // After the heal, once every lease that may still be running has expired, no lock key may be
  // left on any master.
  checker_result check_leaks() {
    checker_result result{"no lock key left after heal"};
    const auto settle =
        std::max(last_fault_end_ns_, clients_done_ns_) + (spec_.ttl_ms + 1500) * 1'000'000;
    while (monotonic_ns() < settle)
      std::this_thread::sleep_for(100ms);
    for (std::size_t i = 0; i < master_count; ++i) {
      ++result.checked;
      for (const auto& key : fleet_.keys(i, "chaos:*"))
        result.add("node" + std::to_string(i) + " still has " + key + " (pttl " +
                   std::to_string(fleet_.pttl(i, key)) + " ms)");
    }
    return result;
  }

  // Jepsen's log-file checker: the daemons are still running (the nemesis restarts them, it
  // never leaves one dead) and their logs hold no sanitizer report and no critical error.
  checker_result check_daemon_logs() {
    checker_result result{"daemons alive, logs clean"};
    for (std::size_t d = 0; d < daemons_.size(); ++d) {
      ++result.checked;
      if (!daemons_[d]->running())
        result.add("daemon" + std::to_string(d) + " is not running");
      const std::string log = daemons_[d]->log();
      for (const char* bad : {"AddressSanitizer", "LeakSanitizer", "runtime error:", " critical "})
        if (log.find(bad) != std::string::npos)
          result.add("daemon" + std::to_string(d) + " log contains \"" + bad + "\"");
    }
    return result;
  }

  // What the daemons say they detected (counters restart with a daemon).
  std::string detected() const {
    std::uint64_t restarts = 0;
    std::uint64_t clock_jumps = 0;
    for (const auto& d : daemons_) {
      try {
        const auto counters = d->info().at("counters");
        restarts += counters.value("restarts", std::uint64_t{0});
        clock_jumps += counters.value("clock_jumps", std::uint64_t{0});
      } catch (const std::exception&) {
      }
    }
    return "master restarts " + std::to_string(restarts) + ", clock jumps " +
           std::to_string(clock_jumps);
  }

  const std::vector<fault>& faults() const { return faults_; }
  register_state store_state() const { return store_.snapshot(); }
  std::size_t daemon_count() const { return daemons_.size(); }
  std::mt19937_64& random() { return random_; }
  void note_heal() { last_fault_end_ns_ = monotonic_ns(); }

 private:
  std::vector<std::string> launch_prefix(std::size_t i) {
    if (i != clock_node)
      return {};
    test::write_file(clock_file(), "+0s\n");
    // The shim first: libfaketime must not see jemalloc's start-up clock calls.
    return {"/usr/bin/env",
            std::string("LD_PRELOAD=") + CHAOS_MALLOC_SHIM + ":" + CHAOS_LIBFAKETIME,
            "FAKETIME_TIMESTAMP_FILE=" + clock_file().string(), "FAKETIME_NO_CACHE=1",
            "FAKETIME_DONT_FAKE_MONOTONIC=1"};
  }
  fs::path clock_file() const { return work_.path() / "faketime"; }

  std::string proxy_address(std::size_t daemon, std::size_t node) const {
    return "127.0.0.1:" + std::to_string(proxies_[daemon][node]->port());
  }
  // Sets the proxies of `nodes` for every daemon.
  void set_proxies(const std::vector<std::size_t>& nodes, fault_proxy::mode m, int delay_ms = 0) {
    for (auto& per_daemon : proxies_)
      for (auto i : nodes)
        per_daemon[i]->set_mode(m, delay_ms);
  }

  // "r0=[a1b2,a1b2,-,c3d4,c3d4] ..." (owner prefixes per master), for the log.
  std::string owners_by_node() const {
    std::string out;
    for (const auto& r : resources_) {
      out += r + "=[";
      for (std::size_t i = 0; i < master_count; ++i) {
        std::string owner = "?";
        try {
          owner = fleet_.get(i, "chaos:" + r).value_or("-").substr(0, 4);
        } catch (const std::exception&) {
        }
        out += (i == 0 ? "" : ",") + owner;
      }
      out += "] ";
    }
    return out;
  }

  std::string node_names(const std::vector<std::size_t>& nodes) const {
    std::string out;
    for (auto i : nodes)
      out += (out.empty() ? "node" : ",node") + std::to_string(i);
    return out;
  }

  void finish(fault& f) {
    f.end_ns = monotonic_ns();
    last_fault_end_ns_ = f.end_ns;
    faults_.push_back(f);
    log_line((spec_.weakened ? "[weakened] " : "") + f.kind + " " + f.target);
  }

  // Polls INFO of every daemon until `accept(state)` holds for each of `nodes`.
  void wait_states(const std::vector<std::size_t>& nodes,
                   const std::function<bool(const std::string&)>& accept,
                   std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      bool all = true;
      for (std::size_t d = 0; d < daemons_.size(); ++d) {
        try {
          const auto info = daemons_[d]->info();
          for (auto i : nodes)
            all = all && accept(test::node_state(info, proxy_address(d, i)));
        } catch (const std::exception&) {
          all = false;
        }
      }
      if (all)
        return;
      std::this_thread::sleep_for(20ms);
    }
    log_line("warning: masters " + node_names(nodes) + " did not reach the expected state");
  }

  // Reconnected: "ok" or quarantined, but no longer down or connecting.
  void wait_connected(const std::vector<std::size_t>& nodes) {
    wait_states(
        nodes, [](const std::string& s) { return s != "down" && s != "connecting"; }, 10s);
  }

  // Waits until some resource's key on master 0 changes owner: a grant made just now, while the
  // split holds, so it lives on masters 0-2 only.
  void wait_fresh_grant(std::chrono::milliseconds timeout) {
    auto owners = [&] {
      std::map<std::string, std::string> out;
      for (const auto& r : resources_)
        out[r] = fleet_.get(0, "chaos:" + r).value_or("");
      return out;
    };
    const auto before = owners();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      for (const auto& [r, owner] : owners())
        if (!owner.empty() && owner != before.at(r))
          return;
      std::this_thread::sleep_for(10ms);
    }
  }

  run_spec spec_;
  test::temp_dir work_;
  std::mt19937_64 random_;
  std::chrono::seconds clock_offset_{0};
  redis_fleet fleet_;
  fenced_register store_;
  register_server server_;
  std::vector<std::vector<std::unique_ptr<fault_proxy>>> proxies_; // [daemon][master]
  std::vector<std::unique_ptr<daemon_process>> daemons_;
  std::vector<std::string> resources_;
  std::vector<child_process> clients_;
  std::vector<std::string> client_names_;
  std::vector<std::string> history_files_;
  std::vector<fault> faults_;
  std::int64_t last_fault_end_ns_ = 0;
  std::int64_t clients_done_ns_ = 0;
};

template <class Pick>
void apply_mixed_fault(cluster& c, std::size_t round, Pick& pick);

// The long mode's mix: one fault at a time, each healed before a quiet spell.
void mixed_nemesis(cluster& c, std::int64_t until_ns) {
  auto& random = c.random();
  auto pick = [&](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(random);
  };
  std::size_t round = 0;
  while (monotonic_ns() < until_ns) {
    try {
      apply_mixed_fault(c, round++, pick);
    } catch (const std::exception& e) {
      // A fault the harness could not apply or heal (e.g. a daemon not ready in time) is
      // logged; the run carries on and the checkers judge what happened.
      log_line(std::string("nemesis: ") + e.what());
      c.heal_everything();
    }
    std::this_thread::sleep_for(3s);
  }
}

template <class Pick>
void apply_mixed_fault(cluster& c, std::size_t round, Pick& pick) {
  {
    switch (round % 13) {
    case 0:
      c.kill_restart_masters({pick(master_count)});
      break;
    case 1:
      c.pause_master(pick(master_count), 3s);
      break;
    case 2:
      c.split_then("restart");
      break;
    case 3:
      c.pause_daemon(pick(c.daemon_count()), 3s);
      break;
    case 4:
      c.pause_client();
      break;
    case 5: {
      const std::size_t a = pick(master_count);
      c.kill_restart_masters({a, (a + 1 + pick(master_count - 1)) % master_count});
      break;
    }
    case 6:
      c.split_then("clock");
      break;
    case 7:
      c.restart_daemon(pick(c.daemon_count()));
      break;
    case 8:
      c.flushall(pick(master_count));
      break;
    case 9:
      c.jump_clock(20s);
      break;
    case 10:
      c.blackhole_master(pick(master_count), 3s);
      break;
    case 11:
      c.delay_master(pick(master_count), pick(2) == 0 ? 40 : 150, 4s);
      break;
    default:
      c.split_daemons(4s);
      break;
    }
  }
}

run_report run_one(const run_spec& spec) {
  run_report report;
  report.title = spec.schedule +
                 (spec.weakened ? " / weakened daemon (unsafe_disable_quarantine)" : " / redlockd");
  log_line("run: " + report.title + " seed " + std::to_string(spec.seed));
  try {
    cluster c(spec);
    const auto start = monotonic_ns();
    const std::int64_t horizon = std::chrono::nanoseconds(spec.duration).count();
    // The clients stop when told to (a stop file), after the nemesis and a quiet spell; this
    // deadline only bounds them should the harness die.
    const std::int64_t quiet_after_ns = 2'000'000'000;
    c.start_clients(start + horizon + 600'000'000'000LL);
    std::this_thread::sleep_for(2s); // warm up: locks are being taken before the first fault
    if (spec.schedule == "mixed") {
      mixed_nemesis(c, start + horizon);
    } else {
      for (int k = 0; k < spec.cycles; ++k) {
        c.split_then(spec.schedule == "split-restart" ? "restart" : "clock");
        // Give the intruders time while the first holders' leases are still running.
        std::this_thread::sleep_for(std::chrono::milliseconds(spec.ttl_ms + 1000));
      }
    }
    c.heal_everything();
    c.note_heal();
    log_line("heal; waiting for the clients to finish");
    std::this_thread::sleep_for(std::chrono::nanoseconds(quiet_after_ns));
    c.stop_clients(std::chrono::milliseconds(spec.hold_max_ms + 8000));
    log_line("clients stopped; checking");
    report.detected = c.detected();
    auto history = c.history();
    auto final_store = c.store_state();
    report.checks.push_back(check_validity_overlap(history));
    report.checks.push_back(check_fence_order(history));
    report.checks.push_back(check_lost_writes(history, final_store));
    report.checks.push_back(c.check_liveness(report.liveness_max_ms));
    log_line("liveness checked");
    report.checks.push_back(c.check_leaks());
    log_line("leaks checked");
    report.checks.push_back(c.check_daemon_logs());
    report.stale = count_stale_writes(history);
    report.store = final_store;
    for (const auto& op : history)
      ++report.ops[op.kind][op.outcome];
    for (const auto& f : c.faults())
      ++report.faults[f.kind];
  } catch (const std::exception& e) {
    report.error = e.what();
  }
  return report;
}

void print_report(const run_report& r) {
  std::cout << "\n=== " << r.title << " ===\n";
  if (!r.error.empty()) {
    std::cout << "HARNESS ERROR: " << r.error << "\n";
    return;
  }
  std::cout << "operations (ok / fail / unknown):\n";
  for (const auto& [kind, outcomes] : r.ops) {
    auto count = [&](const char* o) {
      const auto it = outcomes.find(o);
      return it == outcomes.end() ? std::size_t{0} : it->second;
    };
    std::cout << "  " << kind << ": " << count("ok") << " / " << count("fail") << " / "
              << count("info") << "\n";
  }
  std::cout << "faults applied:";
  for (const auto& [kind, n] : r.faults)
    std::cout << " " << kind << "=" << n;
  std::cout << "\nregister: writes accepted " << r.store.writes_accepted
            << ", stale writes rejected " << r.store.writes_rejected << ", stale reads rejected "
            << r.store.reads_rejected << "; writes after their lease ended: " << r.stale.stale
            << " (rejected " << r.stale.rejected << ", accepted with no newer holder "
            << r.stale.accepted << ")\n";
  std::cout << "daemons detected (INFO counters, since their last start): " << r.detected << "\n";
  std::cout << "liveness: slowest lock after heal " << r.liveness_max_ms << " ms\n";
  std::cout << "checkers (violations / checked):\n";
  for (const auto& c : r.checks) {
    std::cout << "  " << c.name << ": " << c.violations << " / " << c.checked << "\n";
    for (const auto& e : c.examples)
      std::cout << "      " << e << "\n";
  }
}

int usage() {
  std::cerr << "usage: redlockd-chaos --short\n"
               "       redlockd-chaos --long [MINUTES]   (default 12: 2/3 redlockd, 1/3 weakened)\n"
               "       redlockd-chaos --one split-restart|split-clock|mixed [--weakened]\n";
  return 2;
}

int run_short() {
  std::vector<std::pair<run_spec, run_report>> runs;
  for (const std::string schedule : {"split-restart", "split-clock"})
    for (const bool weakened : {false, true}) {
      run_spec spec;
      spec.schedule = schedule;
      spec.weakened = weakened;
      runs.emplace_back(spec, run_one(spec));
    }
  bool pass = true;
  std::cout << "\n##### redlockd-chaos --short #####\n";
  for (const auto& [spec, report] : runs) {
    print_report(report);
    const bool ok = report.error.empty() &&
                    (spec.weakened ? report.safety_violations() > 0 : report.all_violations() == 0);
    std::cout << (ok ? "PASS: " : "FAIL: ")
              << (spec.weakened ? "the weakened daemon must show at least one safety violation"
                                : "redlockd must show no violation")
              << "\n";
    pass = pass && ok;
  }
  std::cout << "\n" << (pass ? "chaos short: PASS" : "chaos short: FAIL") << std::endl;
  return pass ? 0 : 1;
}

int run_long(int minutes) {
  run_spec safe;
  safe.schedule = "mixed";
  safe.duration = std::chrono::seconds(minutes * 60 * 2 / 3);
  run_spec weak = safe;
  weak.weakened = true;
  weak.duration = std::chrono::seconds(minutes * 60 / 3);
  const auto safe_report = run_one(safe);
  const auto weak_report = run_one(weak);
  std::cout << "\n##### redlockd-chaos --long (" << minutes << " min) #####\n";
  print_report(safe_report);
  print_report(weak_report);
  const bool pass = safe_report.error.empty() && safe_report.all_violations() == 0;
  std::cout << "\n"
            << (pass ? "chaos long: PASS" : "chaos long: FAIL") << " (redlockd violations "
            << safe_report.all_violations() << ", weakened safety violations "
            << weak_report.safety_violations() << ")" << std::endl;
  return pass ? 0 : 1;
}

} // namespace
} // namespace redlockd::chaos

int main(int argc, char** argv) {
  using namespace redlockd::chaos;
  std::vector<std::string> args(argv + 1, argv + argc);
  ::signal(SIGPIPE, SIG_IGN);
  if (!args.empty() && args[0] == "client") {
    const auto options = parse_client_options({args.begin() + 1, args.end()});
    if (!options) {
      std::cerr << "redlockd-chaos client: bad arguments\n";
      return 2;
    }
    try {
      return run_client(*options);
    } catch (const std::exception& e) {
      std::cerr << "redlockd-chaos client: " << e.what() << "\n";
      return 1;
    }
  }
  if (args.size() == 1 && args[0] == "--short")
    return run_short();
  if (!args.empty() && args[0] == "--long")
    return run_long(args.size() > 1 ? std::stoi(args[1]) : 12);
  if (!args.empty() && args[0] == "--one" && args.size() >= 2) {
    run_spec spec;
    spec.schedule = args[1];
    spec.weakened = args.size() > 2 && args[2] == "--weakened";
    if (spec.schedule == "mixed")
      spec.duration = 90s;
    const auto report = run_one(spec);
    print_report(report);
    return report.error.empty() && (spec.weakened || report.all_violations() == 0) ? 0 : 1;
  }
  return usage();
}
