// redlockd-chaos: a Jepsen-style fault-injection suite for redlockd. See tests/chaos/README.md.
//
//   redlockd-chaos [--daemon-bin PATH] --short           every schedule once, plus the controls
//                                                        (not the lock family's schedules)
//   redlockd-chaos [--daemon-bin PATH] --kinds           the lock family's schedules and controls
//   redlockd-chaos [--daemon-bin PATH] --long [MINUTES]  every schedule longer, then the mix
//   redlockd-chaos [--daemon-bin PATH] --one SCHEDULE [--weakened] [--cycles N]
//   redlockd-chaos client ...         one client process (started by the harness)
#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "chaos_daemon.hpp"
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
using test::redis_fleet;

constexpr std::size_t master_count = 5;
// The master that runs under libfaketime and takes the clock jumps and the split restarts.
constexpr std::size_t clock_node = 2;
// The two masters the split schedules cut off, so that grants land on exactly 0, 1 and 2.
constexpr std::size_t split_nodes[] = {3, 4};

std::string seconds_text(std::int64_t ns) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << static_cast<double>(ns) / 1e9 << " s";
  return out.str();
}

// Four characters of an owner that tell holders apart in the log: past the kind and slot of the
// lock family's owners ("0000", kind, slot).
std::string owner_tag(const std::string& owner) {
  return owner.substr(owner.starts_with("0000") && owner.size() >= 12 ? 8 : 0, 4);
}

void log_line(const std::string& text) {
  std::cerr << "[chaos " << seconds_text(monotonic_ns()) << "] " << text << std::endl;
}

// One client process of a run.
struct client_plan {
  std::size_t daemon = 0;
  std::string mode = "lease"; // lease, extend, wait, keep, shared, permit, set (client.hpp)
  std::int64_t ttl_ms = 5000;
  std::int64_t hold_min_ms = 1500; // long enough to outlast the heal of a split
  std::int64_t hold_max_ms = 3500;
};

// What one run does.
struct run_spec {
  std::string schedule;
  bool weakened = false;
  // The weakened daemon's flag, and the checker that must flag it ("": any safety checker).
  std::string weakening = "unsafe_disable_quarantine";
  std::string weakened_caught_by;
  int cycles = 2;
  std::chrono::seconds duration = 60s; // mixed: how long the nemesis runs
  std::string daemon_bin;
  std::vector<client_plan> clients;
  int resources = 3;
  // Sets also name these, beyond `resources` (only sets contend there): on the resources every
  // client hammers, a set rarely finds all its members free at once.
  int set_only_resources = 2;
  // The permit clients' semaphore (a namespace apart from the resources' locks) and its n.
  std::string semaphore = "s0";
  int permits = 2;
  // split-daemons: hold the split until a fresh permit lives on each side (T-c1).
  bool split_permits = false;
  // C4-RW's bound (0: not checked): a writer refused BUSY after waiting this long is starved.
  std::int64_t writer_wait_bound_ms = 0;
  nlohmann::json daemon_config = nlohmann::json::object(); // more daemon settings
  // Daemon 1 reaches masters 3 and 4 only through a blackhole for the whole run (two-daemon
  // restart: its grants land on masters 0-2 only).
  bool daemon1_without_3_4 = false;
  // The pass rule's floor: a run where too little happened proves nothing.
  std::size_t min_grants = 10;
  std::size_t min_writes = 5;
  std::uint64_t seed = std::random_device{}();

  std::int64_t max_ttl_ms() const {
    std::int64_t ttl = 0;
    for (const auto& c : clients)
      ttl = std::max(ttl, c.ttl_ms);
    return ttl;
  }
  std::int64_t max_hold_ms() const {
    std::int64_t hold = 0;
    for (const auto& c : clients)
      hold = std::max(hold, c.hold_max_ms * (c.mode == "extend" ? 2 : 1));
    return hold;
  }
  bool has_mode(const std::string& mode) const {
    return std::any_of(clients.begin(), clients.end(),
                       [&](const client_plan& c) { return c.mode == mode; });
  }
};

// What the faults must have done for a run to count: each line is one expectation.
struct bite {
  std::string what;
  bool met = false;
};

struct run_report {
  std::string title;
  std::string schedule;
  bool weakened = false;
  std::string weakened_caught_by; // the checker that must flag the weakened daemon, if one
  std::string error;              // set when the harness itself failed (no verdict)
  std::map<std::string, std::map<std::string, std::size_t>> ops; // kind -> outcome -> count
  std::map<std::string, std::size_t> faults;
  std::vector<checker_result> checks;
  std::vector<bite> bites;
  std::vector<std::string> client_exits; // clients that did not exit 0
  stale_write_counts stale;
  register_state store;
  std::int64_t liveness_max_ms = 0;
  std::string detected;  // what the daemons said they noticed
  std::string artifacts; // where the histories and logs of a failed run were copied
  std::size_t grants = 0;
  std::size_t writes = 0;
  std::size_t min_grants = 0;
  std::size_t min_writes = 0;

  static bool is_safety(const checker_result& c) {
    return c.name != "locks can be taken after heal" && c.name != "no lock key left after heal" &&
           c.name != "daemons alive, logs clean" && !c.name.starts_with("C4-RW ");
  }
  std::size_t safety_violations() const {
    std::size_t n = 0;
    for (const auto& c : checks)
      if (is_safety(c))
        n += c.violations;
    return n;
  }
  // The violations of the checker whose name starts with `id` ("C1-k").
  std::size_t violations_of(const std::string& id) const {
    std::size_t n = 0;
    for (const auto& c : checks)
      if (c.name.starts_with(id + " "))
        n += c.violations;
    return n;
  }
  std::size_t all_violations() const {
    std::size_t n = 0;
    for (const auto& c : checks)
      n += c.violations;
    return n;
  }
  // Everything but the verdict of the checkers: enough happened, the faults bit, the clients
  // and the history are sound.
  std::vector<std::string> validity_problems() const {
    std::vector<std::string> out;
    if (!error.empty())
      out.push_back("harness error: " + error);
    if (grants < min_grants)
      out.push_back("only " + std::to_string(grants) + " grants (at least " +
                    std::to_string(min_grants) + " needed)");
    if (writes < min_writes)
      out.push_back("only " + std::to_string(writes) + " register writes accepted (at least " +
                    std::to_string(min_writes) + " needed)");
    for (const auto& b : bites)
      if (!b.met)
        out.push_back("the fault did not bite: " + b.what);
    for (const auto& c : client_exits)
      out.push_back(c);
    return out;
  }
};

// The masters, daemons, register and clients of one run, and the nemesis's hands on them.
class cluster {
 public:
  explicit cluster(const run_spec& spec)
      : spec_(spec), work_("redlockd-chaos"), random_(spec.seed),
        fleet_(master_count, [this](std::size_t i) { return launch_prefix(i); }),
        server_(store_, work_.path() / "register.sock") {
    for (std::size_t d = 0; d < 2; ++d) {
      // Each daemon reaches each master through its own fault proxy.
      proxies_.emplace_back();
      std::vector<std::string> nodes;
      for (std::size_t i = 0; i < master_count; ++i) {
        proxies_.back().push_back(std::make_unique<fault_proxy>(fleet_.port(i)));
        nodes.push_back(proxy_address(d, i));
      }
      if (d == 1 && spec_.daemon1_without_3_4)
        for (auto i : split_nodes)
          proxies_[1][i]->set_mode(fault_proxy::mode::blackhole);
      nlohmann::json extra = {{"key_prefix", "chaos:"},
                              {"node_timeout_ms", 100},
                              {"unsafe_disable_quarantine", false},
                              {"max_ttl_ms", 60000}};
      if (spec_.weakened)
        extra[spec_.weakening] = true;
      for (const auto& [key, value] : spec_.daemon_config.items())
        extra[key] = value;
      // Three masters: restarted ones may be quarantined when a daemon (re)starts.
      daemons_.push_back(std::make_unique<chaos_daemon>(
          spec_.daemon_bin, work_.path() / ("daemon" + std::to_string(d)), nodes, extra, 3));
    }
    banked_.resize(daemons_.size());
    const int sets_only = spec_.has_mode("set") ? spec_.set_only_resources : 0;
    for (int r = 0; r < spec_.resources + sets_only; ++r)
      resources_.push_back("r" + std::to_string(r));
  }

  ~cluster() { heal_everything(); }

  void start_clients(std::int64_t until_ns) {
    for (std::size_t c = 0; c < spec_.clients.size(); ++c) {
      const auto& plan = spec_.clients[c];
      client_options o;
      o.name = "c" + std::to_string(c);
      o.mode = plan.mode;
      o.daemon_index = static_cast<int>(plan.daemon);
      o.daemon_port = daemons_[plan.daemon]->port();
      o.register_socket = server_.path().string();
      o.history_file = (work_.path() / (o.name + ".history")).string();
      if (plan.mode == "permit")
        o.resources = {spec_.semaphore};
      else if (plan.mode == "set")
        o.resources = resources_;
      else
        o.resources = {resources_.begin(), resources_.begin() + spec_.resources};
      o.permits = spec_.permits;
      o.ttl_ms = plan.ttl_ms;
      o.hold_min_ms = plan.hold_min_ms;
      o.hold_max_ms = plan.hold_max_ms;
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
  // one. Returns a line for each client that did not exit 0 (killed after `grace`).
  std::vector<std::string> stop_clients(std::chrono::milliseconds grace) {
    test::write_file(work_.path() / "stop", "stop\n");
    std::vector<std::string> problems;
    const auto deadline = std::chrono::steady_clock::now() + grace;
    for (std::size_t c = 0; c < clients_.size(); ++c) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      auto status = clients_[c].wait_for(std::max(left, std::chrono::milliseconds(1)));
      if (!status) {
        clients_[c].kill();
        problems.push_back("client " + client_names_[c] + " did not stop within " +
                           std::to_string(grace.count()) + " ms");
      } else if (*status != 0) {
        problems.push_back("client " + client_names_[c] + " exited with status " +
                           std::to_string(*status) + ": " +
                           test::file_tail(work_.path() / (client_names_[c] + ".log"), 400));
      }
    }
    clients_done_ns_ = monotonic_ns();
    return problems;
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
    restarts_made_ += nodes.size();
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
    fault f{"pause-daemon", "daemon" + std::to_string(d), monotonic_ns()};
    daemons_[d]->pause();
    std::this_thread::sleep_for(length);
    daemons_[d]->resume();
    finish(f);
  }

  void restart_daemon(std::size_t d) {
    fault f{"kill-restart-daemon", "daemon" + std::to_string(d), monotonic_ns()};
    bank_counters(d);
    daemons_[d]->kill();
    daemons_[d]->start(); // same port and config, waits for three masters
    finish(f);
  }

  // Waits (up to `timeout`) until daemon d holds at least one KEEP lock; the count seen.
  std::uint64_t wait_keep_locks(std::size_t d, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::uint64_t held = 0;
    while (held == 0 && std::chrono::steady_clock::now() < deadline) {
      try {
        held = daemons_[d]->info().value("keep_locks", std::uint64_t{0});
      } catch (const std::exception&) {
      }
      if (held == 0)
        std::this_thread::sleep_for(20ms);
    }
    return held;
  }

  // (c): kill -9 a daemon while it holds KEEP locks, restart it a second later. The locks stay
  // on the masters until their TTL: nobody may take them within ttl/2 (checker C5).
  void kill_daemon_with_keep(std::size_t d) {
    const auto held = wait_keep_locks(d, 8s);
    fault f{"kill-daemon-keep", "daemon" + std::to_string(d), monotonic_ns()};
    bank_counters(d);
    daemons_[d]->kill();
    kills_.emplace_back(static_cast<int>(d), f.start_ns);
    bites_.push_back({"daemon" + std::to_string(d) + " held KEEP locks when killed (INFO " +
                          "keep_locks " + std::to_string(held) + ")",
                      held > 0});
    std::this_thread::sleep_for(1s);
    daemons_[d]->start();
    finish(f);
  }

  // (d): SIGSTOP a daemon holding KEEP locks for longer than their TTL, then SIGCONT.
  void pause_daemon_with_keep(std::size_t d, std::chrono::milliseconds length) {
    const auto held = wait_keep_locks(d, 8s);
    bites_.push_back({"daemon" + std::to_string(d) + " held KEEP locks when paused (INFO " +
                          "keep_locks " + std::to_string(held) + ")",
                      held > 0});
    pause_daemon(d, length);
  }

  // (b): a master restarts empty while a daemon is down; the daemon must see it at start.
  void restart_master_while_daemon_down(std::size_t d, std::size_t node) {
    fault f{"restart-master-daemon-down", "daemon" + std::to_string(d) + "," + node_names({node}),
            monotonic_ns()};
    bank_counters(d);
    daemons_[d]->kill();
    fleet_.kill(node);
    fleet_.restart(node);
    restarts_made_ += 1;
    restarts_seen_at_start_ += 1; // daemon d cannot count it: it checks the state at its start
    std::this_thread::sleep_for(300ms);
    // Not start(): it waits for three voting masters, and when every master restarted within
    // the longest TTL (an early fault) that is when every quarantine, this one's too, ended.
    daemons_[d]->launch();
    // The restart happened less than the longest TTL ago: the daemon must keep the master out.
    bool seen = false;
    const auto deadline = std::chrono::steady_clock::now() + 3s;
    std::string state;
    while (!seen && std::chrono::steady_clock::now() < deadline) {
      try {
        state = test::node_state(daemons_[d]->info(), proxy_address(d, node));
        seen = state.rfind("quarantined", 0) == 0;
      } catch (const std::exception& e) {
        state = e.what();
      }
      if (!seen)
        std::this_thread::sleep_for(20ms);
    }
    bites_.push_back({"daemon" + std::to_string(d) + " started after " + node_names({node}) +
                          " restarted empty and quarantined it (INFO state: " + state + ")",
                      seen});
    daemons_[d]->wait_ready();
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
    std::this_thread::sleep_for(std::chrono::milliseconds(spec_.max_ttl_ms() + 1500));
    client.signal(SIGCONT);
    finish(f);
  }

  // libfaketime re-reads the offset file on every clock call: the jump is immediate.
  void jump_clock(std::chrono::milliseconds by) {
    fault f{by.count() >= 0 ? "clock-jump" : "clock-jump-backward", node_names({clock_node}),
            monotonic_ns()};
    set_clock(clock_offset_ + by);
    if (by.count() >= 0)
      forward_jumps_made_ += 1;
    else
      backward_jumps_made_ += 1;
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

  // (e) Two daemons, two views (Kleppmann's A,B,C vs C,D,E): daemon 0 loses masters 3 and 4,
  // daemon 1 loses masters 0 and 1; both still see a majority that overlaps only in master 2.
  void split_daemons(std::chrono::milliseconds length) {
    fault f{"split-daemons", "daemon0:-node3,node4 daemon1:-node0,node1", monotonic_ns()};
    for (auto i : {3, 4})
      proxies_[0][static_cast<std::size_t>(i)]->set_mode(fault_proxy::mode::blackhole);
    for (auto i : {0, 1})
      proxies_[1][static_cast<std::size_t>(i)]->set_mode(fault_proxy::mode::blackhole);
    const bool d0 = wait_states_of(
        0, {3, 4}, [](const std::string& s) { return s != "ok"; }, 5s);
    const bool d1 = wait_states_of(
        1, {0, 1}, [](const std::string& s) { return s != "ok"; }, 5s);
    bites_.push_back({"daemon0 saw masters 3,4 down and daemon1 saw 0,1 down", d0 && d1});
    if (!spec_.split_permits) {
      std::this_thread::sleep_for(length);
      set_proxies({0, 1, 3, 4}, fault_proxy::mode::pass);
      finish(f);
      return;
    }
    // T-c1 (research note §8): the split lasts until a permit granted through daemon0 lives on
    // masters 0-2 only and one granted through daemon1 on 2-4 only, both young enough to be held
    // through the heal. Then every master but 2 has a free slot: a third request through either
    // daemon that counts permits per master is granted by four masters.
    std::int64_t ttl = 0;
    for (const auto& c : spec_.clients)
      if (c.mode == "permit")
        ttl = std::max(ttl, c.ttl_ms);
    const bool staged = wait_split_permits(20s, ttl - 3000);
    log_line("permits at the heal, " + seconds_text(monotonic_ns() - f.start_ns) +
             " into the split: " + permits_by_node());
    set_proxies({0, 1, 3, 4}, fault_proxy::mode::pass);
    // Healed for the third request while the two still hold (the daemons reconnect fast here).
    const bool healed = wait_states_of(
                            0, {3, 4}, [](const std::string& s) { return s == "ok"; }, 5s) &&
                        wait_states_of(
                            1, {0, 1}, [](const std::string& s) { return s == "ok"; }, 5s);
    bites_.push_back({"a permit of " + spec_.semaphore +
                          " through daemon0 on masters 0-2 only and one through daemon1 on 2-4 "
                          "only were held together when the split healed",
                      staged && healed});
    finish(f);
  }

  void flushall(std::size_t node) {
    fault f{"flushall", node_names({node}), monotonic_ns()};
    fleet_.run(node, "FLUSHALL");
    finish(f);
  }

  // The reliable road to a double grant when quarantine is off: cut two masters off so that the
  // next grants land on exactly three, let one land, then make one of the three forget it
  // (restart it empty, jump its clock past the TTL in one step, or creep its clock forward in
  // steps each below the old fixed 500 ms bound), and bring the two back. Whoever asks for that
  // resource next finds it free on three masters out of five. `heal_first` brings the two back
  // before the forgetting (KEEP: the holder's renewals must not see the two missing first).
  //
  // The cut is a blackhole in the proxies, not SIGSTOP: commands sent to a stopped master wait
  // in its socket buffer and run when it resumes, so the SET NX of the holder's lock lands on
  // the two late, with a fresh TTL, and blocks the intruder (seen in the first runs).
  void split_then(const std::string& what, bool heal_first = false) {
    const std::vector<std::size_t> stopped(std::begin(split_nodes), std::end(split_nodes));
    fault split{"split-" + what, node_names(stopped) + "+" + node_names({clock_node}),
                monotonic_ns()};
    set_proxies(stopped, fault_proxy::mode::blackhole);
    // Until every daemon has given up on them, commands may still queue towards them.
    wait_states(
        stopped, [](const std::string& s) { return s != "ok"; }, 10s);
    // Keys the two still hold from before the cut (their UNLOCKs no longer arrive) would block
    // the intruder on the healed side: let them expire first.
    std::this_thread::sleep_for(std::chrono::milliseconds(spec_.max_ttl_ms() + 200));
    log_line("split: masters 3 and 4 are out; " + owners_by_node());
    const auto fresh = wait_fresh_grant(10s);
    log_line("fresh grant of " + fresh.value_or("(none)") + ": " + owners_by_node());
    bites_.push_back(
        {"a fresh grant landed on masters 0-2 only before node2 forgot it", fresh.has_value()});
    if (heal_first) {
      set_proxies(stopped, fault_proxy::mode::pass);
      wait_states(
          stopped, [](const std::string& s) { return s == "ok"; }, 10s);
    }
    if (what == "restart") {
      fleet_.kill(clock_node);
      fleet_.restart(clock_node);
      restarts_made_ += 1;
      wait_connected({clock_node});
    } else if (what == "clock") {
      jump_clock(std::chrono::milliseconds(spec_.max_ttl_ms() * 3));
      std::this_thread::sleep_for(700ms); // a health probe reads the jumped TIME
    } else {
      // Creep: 450 ms steps, one per 600 ms (a daemon samples an idle master's TIME every
      // 500 ms, more often under load), until the fresh key is gone from the clock node.
      for (int step = 0; step < 24; ++step) {
        set_clock(clock_offset_ + 450ms);
        forward_jumps_made_ += 1;
        std::this_thread::sleep_for(600ms);
        if (fresh && !fleet_.get(clock_node, "chaos:" + *fresh))
          break;
      }
      log_line("clock of node2 now +" + std::to_string(clock_offset_.count()) + " ms");
    }
    if (!heal_first) {
      set_proxies(stopped, fault_proxy::mode::pass);
      wait_states(
          stopped, [](const std::string& s) { return s == "ok"; }, 10s);
    }
    log_line("after the split: " + owners_by_node());
    finish(split);
  }

  // (a) Issue 11 bug 1. Daemon 1 grants long TTLs, on masters 0-2 only (it never reaches 3 and
  // 4); daemon 0 grants only short ones. Once a long grant is fresh, master 2 restarts empty.
  // A daemon that quarantines it only for the longest TTL it granted itself (daemon 0: short)
  // lets daemon 0's clients take the resource on masters 2, 3, 4 while the long lease runs.
  void two_daemon_restart() {
    fault f{"two-daemon-restart", node_names({clock_node}), monotonic_ns()};
    const auto fresh = wait_long_grant(15s);
    log_line("long grant of " + fresh.value_or("(none)") + ": " + owners_by_node());
    bites_.push_back({"a fresh long lease of daemon1 was on masters 0-2 when node2 restarted",
                      fresh.has_value()});
    fleet_.kill(clock_node);
    fleet_.restart(clock_node);
    restarts_made_ += 1;
    wait_states_of(
        0, {clock_node}, [](const std::string& s) { return s != "down" && s != "connecting"; },
        10s);
    finish(f);
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
      d->resume();
  }

  // ---- the final phase: liveness and leaks ------------------------------------------------

  // Every resource through every daemon must be lockable within the longest TTL plus the
  // quarantine (also the longest TTL), plus a little for reconnects.
  checker_result check_liveness(std::int64_t& max_ms) {
    checker_result result{"locks can be taken after heal"};
    const auto start = monotonic_ns();
    const auto ttl = spec_.max_ttl_ms();
    const auto bound_ns = (2 * ttl + 3000) * 1'000'000;
    std::vector<std::pair<std::string, std::string>> locks; // (name, request)
    for (const auto& r : resources_)
      locks.emplace_back(r, "LOCK " + r + " " + std::to_string(ttl));
    if (spec_.has_mode("permit"))
      locks.emplace_back(spec_.semaphore, "LOCK " + spec_.semaphore + " " + std::to_string(ttl) +
                                              " PERMITS " + std::to_string(spec_.permits));
    for (std::size_t d = 0; d < daemons_.size(); ++d)
      for (const auto& [r, request] : locks) {
        ++result.checked;
        std::string last;
        bool done = false;
        while (!done && monotonic_ns() - start < bound_ns) {
          try {
            test::line_client c(daemons_[d]->port(), 3s);
            last = c.request(request);
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
        std::max(last_fault_end_ns_, clients_done_ns_) + (spec_.max_ttl_ms() + 1500) * 1'000'000;
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
  // never leaves one dead), stop cleanly on SIGTERM (so that LeakSanitizer runs under ASan) and
  // their logs hold no sanitizer report and no critical error.
  checker_result stop_daemons_and_check_logs() {
    checker_result result{"daemons alive, logs clean"};
    for (std::size_t d = 0; d < daemons_.size(); ++d) {
      ++result.checked;
      if (!daemons_[d]->running())
        result.add("daemon" + std::to_string(d) + " is not running");
      bank_counters(d);
      if (const int status = daemons_[d]->stop(); status != 0)
        result.add("daemon" + std::to_string(d) + " exited with status " + std::to_string(status) +
                   " on SIGTERM");
      const std::string log = daemons_[d]->log();
      for (const char* bad : {"AddressSanitizer", "LeakSanitizer", "runtime error:", " critical "})
        if (log.find(bad) != std::string::npos)
          result.add("daemon" + std::to_string(d) + " log contains \"" + bad + "\"");
    }
    return result;
  }

  // The INFO counters of daemon d summed over its lives (banked before each kill and at the end).
  std::uint64_t counter(std::size_t d, const std::string& name) const {
    const auto it = banked_[d].find(name);
    return it == banked_[d].end() ? 0 : it->second;
  }

  // The faults the schedule made that the daemons must have reported.
  void expect_detections() {
    for (std::size_t d = 0; d < daemons_.size(); ++d) {
      const auto restarts = counter(d, "restarts");
      const auto jumps = counter(d, "clock_jumps");
      const auto backward = counter(d, "clock_jumps_backward");
      detected_ += "daemon" + std::to_string(d) + ": restarts " + std::to_string(restarts) +
                   ", clock_jumps " + std::to_string(jumps) + ", key_losses " +
                   std::to_string(counter(d, "key_losses")) + ", clock_jumps_backward " +
                   std::to_string(backward) + ", lost " + std::to_string(counter(d, "lost")) +
                   ", handovers " + std::to_string(counter(d, "handovers")) + "; ";
    }
    // Restarts while a daemon runs are counted by it (new run_id); a restart while it was down
    // is checked at its start (quarantined state), not here.
    if (restarts_made_ > restarts_seen_at_start_) {
      const auto made = restarts_made_ - restarts_seen_at_start_;
      for (std::size_t d = 0; d < daemons_.size(); ++d)
        bites_.push_back({"daemon" + std::to_string(d) + " counted the " + std::to_string(made) +
                              " master restart(s) made while it ran (INFO restarts " +
                              std::to_string(counter(d, "restarts")) + ")",
                          counter(d, "restarts") >= made});
    }
    if (forward_jumps_made_ > 0) {
      std::uint64_t jumps = 0;
      for (std::size_t d = 0; d < daemons_.size(); ++d)
        jumps += counter(d, "clock_jumps");
      bites_.push_back({"the daemons counted the forward clock jumps of node2 (" +
                            std::to_string(forward_jumps_made_) + " made, INFO clock_jumps " +
                            std::to_string(jumps) + ")",
                        jumps > 0});
    }
    if (backward_jumps_made_ > 0) {
      std::uint64_t counted = 0;
      for (std::size_t d = 0; d < daemons_.size(); ++d)
        counted += counter(d, "clock_jumps_backward");
      bites_.push_back({"the daemons counted the backward clock jumps of node2 (" +
                            std::to_string(backward_jumps_made_) + " made, INFO " +
                            "clock_jumps_backward " + std::to_string(counted) + ")",
                        counted >= backward_jumps_made_});
    }
  }

  const std::vector<fault>& faults() const { return faults_; }
  const std::vector<bite>& bites() const { return bites_; }
  const std::string& detected() const { return detected_; }
  const std::vector<std::pair<int, std::int64_t>>& kills() const { return kills_; }
  register_state store_state() const { return store_.snapshot(); }
  const fs::path& work_path() const { return work_.path(); }
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
  void set_clock(std::chrono::milliseconds offset) {
    clock_offset_ = offset;
    std::ostringstream text;
    text.setf(std::ios::fixed);
    text.precision(3);
    text << (offset.count() >= 0 ? "+" : "") << static_cast<double>(offset.count()) / 1000.0
         << "s\n";
    test::write_file(clock_file(), text.str());
  }

  // Adds daemon d's INFO counters to its bank (before it is killed or stopped).
  void bank_counters(std::size_t d) {
    try {
      const auto counters = daemons_[d]->info().at("counters");
      for (const auto& [name, value] : counters.items())
        if (value.is_number_unsigned())
          banked_[d][name] += value.get<std::uint64_t>();
    } catch (const std::exception& e) {
      log_line("daemon" + std::to_string(d) + ": counters not read before the kill: " + e.what());
    }
  }

  std::string proxy_address(std::size_t daemon, std::size_t node) const {
    return "127.0.0.1:" + std::to_string(proxies_[daemon][node]->port());
  }
  // Sets the proxies of `nodes` for every daemon (daemon 1 keeps its blackhole to 3 and 4 when
  // the run says so).
  void set_proxies(const std::vector<std::size_t>& nodes, fault_proxy::mode m, int delay_ms = 0) {
    for (std::size_t d = 0; d < proxies_.size(); ++d)
      for (auto i : nodes)
        if (!(d == 1 && spec_.daemon1_without_3_4 && (i == 3 || i == 4)))
          proxies_[d][i]->set_mode(m, delay_ms);
  }

  // "r0=[a1b2,a1b2,-,c3d4,c3d4] ..." (owner prefixes per master), for the log.
  std::string owners_by_node() const {
    std::string out = spec_.has_mode("permit") ? permits_by_node() + " " : "";
    for (const auto& r : resources_) {
      out += r + "=[";
      for (std::size_t i = 0; i < master_count; ++i) {
        std::string owner = "?";
        try {
          owner = owner_tag(fleet_.get(i, "chaos:" + r).value_or("-"));
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

  // Polls INFO of daemon d until `accept(state)` holds for each of `nodes`; false on timeout.
  bool wait_states_of(std::size_t d, const std::vector<std::size_t>& nodes,
                      const std::function<bool(const std::string&)>& accept,
                      std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      bool all = true;
      try {
        const auto info = daemons_[d]->info();
        for (auto i : nodes)
          all = all && accept(test::node_state(info, proxy_address(d, i)));
      } catch (const std::exception&) {
        all = false;
      }
      if (all)
        return true;
      std::this_thread::sleep_for(20ms);
    }
    log_line("warning: daemon" + std::to_string(d) + ": masters " + node_names(nodes) +
             " did not reach the expected state");
    return false;
  }
  // The same for every daemon (daemon 1 without 3 and 4 is not asked about them).
  void wait_states(const std::vector<std::size_t>& nodes,
                   const std::function<bool(const std::string&)>& accept,
                   std::chrono::milliseconds timeout) {
    for (std::size_t d = 0; d < daemons_.size(); ++d) {
      std::vector<std::size_t> mine;
      for (auto i : nodes)
        if (!(d == 1 && spec_.daemon1_without_3_4 && (i == 3 || i == 4)))
          mine.push_back(i);
      wait_states_of(d, mine, accept, timeout);
    }
  }

  // Reconnected: "ok" or quarantined, but no longer down or connecting.
  void wait_connected(const std::vector<std::size_t>& nodes) {
    wait_states(
        nodes, [](const std::string& s) { return s != "down" && s != "connecting"; }, 10s);
  }

  // Waits until some resource's key on master 0 changes owner: a grant made just now, while the
  // split holds, so it lives on masters 0-2 only. Returns that resource.
  std::optional<std::string> wait_fresh_grant(std::chrono::milliseconds timeout) {
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
          return r;
      std::this_thread::sleep_for(10ms);
    }
    log_line("warning: no fresh grant within " + std::to_string(timeout.count()) + " ms");
    return std::nullopt;
  }

  // Each master's permits of the semaphore: per slot, the owner ("" if free) and its PTTL, read
  // in one script call per master. A master stores the owner with the slot it gave (characters
  // 6-8), which the weakened daemon lets differ between masters: compare past them.
  std::vector<std::vector<std::pair<std::string, long long>>> permit_keys() const {
    static const std::string script =
        "local out = {} for i, key in ipairs(KEYS) do local v = redis.call('get', key) "
        "out[2 * i - 1] = v and string.sub(v, 1, 40) or '' out[2 * i] = redis.call('pttl', key) "
        "end return out";
    std::vector<std::string> args{"EVAL", script, std::to_string(spec_.permits)};
    for (int i = 0; i < spec_.permits; ++i)
      args.push_back("chaos:" + spec_.semaphore + " permit:" + std::to_string(i));
    std::vector<std::vector<std::pair<std::string, long long>>> out(master_count);
    for (std::size_t node = 0; node < master_count; ++node) {
      try {
        const auto reply = fleet_.command(node, args);
        for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2)
          out[node].emplace_back(reply.elements[i].str, reply.elements[i + 1].integer);
      } catch (const std::exception&) {
      }
    }
    return out;
  }

  // "s0=[a1b2 c3d4,a1b2 -,...]": each master's slots (owner_tag), for the log.
  std::string permits_by_node() const {
    std::string out = spec_.semaphore + "=[";
    const auto keys = permit_keys();
    for (std::size_t node = 0; node < master_count; ++node) {
      out += node == 0 ? "" : ",";
      for (std::size_t i = 0; i < keys[node].size(); ++i)
        out += (i == 0 ? "" : " ") +
               (keys[node][i].first.empty() ? std::string("-") : owner_tag(keys[node][i].first));
    }
    return out + "]";
  }

  // Waits until a permit lives on masters 0-2 and not on 3, 4 (granted through daemon0 while it
  // was cut from them) and another on 2-4 and not on 0, 1 (through daemon1), each with at least
  // `min_left_ms` of its TTL left.
  bool wait_split_permits(std::chrono::milliseconds timeout, std::int64_t min_left_ms) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      const auto keys = permit_keys();
      // The same holder on another master, whatever slot that master gave it.
      auto holds = [&](std::size_t node, const std::string& owner) {
        return std::any_of(keys[node].begin(), keys[node].end(), [&](const auto& slot) {
          return slot.first.size() > 8 && slot.first.substr(8) == owner.substr(8);
        });
      };
      auto fresh_on = [&](std::size_t node, std::vector<std::size_t> with,
                          std::vector<std::size_t> without) {
        for (const auto& [owner, left] : keys[node])
          if (!owner.empty() && left >= min_left_ms &&
              std::all_of(with.begin(), with.end(), [&](auto i) { return holds(i, owner); }) &&
              std::none_of(without.begin(), without.end(), [&](auto i) { return holds(i, owner); }))
            return true;
        return false;
      };
      if (fresh_on(0, {1, 2}, {3, 4}) && fresh_on(4, {2, 3}, {0, 1}))
        return true;
      std::this_thread::sleep_for(20ms);
    }
    log_line("warning: no permit on each side of the split within " +
             std::to_string(timeout.count()) + " ms");
    return false;
  }

  // Waits until master 0 holds a key granted just now with a long TTL (daemon 1's clients).
  std::optional<std::string> wait_long_grant(std::chrono::milliseconds timeout) {
    std::int64_t longest = 0;
    std::int64_t shortest = INT64_MAX;
    for (const auto& c : spec_.clients) {
      longest = std::max(longest, c.ttl_ms);
      shortest = std::min(shortest, c.ttl_ms);
    }
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      for (const auto& r : resources_) {
        const auto left = fleet_.pttl(0, "chaos:" + r);
        if (left > shortest + 500 && left > longest - 700)
          return r;
      }
      std::this_thread::sleep_for(10ms);
    }
    log_line("warning: no long grant within " + std::to_string(timeout.count()) + " ms");
    return std::nullopt;
  }

  run_spec spec_;
  test::temp_dir work_;
  std::mt19937_64 random_;
  std::chrono::milliseconds clock_offset_{0};
  redis_fleet fleet_;
  fenced_register store_;
  register_server server_;
  std::vector<std::vector<std::unique_ptr<fault_proxy>>> proxies_; // [daemon][master]
  std::vector<std::unique_ptr<chaos_daemon>> daemons_;
  std::vector<std::map<std::string, std::uint64_t>> banked_;
  std::vector<std::string> resources_;
  std::vector<child_process> clients_;
  std::vector<std::string> client_names_;
  std::vector<std::string> history_files_;
  std::vector<fault> faults_;
  std::vector<bite> bites_;
  std::vector<std::pair<int, std::int64_t>> kills_;
  std::string detected_;
  std::uint64_t restarts_made_ = 0;
  std::uint64_t restarts_seen_at_start_ = 0;
  std::uint64_t forward_jumps_made_ = 0;
  std::uint64_t backward_jumps_made_ = 0;
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
  switch (round % 15) {
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
  case 12:
    c.jump_clock(-3s);
    break;
  case 13:
    c.restart_master_while_daemon_down(pick(c.daemon_count()), pick(master_count));
    break;
  default:
    c.split_daemons(4s);
    break;
  }
}

// ---- the schedules ------------------------------------------------------------------------

// Plain leases, EXTEND and WAIT: two clients per daemon; daemon 0 has a lease and a WAIT client
// (hand-overs inside its queue), daemon 1 a lease and an EXTEND client.
std::vector<client_plan> plain_clients(std::int64_t ttl, std::int64_t hold_min,
                                       std::int64_t hold_max) {
  return {{0, "lease", ttl, hold_min, hold_max},
          {1, "extend", ttl, hold_min, hold_max},
          {0, "wait", ttl, hold_min, hold_max},
          {1, "lease", ttl, hold_min, hold_max}};
}

// WAIT on both daemons, two WAIT clients on daemon 0: an UNLOCK with a waiter queued behind it
// in the same daemon is frequent, so the schedule's faults meet hand-overs (INFO handovers).
std::vector<client_plan> waiting_clients(std::int64_t ttl, std::int64_t hold_min,
                                         std::int64_t hold_max) {
  return {{0, "wait", ttl, hold_min, hold_max},
          {1, "lease", ttl, hold_min, hold_max},
          {0, "wait", ttl, hold_min, hold_max},
          {1, "wait", ttl, hold_min, hold_max}};
}

// KEEP clients hold longer than the TTL: only the renewals keep their locks.
std::vector<client_plan> keep_clients(std::int64_t ttl) {
  return {{0, "keep", ttl, ttl + 1000, ttl * 2},
          {1, "keep", ttl, ttl + 1000, ttl * 2},
          {0, "keep", ttl, ttl + 1000, ttl * 2},
          {1, "keep", ttl, ttl + 1000, ttl * 2}};
}

std::vector<client_plan> operator+(std::vector<client_plan> a, const std::vector<client_plan>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct schedule_info {
  std::string name;
  std::string family; // plain, keep, two-daemon, a kind's, or "" (no weakened control)
  std::string what;
  // The weakened control's daemon flag, and the checker that must catch it ("": any).
  std::string weakening;
  std::string caught_by;
  // A schedule of the lock family (--kinds, --one, --long; not in --short: CI's time).
  bool kind = false;
};

constexpr const char* no_quarantine = "unsafe_disable_quarantine";

const std::vector<schedule_info>& schedules() {
  static const std::vector<schedule_info> all{
      {"split", "plain",
       "masters 3,4 cut off; a grant lands on 0-2; node2 restarts empty (cycle 1) or its clock "
       "jumps 3 TTLs (cycle 2); heal",
       no_quarantine, ""},
      {"keep-split", "keep",
       "the same with KEEP clients only: cut 3,4, fresh grant, heal, node2 restarts empty",
       no_quarantine, ""},
      {"two-daemon-restart", "two-daemon",
       "daemon1 grants 8 s leases on masters 0-2 only, daemon0 1 s leases; node2 restarts empty "
       "while a long lease runs (issue 11 bug 1)",
       no_quarantine, ""},
      {"restart-daemon-down", "",
       "daemon0 killed, a master restarts empty, daemon0 starts again and must quarantine it", "",
       ""},
      {"kill-daemon-keep", "",
       "daemon0 killed -9 while it holds KEEP locks, restarted 1 s later; nobody may take "
       "those locks within ttl/2",
       "", ""},
      {"pause-daemon-keep", "", "daemon0 SIGSTOPped for TTL + 1 s while it holds KEEP locks", "",
       ""},
      {"split-daemons", "", "daemon0 loses masters 3,4 while daemon1 loses 0,1, for 4 s", "", ""},
      {"clock-backward", "", "node2's clock jumps 2 s backward", "", ""},
      {"clock-creep", "",
       "masters 3,4 cut off; a grant lands on 0-2; node2's clock creeps forward in 450 ms steps "
       "until the key is gone there; heal",
       "", ""},
      {"mixed", "", "every nemesis in turn (long mode)", "", ""},
      {"shared-split", "shared",
       "split's nemesis (node2 restarts empty) with shared readers beside exclusive writers",
       no_quarantine, "C1-RW", true},
      {"set-split", "set",
       "split's nemesis (node2 restarts empty) with MLOCK sets beside exclusive leases",
       no_quarantine, "C1-multi", true},
      {"permit-split-daemons", "permit",
       "daemon0 loses masters 3,4 while daemon1 loses 0,1, until a permit of s0 (n = 2) lives on "
       "each side; heal (T-c1)",
       "unsafe_count_permits_per_master", "C1-k", true},
      {"shared-intent", "write intent",
       "no fault: seven readers through daemon1 overlap without end while a writer WAITs through "
       "daemon0 (T-b4); its intent must stop new readers",
       "unsafe_no_write_intent", "C4-RW", true},
  };
  return all;
}

std::optional<run_spec> make_spec(const std::string& schedule, bool weakened,
                                  const std::string& daemon_bin) {
  run_spec spec;
  spec.schedule = schedule;
  spec.weakened = weakened;
  spec.daemon_bin = daemon_bin;
  for (const auto& s : schedules())
    if (s.name == schedule && !s.weakening.empty()) { // else --weakened disables quarantine
      spec.weakening = s.weakening;
      spec.weakened_caught_by = s.caught_by;
    }
  if (schedule == "split" || schedule == "mixed") {
    spec.clients = plain_clients(5000, 1500, 3500);
  } else if (schedule == "keep-split") {
    spec.clients = keep_clients(5000);
    spec.min_grants = 4;
    spec.min_writes = 4;
  } else if (schedule == "two-daemon-restart") {
    spec.daemon1_without_3_4 = true;
    spec.clients = {{0, "lease", 1000, 100, 400},
                    {1, "lease", 8000, 3500, 5000},
                    {0, "lease", 1000, 100, 400},
                    {1, "extend", 8000, 2500, 3000}};
  } else if (schedule == "restart-daemon-down") {
    spec.clients = plain_clients(3000, 500, 1500);
  } else if (schedule == "split-daemons" || schedule == "clock-backward") {
    spec.clients = waiting_clients(3000, 500, 1500);
  } else if (schedule == "shared-split") {
    // One writer, so that any overlap after node2 forgot a hold is a reader beside the writer's
    // lease or the writer beside readers (C1-RW): with two writers the control's one overlap was
    // sometimes theirs (C1).
    spec.clients = {{0, "lease", 5000, 1500, 3500},
                    {0, "shared", 5000, 1500, 3500},
                    {1, "shared", 5000, 1500, 3500},
                    {0, "shared", 5000, 1500, 3500},
                    {1, "shared", 5000, 1500, 3500}};
  } else if (schedule == "set-split") {
    // Sets of 2 or 3 of r0-r4 and leases of r0-r2: most overlaps involve a set (C1-multi).
    spec.clients = {{0, "set", 5000, 1500, 3500},
                    {1, "set", 5000, 1500, 3500},
                    {0, "set", 5000, 1500, 3500},
                    {1, "lease", 5000, 1500, 3500}};
  } else if (schedule == "shared-intent") {
    // One resource. Readers hold 0.8-1.5 s and rest 0.1-0.5 s: seven of them leave almost no
    // gap. The writer holds briefly and asks again at once (WAIT 0.5-4 s).
    spec.resources = 1;
    spec.clients = {{0, "wait", 5000, 200, 500}};
    for (int i = 0; i < 7; ++i)
      spec.clients.push_back({1, "shared", 5000, 800, 1500});
    spec.writer_wait_bound_ms = 2500;
    spec.min_writes = 1; // only the writer writes: starved, it writes little (the control) // the
                         // longest reader hold and a second
  } else if (schedule == "permit-split-daemons") {
    // Readers on both sides (T-b1: a writer must wait for both), and two permit clients of s0
    // per daemon holding long enough to outlive the heal (T-c1). The daemons reconnect within
    // 250 ms of the heal, so that the third request meets all five masters while they hold.
    spec.clients =
        waiting_clients(3000, 500, 1500) +
        std::vector<client_plan>{{0, "shared", 3000, 300, 800},   {1, "shared", 3000, 300, 800},
                                 {0, "permit", 5000, 4000, 4500}, {1, "permit", 5000, 4000, 4500},
                                 {0, "permit", 5000, 4000, 4500}, {1, "permit", 5000, 4000, 4500}};
    spec.split_permits = true;
    spec.daemon_config = {{"redis_backoff_max_ms", 250}};
  } else if (schedule == "kill-daemon-keep" || schedule == "pause-daemon-keep") {
    spec.clients = {{0, "keep", 4000, 5000, 7000},
                    {1, "lease", 4000, 500, 1500},
                    {0, "keep", 4000, 5000, 7000},
                    {1, "wait", 4000, 500, 1500}};
    spec.min_grants = 4;
    spec.min_writes = 4;
  } else if (schedule == "clock-creep") {
    spec.clients = {{0, "lease", 8000, 5500, 7500},
                    {1, "lease", 8000, 5500, 7500},
                    {0, "lease", 8000, 5500, 7500},
                    {1, "lease", 8000, 5500, 7500}};
    spec.min_grants = 4;
    spec.min_writes = 2;
  } else {
    return std::nullopt;
  }
  if (schedule == "mixed") {
    spec.min_grants = 50;
    spec.min_writes = 25;
  }
  return spec;
}

// One cycle of the schedule's nemesis.
void run_cycle(cluster& c, const run_spec& spec, int k) {
  const auto ttl = std::chrono::milliseconds(spec.max_ttl_ms());
  const auto s = spec.schedule;
  if (s == "split" || s == "shared-split" || s == "set-split") {
    c.split_then(k % 2 == 0 ? "restart" : "clock");
    // Give the intruders time while the first holders' leases are still running.
    std::this_thread::sleep_for(ttl + 1s);
  } else if (s == "keep-split") {
    c.split_then("restart", true);
    std::this_thread::sleep_for(ttl + 1s);
  } else if (s == "two-daemon-restart") {
    c.two_daemon_restart();
    std::this_thread::sleep_for(ttl + 1s); // the long lease, and a while for the intruders
  } else if (s == "restart-daemon-down") {
    c.restart_master_while_daemon_down(0, static_cast<std::size_t>(k) % master_count);
    std::this_thread::sleep_for(ttl + 1s);
  } else if (s == "kill-daemon-keep") {
    c.kill_daemon_with_keep(0);
    std::this_thread::sleep_for(ttl + 1s);
  } else if (s == "pause-daemon-keep") {
    c.pause_daemon_with_keep(0, ttl + 1s);
    std::this_thread::sleep_for(2s);
  } else if (s == "split-daemons" || s == "permit-split-daemons") {
    c.split_daemons(4s);
    std::this_thread::sleep_for(2s);
  } else if (s == "clock-backward") {
    c.jump_clock(-2s);
    std::this_thread::sleep_for(ttl);
  } else if (s == "shared-intent") {
    std::this_thread::sleep_for(8s); // no fault: the readers' stream is the test
  } else if (s == "clock-creep") {
    c.split_then("creep");
    std::this_thread::sleep_for(ttl);
  }
}

bool judge(const run_report& r, std::string& why);

// Copies the histories and the daemons' logs of a failed run to
// $REDLOCKD_CHAOS_ARTIFACTS (default /tmp/redlockd-chaos-artifacts)/<schedule>-<pid>-<n>/.
void keep_artifacts(const fs::path& work, run_report& report) {
  static int n = 0;
  const char* env = std::getenv("REDLOCKD_CHAOS_ARTIFACTS");
  const fs::path root = env != nullptr && *env != '\0' ? env : "/tmp/redlockd-chaos-artifacts";
  const fs::path dest = root / (report.schedule + (report.weakened ? "-weakened-" : "-") +
                                std::to_string(::getpid()) + "-" + std::to_string(++n));
  std::error_code ec;
  for (const auto& entry : fs::recursive_directory_iterator(work, ec)) {
    if (!entry.is_regular_file())
      continue;
    const auto target = dest / fs::relative(entry.path(), work);
    fs::create_directories(target.parent_path(), ec);
    fs::copy_file(entry.path(), target, fs::copy_options::overwrite_existing, ec);
  }
  report.artifacts = dest.string();
}

run_report run_one(const run_spec& spec) {
  run_report report;
  report.schedule = spec.schedule;
  report.weakened = spec.weakened;
  report.min_grants = spec.min_grants;
  report.min_writes = spec.min_writes;
  report.title = spec.schedule +
                 (spec.weakened ? " / weakened daemon (" + spec.weakening + ")" : " / redlockd");
  report.weakened_caught_by = spec.weakened ? spec.weakened_caught_by : "";
  log_line("run: " + report.title + " seed " + std::to_string(spec.seed) + ", daemon " +
           spec.daemon_bin);
  try {
    cluster c(spec);
    const auto start = monotonic_ns();
    const std::int64_t horizon = std::chrono::nanoseconds(spec.duration).count();
    // The clients stop when told to (a stop file), after the nemesis and a quiet spell; this
    // deadline only bounds them should the harness die.
    c.start_clients(start + horizon + 1'800'000'000'000LL);
    std::this_thread::sleep_for(2s); // warm up: locks are being taken before the first fault
    if (spec.schedule == "mixed") {
      mixed_nemesis(c, start + horizon);
    } else {
      for (int k = 0; k < spec.cycles; ++k)
        run_cycle(c, spec, k);
    }
    c.heal_everything();
    c.note_heal();
    log_line("heal; waiting for the clients to finish");
    std::this_thread::sleep_for(1s);
    report.client_exits = c.stop_clients(std::chrono::milliseconds(spec.max_hold_ms() + 10000));
    log_line("clients stopped; checking");
    auto history = c.history();
    auto final_store = c.store_state();
    report.checks.push_back(check_validity_overlap(history));
    report.checks.push_back(check_shared_overlap(history));
    report.checks.push_back(check_permit_bound(history));
    report.checks.push_back(check_set_overlap(history));
    if (spec.writer_wait_bound_ms > 0)
      report.checks.push_back(check_writer_waits(history, spec.writer_wait_bound_ms));
    report.checks.push_back(check_fence_order(history));
    report.checks.push_back(check_lost_writes(history, final_store));
    if (!c.kills().empty())
      report.checks.push_back(check_keep_survives_kill(history, c.kills()));
    report.checks.push_back(c.check_liveness(report.liveness_max_ms));
    report.checks.push_back(c.check_leaks());
    report.checks.push_back(c.stop_daemons_and_check_logs());
    c.expect_detections();
    report.detected = c.detected();
    report.bites = c.bites();
    report.stale = count_stale_writes(history);
    report.store = final_store;
    for (const auto& op : history) {
      ++report.ops[op.kind + (op.mode == "exclusive" ? "" : " " + op.mode)][op.outcome];
      if (op.kind == "lock" && op.outcome == "ok")
        ++report.grants;
    }
    report.writes = final_store.writes_accepted;
    for (const auto& f : c.faults())
      ++report.faults[f.kind];
    std::string why;
    if (!judge(report, why))
      keep_artifacts(c.work_path(), report);
  } catch (const std::exception& e) {
    report.error = e.what();
  }
  log_line("run done: " + report.title);
  return report;
}

void print_report(const run_report& r) {
  std::cout << "\n=== " << r.title << " ===\n";
  if (!r.error.empty())
    std::cout << "HARNESS ERROR: " << r.error << "\n";
  std::cout << "operations (ok / fail / unknown):\n";
  for (const auto& [kind, outcomes] : r.ops) {
    auto count = [&](const char* o) {
      const auto it = outcomes.find(o);
      return it == outcomes.end() ? std::size_t{0} : it->second;
    };
    std::cout << "  " << kind << ": " << count("ok") << " / " << count("fail") << " / "
              << count("info") << "\n";
  }
  std::cout << "grants " << r.grants << " (min " << r.min_grants << "), writes accepted "
            << r.writes << " (min " << r.min_writes << ")\n";
  std::cout << "faults applied:";
  for (const auto& [kind, n] : r.faults)
    std::cout << " " << kind << "=" << n;
  std::cout << "\nregister: writes accepted " << r.store.writes_accepted
            << ", stale writes rejected " << r.store.writes_rejected << ", stale reads rejected "
            << r.store.reads_rejected << " (shared " << r.store.shared_reads_rejected << ")"
            << "; writes after their lock's window ended: " << r.stale.stale << " (rejected "
            << r.stale.rejected << ", accepted with no newer holder " << r.stale.accepted << ")\n";
  std::cout << "daemons reported (INFO counters over every life, logs): " << r.detected << "\n";
  for (const auto& b : r.bites)
    std::cout << "  fault bit: " << (b.met ? "yes" : "NO ") << "  " << b.what << "\n";
  for (const auto& e : r.client_exits)
    std::cout << "  CLIENT: " << e << "\n";
  if (!r.artifacts.empty())
    std::cout << "histories and daemon logs kept in " << r.artifacts << "\n";
  std::cout << "liveness: slowest lock after heal " << r.liveness_max_ms << " ms\n";
  std::cout << "checkers (violations / checked):\n";
  for (const auto& c : r.checks) {
    std::cout << "  " << c.name << ": " << c.violations << " / " << c.checked << "\n";
    for (const auto& e : c.examples)
      std::cout << "      " << e << "\n";
  }
}

// The verdict of one run. redlockd: a valid run with no violation. Weakened: a valid run with
// at least one safety violation.
bool judge(const run_report& r, std::string& why) {
  const auto problems = r.validity_problems();
  if (!problems.empty()) {
    why = "the run proves nothing";
    if (r.all_violations() > 0) {
      why += " (the checkers found " + std::to_string(r.all_violations()) + " violation(s):";
      for (const auto& c : r.checks)
        if (c.violations > 0)
          why += " [" + c.name + ": " + std::to_string(c.violations) + "]";
      why += ")";
    }
    why += ":";
    for (const auto& p : problems)
      why += "\n    - " + p;
    return false;
  }
  if (r.weakened && !r.weakened_caught_by.empty()) {
    why = std::to_string(r.violations_of(r.weakened_caught_by)) + " " + r.weakened_caught_by +
          " violation(s) (" + std::to_string(r.safety_violations()) +
          " safety violations in all); the weakened daemon must show at least one";
    return r.violations_of(r.weakened_caught_by) > 0;
  }
  if (r.weakened) {
    why = std::to_string(r.safety_violations()) +
          " safety violation(s); the weakened daemon must show at least one";
    return r.safety_violations() > 0;
  }
  why = std::to_string(r.all_violations()) + " violation(s); redlockd must show none";
  if (r.all_violations() > 0) {
    why += ":";
    for (const auto& c : r.checks)
      if (c.violations > 0)
        why += " [" + c.name + ": " + std::to_string(c.violations) + "]";
  }
  return r.all_violations() == 0;
}

int run_all(const std::vector<run_spec>& specs, const std::string& mode) {
  std::vector<run_report> reports;
  for (const auto& spec : specs)
    reports.push_back(run_one(spec));
  std::cout << "\n##### redlockd-chaos " << mode << " (daemon " << specs.front().daemon_bin
            << ") #####\n";
  bool pass = true;
  std::string summary;
  for (const auto& r : reports) {
    print_report(r);
    std::string why;
    const bool ok = judge(r, why);
    std::cout << (ok ? "PASS: " : "FAIL: ") << why << "\n";
    summary += std::string("  ") + (ok ? "PASS  " : "FAIL  ") + r.title + ": " + why + "\n";
    pass = pass && ok;
  }
  std::cout << "\n##### summary #####\n" << summary;
  std::cout << "\nchaos " << mode << ": " << (pass ? "PASS" : "FAIL") << std::endl;
  return pass ? 0 : 1;
}

int usage() {
  std::cerr << "usage: redlockd-chaos [--daemon-bin PATH] --short\n"
               "       redlockd-chaos [--daemon-bin PATH] --long [MINUTES]   (default 30)\n"
               "       redlockd-chaos [--daemon-bin PATH] --one SCHEDULE [--weakened] "
               "[--cycles N]\n"
               "       redlockd-chaos [--daemon-bin PATH] --kinds   (the lock family's schedules)\n"
               "       redlockd-chaos --list\n"
               "The daemon binary defaults to $REDLOCKD_CHAOS_DAEMON, else the one built here.\n";
  return 2;
}

// Short mode: every schedule once (two cycles where it has cycles), and the weakened daemon in
// each family it applies to.
std::vector<run_spec> short_specs(const std::string& bin) {
  std::vector<run_spec> out;
  for (const auto& s : schedules()) {
    if (s.name == "mixed" || s.kind)
      continue;
    auto spec = *make_spec(s.name, false, bin);
    spec.cycles = s.name == "clock-creep" || s.name == "split-daemons" ||
                          s.name == "clock-backward" || s.name == "kill-daemon-keep" ||
                          s.name == "pause-daemon-keep" || s.name == "restart-daemon-down"
                      ? 1
                      : 2;
    out.push_back(spec);
    if (!s.family.empty()) {
      auto weak = *make_spec(s.name, true, bin);
      weak.cycles = spec.cycles;
      out.push_back(weak);
    }
  }
  return out;
}

// The lock family's schedules, two cycles each, and their weakened controls (--kinds).
std::vector<run_spec> kind_specs(const std::string& bin) {
  std::vector<run_spec> out;
  for (const auto& s : schedules()) {
    if (!s.kind)
      continue;
    out.push_back(*make_spec(s.name, false, bin));
    out.push_back(*make_spec(s.name, true, bin));
  }
  return out;
}

// Long mode: every schedule with more cycles, the mix for what is left of `minutes`, and the
// weakened controls.
std::vector<run_spec> long_specs(const std::string& bin, int minutes) {
  std::vector<run_spec> out;
  for (const auto& s : schedules()) {
    if (s.name == "mixed")
      continue;
    auto spec = *make_spec(s.name, false, bin);
    spec.cycles = 4;
    out.push_back(spec);
    if (!s.family.empty()) {
      auto weak = *make_spec(s.name, true, bin);
      weak.cycles = 2;
      out.push_back(weak);
    }
  }
  auto mixed = *make_spec("mixed", false, bin);
  mixed.duration = std::chrono::seconds(std::max(5, minutes - 15) * 60);
  out.push_back(mixed);
  return out;
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
  std::string bin = default_daemon_binary();
  for (std::size_t i = 0; i < args.size(); ++i)
    if (args[i] == "--daemon-bin" && i + 1 < args.size()) {
      bin = fs::absolute(args[i + 1]).string();
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i),
                 args.begin() + static_cast<std::ptrdiff_t>(i) + 2);
      break;
    }
  if (!fs::exists(bin)) {
    std::cerr << "redlockd-chaos: daemon binary " << bin << " does not exist\n";
    return 2;
  }
  if (args.size() == 1 && args[0] == "--list") {
    for (const auto& s : schedules())
      std::cout << s.name << (s.family.empty() ? "" : " [weakened control: " + s.family + "]")
                << ": " << s.what << "\n";
    return 0;
  }
  if (args.size() == 1 && args[0] == "--short")
    return run_all(short_specs(bin), "--short");
  if (args.size() == 1 && args[0] == "--kinds")
    return run_all(kind_specs(bin), "--kinds");
  if (!args.empty() && args[0] == "--long")
    return run_all(long_specs(bin, args.size() > 1 ? std::stoi(args[1]) : 30), "--long");
  if (!args.empty() && args[0] == "--one" && args.size() >= 2) {
    bool weakened = false;
    int cycles = 0;
    for (std::size_t i = 2; i < args.size(); ++i) {
      if (args[i] == "--weakened")
        weakened = true;
      else if (args[i] == "--cycles" && i + 1 < args.size())
        cycles = std::stoi(args[++i]);
      else
        return usage();
    }
    auto spec = make_spec(args[1], weakened, bin);
    if (!spec)
      return usage();
    if (cycles > 0)
      spec->cycles = cycles;
    if (spec->schedule == "mixed")
      spec->duration = 90s;
    return run_all({*spec}, "--one " + args[1]);
  }
  return usage();
}
