// The composition of a run (see simulation.hpp), and its books: what the masters' scripts cost
// per resource, which keys faults destroyed, and when a daemon was told of such a loss.
#include "simulation.hpp"

#include "redlockd/lock/lock_kind.hpp"
#include "redlockd/lock/redlock.hpp"
#include "redlockd/resp/script_calls.hpp"
#include "redlockd/resp/scripts.hpp"

#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "clients.hpp"
#include "daemon.hpp"
#include "faults.hpp"
#include "keyspace.hpp"
#include "lua_engine.hpp"
#include "master.hpp"
#include "network.hpp"
#include "prng.hpp"
#include "scenarios.hpp"
#include "scheduler.hpp"

namespace redlockd::sim {
namespace {

// The value of a lock key that guards its readers (src/lua/lib/readers.lua).
constexpr std::string_view readers_guard = "redlockd:readers";

struct owner_hash {
  std::size_t operator()(const owner_id& owner) const {
    return std::hash<std::string_view>{}(view(owner));
  }
};

// The engines' logs, in virtual time (--verbose).
class virtual_time_sink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  virtual_time_sink(const scheduler& clock, std::string name)
      : clock_(clock), name_(std::move(name)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::fprintf(stderr, "%12.3f ms %s %.*s\n", static_cast<double>(clock_.now()) / 1000.0,
                 name_.c_str(), static_cast<int>(msg.payload.size()), msg.payload.data());
  }
  void flush_() override {}

 private:
  const scheduler& clock_;
  std::string name_;
};

// The first integer of a RESP reply (or of its first element), and the n-th element's.
std::optional<std::int64_t> integer_at(std::string_view reply, std::size_t element) {
  std::size_t at = 0;
  if (!reply.empty() && reply[0] == '*') {
    at = reply.find("\r\n") + 2;
    for (std::size_t i = 0; i < element && at < reply.size(); ++i) {
      if (reply[at] == '$') {
        std::size_t size = 0;
        std::from_chars(reply.data() + at + 1, reply.data() + reply.size(), size);
        at = reply.find("\r\n", at) + 2 + size + 2;
      } else {
        at = reply.find("\r\n", at) + 2;
      }
    }
  } else if (element != 0) {
    return std::nullopt;
  }
  if (at >= reply.size() || reply[at] != ':')
    return std::nullopt;
  std::int64_t value = 0;
  std::from_chars(reply.data() + at + 1, reply.data() + reply.size(), value);
  return value;
}

owner_id owner_of(std::string_view text) {
  owner_id owner{};
  if (text.size() == owner.size())
    std::copy(text.begin(), text.end(), owner.begin());
  return owner;
}

// The scripts that grant a hold (of any kind), release one, or extend one.
bool acquires(script which) {
  return which == script::acquire || which == script::acquire_wait || which == script::hand_over ||
         which == script::shared_acquire || which == script::permit_acquire ||
         which == script::multi_acquire;
}
bool releases(script which) {
  return which == script::release || which == script::shared_release ||
         which == script::permit_release || which == script::multi_release;
}
bool extends(script which) {
  return which == script::extend || which == script::shared_extend ||
         which == script::permit_extend || which == script::multi_extend;
}

// A permit's owner as its attempt sent it (slot 000): the master writes the slot it took into
// the owner it stores, and the OK carries that one.
owner_id as_sent(const owner_id& owner, hold_kind kind) {
  return kind == hold_kind::permit ? tag_owner(owner, lock_kind::permit, 0) : owner;
}

std::uint64_t counter_of(std::string_view text) {
  std::uint64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// What a seed chose for the run.
struct setup {
  std::size_t masters = 5;
  std::size_t daemons = 2;
  config cfg;
  workload work;
  fault_plan faults;
  std::string mix;           // the kinds of lock (choose_kinds)
  std::string fault_profile; // fault_profiles()
  sim_time workload_for = 0;
  sim_time drain = 0;
  std::vector<latency_profile> latency; // per (daemon, master)
  std::vector<std::int64_t> daemon_drift;
  std::vector<std::int64_t> master_drift;
};

// --weaken NAME: one rule off on the engine's real code path (config::weakened).
void weaken_rule(config& cfg, const std::string& weaken) {
  if (weaken == "quorum-minus-one")
    cfg.weakened.quorum_minus_one = true;
  else if (weaken == "no-quarantine")
    cfg.unsafe_disable_quarantine = true;
  else if (weaken == "handover-skips-keyloss")
    cfg.weakened.handover_skips_keyloss = true;
  else if (weaken == "publish-on-cleanup")
    cfg.weakened.publish_on_cleanup = true;
  else if (weaken == "permits-per-master")
    cfg.unsafe_count_permits_per_master = true;
  else if (weaken == "no-write-intent")
    cfg.unsafe_no_write_intent = true;
}

// The kinds of lock the clients take (swarm testing): a quarter of the runs exclusive locks
// only, some mostly one other kind (with exclusive locks beside it), the rest a mix in which
// exclusive locks keep the largest share. `forced` (--mix) replaces what the seed chose; the
// seed's draws are the same either way.
std::string choose_kinds(prng& random, workload& w, const std::string& forced) {
  const double profile = random.unit();
  const double mostly = 0.6 + 0.3 * random.unit();
  const double shared = random.chance(0.7) ? 0.3 * random.unit() : 0.0;
  const double permit = random.chance(0.7) ? 0.2 * random.unit() : 0.0;
  const double set = random.chance(0.7) ? 0.2 * random.unit() : 0.0;
  w.set_max = static_cast<std::uint32_t>(random.between(2, 4));
  std::vector<std::uint32_t> permits(static_cast<std::size_t>(random.between(1, 3)));
  for (std::uint32_t& n : permits)
    n = static_cast<std::uint32_t>(random.between(1, 3));
  std::string mix = !forced.empty()  ? forced
                    : profile < 0.25 ? "exclusive"
                    : profile < 0.4  ? "shared"
                    : profile < 0.5  ? "permit"
                    : profile < 0.6  ? "set"
                                     : "mixed";
  if (mix == "shared")
    w.p_shared = mostly;
  else if (mix == "permit")
    w.p_permit = mostly;
  else if (mix == "set")
    w.p_set = mostly;
  else if (mix == "mixed") {
    w.p_shared = shared;
    w.p_permit = permit;
    w.p_set = set;
  }
  if (w.p_permit > 0)
    w.permits = std::move(permits);
  if (w.p_set > 0)
    w.hot_resources = std::max<std::uint32_t>(w.hot_resources, 2);
  return mix;
}

setup choose(prng& random, const std::string& weaken, const std::string& mix,
             const std::string& faults) {
  setup s;
  const double r = random.unit();
  s.masters = r < 0.2 ? 3 : r < 0.9 ? 5 : 7;
  const double k = random.unit();
  s.daemons = k < 0.5 ? 2 : k < 0.8 ? 3 : k < 0.92 ? 4 : 5;
  config& cfg = s.cfg;
  cfg.nodes.clear();
  for (std::size_t m = 0; m < s.masters; ++m)
    cfg.nodes.push_back({"10.0.0." + std::to_string(m + 1), 6379});
  cfg.key_prefix = random.chance(0.3) ? "app:" : "";
  cfg.node_timeout_ms =
      random.chance(0.7) ? 50 : static_cast<std::uint32_t>(random.between(20, 100));
  cfg.lock_delay_ms =
      random.chance(0.75) ? 0 : static_cast<std::uint64_t>(random.log_between(10, 500));
  if (random.chance(0.1))
    cfg.max_waiters_per_resource = static_cast<std::uint32_t>(random.between(1, 4));
  if (random.chance(0.1))
    cfg.max_keep_locks_per_connection = static_cast<std::uint32_t>(random.between(1, 2));
  cfg.redis_health_interval_ms =
      random.chance(0.6) ? 500 : static_cast<std::uint32_t>(random.between(100, 1000));
  weaken_rule(cfg, weaken);

  workload& w = s.work;
  w.clients = static_cast<std::uint32_t>(random.between(4, 24));
  w.hot_resources = static_cast<std::uint32_t>(random.between(1, 4));
  w.cold_resources =
      random.chance(0.2) ? 0 : static_cast<std::uint32_t>(random.log_between(50, 5000));
  w.p_hot = 0.3 + 0.65 * random.unit();
  w.ttl_min_ms = static_cast<std::uint64_t>(random.log_between(100, 2000));
  w.ttl_max_ms = std::min<std::uint64_t>(
      30000, w.ttl_min_ms * static_cast<std::uint64_t>(random.log_between(1, 30)));
  w.p_wait = 0.9 * random.unit();
  w.wait_min_ms = static_cast<std::uint64_t>(random.log_between(10, 500));
  w.wait_max_ms = w.wait_min_ms * static_cast<std::uint64_t>(random.log_between(1, 20));
  w.p_keep = random.chance(0.3) ? 0 : 0.3 * random.unit();
  w.p_extend = 0.3 * random.unit();
  w.p_abandon = 0.1 * random.unit();
  w.p_pipeline = 0.2 * random.unit();
  w.p_disconnect = 0.02 * random.unit();
  w.think_mean = random.log_between(2'000, 50'000);
  w.hold_max = 0.2 + 0.8 * random.unit();
  s.mix = choose_kinds(random, w, mix);

  s.workload_for = 20'000'000;

  fault_plan& f = s.faults;
  f.clock_jump_ms = cfg.clock_jump_ms;
  f.max_drift_ppm = static_cast<std::int64_t>(cfg.clock_drift_factor * 1e6 / 4);
  // The faults: none in a fifth of the runs (liveness and fairness under calm), a random mix in
  // most, and in some a mix shaped after what breaks locks: splits of a daemon from a minority of
  // masters with data lost on another (key-loss detection), or restarts and clock jumps
  // (quarantine).
  // `faults` (--faults) replaces the profile the seed drew. The fleet, the configuration, the
  // workload and the kinds were drawn before and stay the seed's; what is drawn after (the
  // profile's faults, the latencies and drifts, every component's random stream) follows the
  // profile, so it differs from the seed's own run.
  const double drawn = random.unit();
  const double profile = faults == "none"       ? 0.1
                         : faults == "key-loss" ? 0.3
                         : faults == "restarts" ? 0.5
                         : faults == "mixed"    ? 0.8
                                                : drawn;
  s.fault_profile = profile < 0.2    ? "none"
                    : profile < 0.4  ? "key-loss"
                    : profile < 0.55 ? "restarts"
                                     : "mixed";
  if (profile >= 0.2) {
    for (double& weight : f.weight)
      weight = random.chance(0.6) ? random.unit() : 0.0;
    const auto set = [&](fault_kind kind, double weight) {
      f.weight[static_cast<std::size_t>(kind)] = weight;
    };
    if (profile < 0.4) {
      // Locks granted on exactly a quorum while a daemon is cut from the rest, then a master
      // of that quorum loses keys: only key-loss detection keeps a second holder out (where
      // the fence counter went too, the grant scripts refuse there).
      f.weight.fill(0);
      set(fault_kind::partition, 1.0);
      set(fault_kind::master_key_loss, 0.3 + random.unit());
      set(fault_kind::master_flushall, 0.3 * random.unit());
      set(fault_kind::link_reset, 0.2 * random.unit());
      f.minority_partitions = 0.7;
      w.ttl_min_ms = std::max<std::uint64_t>(w.ttl_min_ms, 1000);
      w.ttl_max_ms = std::max(w.ttl_max_ms, 3 * w.ttl_min_ms);
      // Waiters queued on a few hot locks, so that a lost lock is often handed over.
      w.p_wait = std::max(w.p_wait, 0.8);
      w.p_hot = std::max(w.p_hot, 0.8);
      w.hot_resources = std::max<std::uint32_t>(w.hot_resources, 2);
      w.p_lost = 0.2 + 0.3 * random.unit();
    } else if (profile < 0.55) {
      f.weight.fill(0);
      set(fault_kind::master_crash, 1.0);
      set(fault_kind::master_clock_jump, random.unit());
      set(fault_kind::partition, random.unit());
      set(fault_kind::master_pause, 0.5 * random.unit());
    }
    f.mean_interval = random.log_between(50'000, 3'000'000);
    f.until =
        static_cast<sim_time>(static_cast<double>(s.workload_for) * (0.3 + 0.5 * random.unit()));
  }
  f.longest_ttl_ms = w.ttl_max_ms;

  s.drain = static_cast<sim_time>(w.wait_max_ms + 3 * w.ttl_max_ms) * 1000 + 3'000'000;

  // A LAN, its latency per path a little different.
  const sim_time base = random.log_between(50, 1500);
  for (std::size_t d = 0; d < s.daemons; ++d)
    for (std::size_t m = 0; m < s.masters; ++m)
      s.latency.push_back({base + random.between(0, base / 2), random.between(0, base / 4)});
  for (std::size_t d = 0; d < s.daemons; ++d)
    s.daemon_drift.push_back(random.between(-f.max_drift_ppm, f.max_drift_ppm));
  for (std::size_t m = 0; m < s.masters; ++m)
    s.master_drift.push_back(random.between(-f.max_drift_ppm, f.max_drift_ppm));
  return s;
}

std::vector<std::string> words_of(const std::string& line) {
  std::vector<std::string> words;
  for (std::size_t at = 0; at < line.size();) {
    const std::size_t end = std::min(line.find(' ', at), line.size());
    words.push_back(line.substr(at, end - at));
    at = end + 1;
  }
  return words;
}

// A scripted run: one fleet as the scenario says, default configuration, a quiet network.
setup scripted(const scenario& sc, const std::string& weaken) {
  setup s;
  weaken_rule(s.cfg, weaken);
  s.masters = sc.masters;
  s.daemons = sc.daemons;
  s.cfg.nodes.clear();
  for (std::size_t m = 0; m < s.masters; ++m)
    s.cfg.nodes.push_back({"10.0.0." + std::to_string(m + 1), 6379});
  s.work.clients = 0;
  s.work.hot_resources = 0;
  s.work.cold_resources = 0;
  // The longest TTL asked for: how long after a fault liveness is judged again.
  s.work.ttl_max_ms = 0;
  for (const scenario_step& step : sc.steps) {
    const std::vector<std::string> words = words_of(step.line);
    const std::size_t set =
        words.size() > 1 && words[0].front() == 'M' ? 1 + std::stoul(words[1]) : 0;
    const std::string verb = words.empty() ? "" : words[0].substr(set > 0 ? 1 : 0);
    const std::size_t ttl_at = verb == "LOCK" ? 2 + set : verb == "EXTEND" ? 3 + set : 0;
    if (ttl_at != 0 && ttl_at < words.size())
      s.work.ttl_max_ms = std::max<std::uint64_t>(s.work.ttl_max_ms, std::stoull(words[ttl_at]));
  }
  s.workload_for = sc.end;
  s.drain = 0;
  s.latency.assign(s.daemons * s.masters, {200, 0});
  s.daemon_drift.assign(s.daemons, 0);
  s.master_drift.assign(s.masters, 0);
  return s;
}

class simulation final : public script_observer,
                         public daemon_books,
                         public client_world,
                         public fault_books,
                         public event_target {
 public:
  explicit simulation(const run_options& options);
  run_result run();

  // script_observer
  void on_script(const script_run& run) override;
  // daemon_books
  std::uint32_t new_instance(std::size_t daemon) override;
  const script_meta* take_meta(std::uint64_t connection) override;
  void script_answered(const sim_daemon& d, std::size_t master, std::uint64_t connection,
                       const request_tag& tag, const script_meta& meta, sim_time sent_at) override;
  void clock_sample(const sim_daemon& d, std::size_t master, std::uint64_t connection) override;
  void master_identified(const sim_daemon& d, std::size_t master, const master_facts& facts,
                         std::uint64_t high_water) override;
  void connection_closed(std::uint64_t connection) override;
  void round_sent(const sim_daemon& d, const request_tag& tag) override {
    instances_[d.instance()].generation[tag.op] = tag.generation;
  }
  // client_world
  scheduler& clock() override { return clock_; }
  history& records() override { return records_; }
  sim_daemon* pick_daemon(prng& random) override;
  const request_limits& limits() const override { return limits_; }
  bool stopping() const override { return stopping_; }
  void granted(std::uint32_t request) override;
  void extended(std::uint32_t request) override;
  void grant_unseen(std::uint32_t request, const owner_id& owner) override;
  std::vector<std::uint32_t> recently_lost() const override;
  // fault_books
  void data_lost(std::size_t master, const std::vector<lost_key>& keys, bool clock_jump,
                 bool announced) override;
  bool loss_allowed(std::size_t master) const override;
  std::vector<std::size_t> bare_quorum_masters() const override;
  // event_target: the health sampler and the end of the workload
  void fire(std::uint32_t kind, std::uint64_t arg) override;

 private:
  struct lease_book {
    std::uint32_t mask = 0;
    sim_time valid_until = 0;
    sim_time granted_at = 0;
  };
  struct round_book {
    owner_id owner{};
    std::uint32_t gone = 0;
    std::uint32_t yes = 0;
    std::uint32_t told = 0;
  };
  // What one run of a daemon was given: the masters whose grants counted for each owner, the
  // leases its clients hold, the rounds of releases and extensions in progress.
  struct instance_book {
    std::unordered_map<owner_id, sim_time, owner_hash> attempt_start;
    std::unordered_map<owner_id, std::uint32_t, owner_hash> grant_mask;
    // Per owner, its latest EXTEND round (op << 32 | generation) and the masters that extended.
    std::unordered_map<owner_id, std::pair<std::uint64_t, std::uint32_t>, owner_hash> extend_mask;
    std::unordered_map<owner_id, lease_book, owner_hash> leases;
    // The leases per hold name (queue_of): an exclusive grant there ends the older ones.
    std::map<queue_key, std::vector<owner_id>> lease_on;
    std::unordered_map<std::uint64_t, round_book> rounds;
    std::unordered_map<std::uint32_t, std::uint32_t> generation; // the latest round, per operation
  };
  struct damage {
    std::size_t master;
    sim_time until;             // its lost keys have expired by then
    std::uint64_t fence_before; // its fence counter before the loss
    bool fence_back;            // the counter is back there
    std::int64_t record;        // history.losses index, -1 for an announced loss
  };
  enum event_kind : std::uint32_t { sample_health, stop_workload, scenario_step_event };
  void run_step(const scenario_step& step);
  // Far above a busy run (some 20,000 events per virtual second, a few 100,000 at most), and far
  // above what the requests on one resource may cause in a second (check_bounded_work).
  static constexpr std::uint64_t max_events_per_second = 1'000'000;
  static constexpr std::uint32_t max_calls_per_second = 30'000;
  bool busy_loop_ = false;
  violation runaway_violation() const;
  std::size_t requests_in_second(std::uint32_t resource, std::uint64_t second) const;

  void round_evidence(const sim_daemon& d, const request_tag& tag, const owner_id& owner,
                      std::size_t master, std::int64_t result, bool timely);
  void evidence(std::uint32_t instance, std::size_t master);
  void track_fence(std::size_t master);

  run_options options_;
  prng random_;
  const scenario* scenario_;
  setup setup_;
  scheduler clock_;
  history records_;
  request_limits limits_;
  bool stopping_ = false;
  std::shared_ptr<spdlog::logger> log_;
  lua_engine lua_;
  std::vector<std::unique_ptr<master>> masters_;
  std::unique_ptr<network> net_;
  std::vector<std::unique_ptr<sim_daemon>> daemons_;
  std::vector<std::unique_ptr<sim_client>> clients_;
  std::vector<std::unique_ptr<scripted_client>> scripted_clients_;
  std::vector<std::uint32_t> scripted_requests_; // a scenario's requests, as records
  std::unique_ptr<fault_injector> faults_;
  std::unordered_map<std::string, std::uint32_t, text_hash, std::equal_to<>> resource_of_key_;
  std::vector<std::deque<script_meta>> metas_; // by link connection id (ids are dense)
  script_meta taken_;
  std::vector<instance_book> instances_;
  std::unordered_map<owner_id, std::vector<std::pair<std::size_t, sim_time>>, owner_hash>
      lost_by_owner_;
  std::vector<damage> damages_;
  std::vector<std::vector<std::pair<sim_time, std::int64_t>>> forward_jumps_; // per master
  std::unordered_map<std::uint64_t, sim_time> last_sample_;                   // per connection
  std::unordered_map<std::uint64_t, std::uint32_t> work_;                     // resource<<32|second
  sim_time healthy_since_ = -1;
};

simulation::simulation(const run_options& options)
    : options_(options), random_(options.seed),
      scenario_(options.scenario.empty() ? nullptr : find_scenario(options.scenario)),
      setup_(scenario_ ? scripted(*scenario_, options.weaken)
                       : choose(random_, options.weaken, options.mix, options.faults)) {
  limits_.min_ttl_ms = setup_.cfg.min_ttl_ms;
  limits_.max_ttl_ms = setup_.cfg.max_ttl_ms;
  // The weakenings of the scripts: the masters compile the shipped text with one phrase changed.
  // A phrase the shipped text no longer has would weaken nothing: that stops the run at once.
  const auto rewrite = [&](script in, std::string from, std::string to) {
    if (script_source(in).find(from) == std::string_view::npos)
      throw std::logic_error("--weaken " + options.weaken + ": " + std::string(script_name(in)) +
                             ".lua no longer has the text it rewrites");
    lua_.rewrite(std::move(from), std::move(to));
  };
  if (options.weaken == "readers-without-guard") // readers leave the lock key free (lib/shared.lua)
    rewrite(script::shared_acquire, "\n  guard_readers(key, now)\n", "\n");
  if (options.weaken == "set-checks-first-member") // all or nothing on one member (lib/multi.lua)
    rewrite(script::multi_acquire,
            "  for _, key in ipairs(keys) do\n    local left = redis.call('pttl', key)",
            "  for _, key in ipairs({keys[1]}) do\n    local left = redis.call('pttl', key)");
  log_ = std::make_shared<spdlog::logger>("sim");
  if (options.verbose) {
    log_->sinks().push_back(std::make_shared<virtual_time_sink>(clock_, "engine"));
    log_->set_level(spdlog::level::debug);
  } else
    log_->set_level(spdlog::level::off);

  records_.masters = static_cast<std::uint32_t>(setup_.masters);
  records_.daemons = static_cast<std::uint32_t>(setup_.daemons);
  records_.lock_delay_ms = setup_.cfg.lock_delay_ms;
  records_.node_timeout_ms = setup_.cfg.node_timeout_ms;
  records_.clock_drift_factor = setup_.cfg.clock_drift_factor;
  records_.longest_ttl_ms = setup_.work.ttl_max_ms;
  if (scenario_) {
    records_.resources = scenario_->resources;
    records_.permits.assign(records_.resources.size(), 0);
    for (const auto& [name, n] : scenario_->semaphores) {
      records_.resources.push_back(name);
      records_.permits.push_back(n);
    }
  }
  for (std::uint32_t i = 0; i < setup_.work.hot_resources; ++i)
    records_.resources.push_back("hot" + std::to_string(i));
  for (std::uint32_t i = 0; i < setup_.work.cold_resources; ++i)
    records_.resources.push_back("r" + std::to_string(i));
  records_.permits.resize(records_.resources.size(), 0);
  for (std::size_t i = 0; i < setup_.work.permits.size(); ++i) {
    records_.resources.push_back("sem" + std::to_string(i));
    records_.permits.push_back(setup_.work.permits[i]);
  }
  // The keys of every hold, to their resource: a lock's key, its readers ('K readers'), a
  // semaphore's count key and its slots (up to one past n: the wrong requests').
  for (std::uint32_t i = 0; i < records_.resources.size(); ++i) {
    const std::string key = setup_.cfg.key_prefix + records_.resources[i];
    if (records_.permits[i] == 0) {
      resource_of_key_.emplace(key, i);
      resource_of_key_.emplace(key + " readers", i);
      continue;
    }
    resource_of_key_.emplace(key + " permits", i);
    for (std::uint32_t slot = 0; slot <= records_.permits[i]; ++slot)
      resource_of_key_.emplace(key + " permit:" + std::to_string(slot), i);
  }

  net_ =
      std::make_unique<network>(clock_, random_.fork(), setup_.daemons,
                                static_cast<sim_time>(setup_.cfg.redis_connect_timeout_ms) * 1000);
  std::vector<master*> masters;
  for (std::size_t m = 0; m < setup_.masters; ++m) {
    masters_.push_back(std::make_unique<master>(m, clock_, lua_, random_.fork(), *net_, *this));
    masters_.back()->set_drift(setup_.master_drift[m]);
    masters.push_back(masters_.back().get());
  }
  net_->set_masters(masters);
  forward_jumps_.resize(setup_.masters);
  for (std::size_t d = 0; d < setup_.daemons; ++d) {
    for (std::size_t m = 0; m < setup_.masters; ++m)
      net_->set_latency(d, m, setup_.latency[d * setup_.masters + m]);
    // Each daemon's engine logs under its own name, so that a trace says whose decision it was.
    auto daemon_log = log_;
    if (options.verbose) {
      daemon_log = std::make_shared<spdlog::logger>("sim");
      daemon_log->sinks().push_back(
          std::make_shared<virtual_time_sink>(clock_, "engine[" + std::to_string(d) + "]"));
      daemon_log->set_level(spdlog::level::debug);
    }
    daemons_.push_back(std::make_unique<sim_daemon>(d, setup_.cfg, clock_, *net_, random_.fork(),
                                                    *this, daemon_log, setup_.daemon_drift[d]));
    net_->attach(d, *daemons_.back());
  }
  for (std::uint32_t c = 0; c < setup_.work.clients; ++c)
    clients_.push_back(std::make_unique<sim_client>(c, *this, random_.fork(), setup_.work));
  if (scenario_)
    for (const scenario_step& step : scenario_->steps) {
      if (step.what == scenario_step::action::request)
        scripted_requests_.push_back(none);
      while (scripted_clients_.size() <= step.client)
        scripted_clients_.push_back(std::make_unique<scripted_client>(
            static_cast<std::uint32_t>(scripted_clients_.size()), *this));
    }
  faults_ = std::make_unique<fault_injector>(clock_, random_.fork(), setup_.faults, masters_, *net_,
                                             daemons_, records_, *this);
}

run_result simulation::run() {
  for (auto& d : daemons_)
    d->start();
  for (auto& c : clients_)
    c->start(random_.between(0, 200'000));
  faults_->start();
  if (scenario_)
    for (std::size_t i = 0; i < scenario_->steps.size(); ++i)
      clock_.at(scenario_->steps[i].at, *this, scenario_step_event, i);
  clock_.after(0, *this, sample_health);
  clock_.after(setup_.workload_for, *this, stop_workload);
  sim_time end = setup_.workload_for + setup_.drain;
  // A run whose events pile up in virtual time (a busy loop: rounds answered within
  // microseconds, again and again) is stopped: it is a finding of its own, and simulating it to
  // the end would take hours.
  std::optional<violation> runaway;
  sim_time window = 0;
  std::uint64_t window_events = 0;
  while (clock_.step(end)) {
    if (busy_loop_) {
      runaway = runaway_violation();
      end = clock_.now();
      break;
    }
    if ((clock_.events_run() & 0xfff) != 0)
      continue;
    if (clock_.now() - window >= 1'000'000) {
      window = clock_.now();
      window_events = clock_.events_run();
    } else if (clock_.events_run() - window_events > max_events_per_second) {
      runaway = runaway_violation();
      end = clock_.now();
      break;
    }
  }
  records_.end = end;
  if (healthy_since_ >= 0)
    records_.healthy.emplace_back(healthy_since_, end);
  for (const auto& [key, calls] : work_)
    records_.work.push_back({static_cast<std::uint32_t>(key >> 32),
                             static_cast<std::uint32_t>(key & 0xffffffff), calls});
  std::sort(records_.work.begin(), records_.work.end(), [](const auto& a, const auto& b) {
    return a.resource != b.resource ? a.resource < b.resource : a.second < b.second;
  });

  run_result result;
  result.operations = records_.requests.size();
  result.events = clock_.events_run();
  // FNV-1a over what the clients saw, to tell two runs of a seed apart (--replay-check).
  std::uint64_t digest = 14695981039346656037ULL;
  const auto mix = [&](const void* data, std::size_t size) {
    for (std::size_t i = 0; i < size; ++i) {
      digest ^= static_cast<const unsigned char*>(data)[i];
      digest *= 1099511628211ULL;
    }
  };
  for (const request_record& r : records_.requests) {
    mix(&r.invoke, sizeof r.invoke);
    mix(&r.reply, sizeof r.reply);
    mix(&r.result, sizeof r.result);
    mix(r.owner.data(), r.owner.size());
    mix(&r.fence, sizeof r.fence);
    mix(&r.validity_ms, sizeof r.validity_ms);
  }
  mix(&result.events, sizeof result.events);
  result.digest = digest;
  char text[768];
  std::snprintf(text, sizeof text,
                "%zu masters, %zu daemons, %u clients, %u hot + %u cold resources, TTL %llu-%llu "
                "ms, WAIT %.0f%%, KEEP %.0f%%, lock_delay %llu ms, %zu faults (%s), %zu data "
                "losses told %zu times",
                setup_.masters, setup_.daemons, setup_.work.clients, setup_.work.hot_resources,
                setup_.work.cold_resources, static_cast<unsigned long long>(setup_.work.ttl_min_ms),
                static_cast<unsigned long long>(setup_.work.ttl_max_ms), setup_.work.p_wait * 100,
                setup_.work.p_keep * 100, static_cast<unsigned long long>(setup_.cfg.lock_delay_ms),
                records_.faults.size(), scenario_ ? "scenario" : setup_.fault_profile.c_str(),
                records_.losses.size(), records_.evidence.size());
  std::string kinds = ", kinds " + setup_.mix;
  if (setup_.mix != "exclusive") {
    std::snprintf(text + std::strlen(text), sizeof text - std::strlen(text),
                  "%s (shared %.0f%%, permits %.0f%%, sets %.0f%% of 2-%u)", kinds.c_str(),
                  setup_.work.p_shared * 100, setup_.work.p_permit * 100, setup_.work.p_set * 100,
                  setup_.work.set_max);
    for (std::size_t i = 0; i < setup_.work.permits.size(); ++i)
      std::snprintf(text + std::strlen(text), sizeof text - std::strlen(text), "%s sem%zu n=%u",
                    i == 0 ? "," : "", i, setup_.work.permits[i]);
  }
  result.setup = scenario_ ? "scenario " + scenario_->name + ": " + scenario_->about : text;
  if (runaway)
    result.violations.push_back(*runaway); // the rest of the history was cut short
  else
    result.violations = check_all(records_);
  result.records = std::move(records_);
  return result;
}

std::size_t simulation::requests_in_second(std::uint32_t resource, std::uint64_t second) const {
  // Requests are recorded in the order they are sent: the latest are at the back.
  std::size_t count = 0;
  const auto from = static_cast<sim_time>(second) * 1'000'000;
  for (auto it = records_.requests.rbegin(); it != records_.requests.rend() && it->invoke >= from;
       ++it)
    for (const std::uint32_t named : resources_of(*it))
      count += named == resource ? 1 : 0;
  return count;
}

violation simulation::runaway_violation() const {
  // The resource whose keys the scripts hit most in the last second.
  const auto second = static_cast<std::uint64_t>(clock_.now() / 1'000'000);
  std::uint32_t resource = none;
  std::uint32_t calls = 0;
  for (const auto& [key, count] : work_)
    if ((key & 0xffffffff) == second && count > calls) {
      calls = count;
      resource = static_cast<std::uint32_t>(key >> 32);
    }
  char text[256];
  std::snprintf(text, sizeof text,
                "runaway at %.3f ms: %u script calls on this resource's keys in that second so "
                "far, for %zu requests on it (stopped past %u calls beyond what they cause, or "
                "%llu events in one second of virtual time)",
                static_cast<double>(clock_.now()) / 1000.0, calls,
                resource == none ? 0 : requests_in_second(resource, second), max_calls_per_second,
                static_cast<unsigned long long>(max_events_per_second));
  return {"work", resource, clock_.now(), text};
}

void simulation::fire(std::uint32_t kind, std::uint64_t arg) {
  if (kind == stop_workload) {
    stopping_ = true;
    return;
  }
  if (kind == scenario_step_event) {
    run_step(scenario_->steps[arg]);
    return;
  }
  // Health, sampled every 5 ms: every master up and prompt, nothing partitioned, every daemon up
  // with every master voting and every wake channel subscribed.
  bool healthy = true;
  for (std::size_t m = 0; m < masters_.size() && healthy; ++m)
    healthy = masters_[m]->up() && !masters_[m]->paused() && masters_[m]->reply_delay() == 0;
  for (std::size_t d = 0; d < daemons_.size() && healthy; ++d) {
    healthy = daemons_[d]->healthy();
    for (std::size_t m = 0; m < masters_.size() && healthy; ++m)
      healthy = !net_->partitioned(d, m);
  }
  const sim_time now = clock_.now();
  if (healthy && healthy_since_ < 0)
    healthy_since_ = now;
  if (!healthy && healthy_since_ >= 0) {
    records_.healthy.emplace_back(healthy_since_, now);
    healthy_since_ = -1;
  }
  clock_.after(5'000, *this, sample_health);
}

void simulation::run_step(const scenario_step& step) {
  const sim_time now = clock_.now();
  switch (step.what) {
  case scenario_step::action::partition:
  case scenario_step::action::blackhole:
  case scenario_step::action::heal: {
    const bool on = step.what != scenario_step::action::heal;
    const bool blackhole = step.what == scenario_step::action::blackhole;
    for (std::size_t m = 0; m < masters_.size(); ++m)
      if ((step.masters >> m & 1) != 0)
        net_->set_partitioned(step.daemon, m, on, blackhole);
    if (on)
      records_.faults.push_back({fault_kind::partition, step.daemon, step.masters, now,
                                 setup_.workload_for + setup_.drain, 0, blackhole});
    else
      for (fault_record& f : records_.faults)
        if (f.kind == fault_kind::partition && f.target == step.daemon &&
            f.end == setup_.workload_for + setup_.drain)
          f.end = now;
    return;
  }
  case scenario_step::action::flushall:
    records_.faults.push_back({fault_kind::master_flushall, step.masters, 0, now, now, 0, false});
    data_lost(step.masters, masters_[step.masters]->flushall(), false, false);
    return;
  case scenario_step::action::lose_key:
    records_.faults.push_back({fault_kind::master_key_loss, step.masters, 0, now, now, 0, false});
    data_lost(step.masters, masters_[step.masters]->lose_key(step.line), false, false);
    return;
  case scenario_step::action::request: {
    // "VERB resource ..." with "$N" for the owner of the scenario's N-th request.
    std::string line = step.line;
    request_record r;
    const std::size_t dollar = line.find('$');
    if (dollar != std::string::npos) {
      const auto n = static_cast<std::size_t>(std::stoul(line.substr(dollar + 1)));
      r.lock = scripted_requests_.at(n);
      if (r.lock == none || records_.requests[r.lock].result != outcome::ok) {
        // Not sent or not granted (yet): the step waits for it, a millisecond at a time.
        if (r.lock == none || records_.requests[r.lock].result == outcome::pending)
          clock_.after(1'000, *this, scenario_step_event,
                       static_cast<std::uint64_t>(&step - scenario_->steps.data()));
        return;
      }
      r.owner = records_.requests[r.lock].owner;
      line = line.substr(0, dollar) + std::string(view(r.owner));
    }
    // "VERB name ..." or "MVERB k name_1 ... name_k ...".
    const std::vector<std::string> words = words_of(line);
    const bool set = words[0].front() == 'M';
    const std::string verb = set ? words[0].substr(1) : words[0];
    const std::size_t named = set ? std::stoul(words[1]) : 1;
    const std::size_t first = set ? 2 : 1;
    const auto index_of = [&](const std::string& name) {
      return static_cast<std::uint32_t>(
          std::find(records_.resources.begin(), records_.resources.end(), name) -
          records_.resources.begin());
    };
    for (std::size_t k = 0; k < named; ++k)
      r.members[k] = index_of(words[first + k]);
    r.member_count = static_cast<std::uint8_t>(set ? named : 0);
    r.resource = r.members[0];
    const std::vector<std::string> rest(words.begin() + static_cast<std::ptrdiff_t>(first + named),
                                        words.end());
    r.kind = verb == "LOCK"     ? client_op::lock
             : verb == "UNLOCK" ? client_op::unlock
                                : client_op::extend;
    if (r.kind != client_op::unlock && !rest.empty())
      r.ttl_ms = std::stoull(rest[r.kind == client_op::lock ? 0 : 1]);
    r.hold = set ? hold_kind::multi : hold_kind::exclusive;
    for (std::size_t k = 0; k < rest.size(); ++k) {
      if (rest[k] == "WAIT")
        r.wait_ms = std::stoll(rest[k + 1]);
      r.keep = r.keep || rest[k] == "KEEP";
      if (rest[k] == "SHARED")
        r.hold = hold_kind::shared;
      if (rest[k] == "PERMITS") {
        r.hold = hold_kind::permit;
        r.permits = static_cast<std::uint32_t>(std::stoul(rest[k + 1]));
      }
    }
    // Requests are numbered in the order the scenario lists them, whenever they go out.
    const auto ordinal = static_cast<std::size_t>(
        std::count_if(scenario_->steps.data(), &step, [](const scenario_step& s) {
          return s.what == scenario_step::action::request;
        }));
    scripted_requests_.at(ordinal) =
        scripted_clients_[step.client]->send(*daemons_[step.daemon], r, line);
    return;
  }
  }
}

// ---------------------------------------------------------------------------------------------
// What the masters' scripts do

void simulation::on_script(const script_run& run) {
  if (metas_.size() <= run.connection)
    metas_.resize(run.connection + 1);
  if (!run.which) { // not one of redlockd's scripts: only its place in the connection's order
    metas_[run.connection].emplace_back();
    return;
  }
  script_meta meta;
  meta.which = run.which;
  // The first key that is a hold's (a set's KEYS start with the registers).
  for (const std::string_view key : run.keys)
    if (const auto it = resource_of_key_.find(key); it != resource_of_key_.end()) {
      meta.resource = it->second;
      break;
    }
  if (!run.args.empty())
    meta.owner = owner_of(run.args[0]);
  meta.error = !run.reply.empty() && run.reply[0] == '-';
  meta.result = integer_at(run.reply, 0).value_or(0);
  if (run.which == script::hand_over) {
    // ARGV: acquire_wait's seven (owner ... slack ms), then the releasing owner (append_hand_over).
    if (run.args.size() >= 8)
      meta.releasing = owner_of(run.args[7]);
    meta.released = integer_at(run.reply, 4).value_or(0);
  }
  if (run.which == script::permit_acquire)
    meta.slot = integer_at(run.reply, 5).value_or(-1);
  if (acquires(*run.which) || extends(*run.which))
    if (run.args.size() >= 2)
      meta.ttl_ms = counter_of(run.args[1]);
  if (options_.verbose && run.which) {
    std::fprintf(stderr, "%12.3f ms master %zu conn %llu %s %s %.*s -> %lld%s%s\n",
                 static_cast<double>(clock_.now()) / 1000.0, run.master,
                 static_cast<unsigned long long>(run.connection),
                 std::string(script_name(*run.which)).c_str(),
                 run.keys.empty() ? "" : std::string(run.keys[0]).c_str(),
                 is_tagged(view(meta.owner)) ? 12 : 8, view(meta.owner).data(),
                 static_cast<long long>(meta.result), meta.error ? " (error)" : "",
                 run.which == script::hand_over
                     ? (", releasing " + std::string(view(meta.releasing).substr(0, 8)) + " -> " +
                        std::to_string(meta.released))
                           .c_str()
                     : "");
  }
  if (metas_.size() <= run.connection)
    metas_.resize(run.connection + 1);
  metas_[run.connection].push_back(meta);
  if (meta.resource != none && run.which != script::fence_bump && run.which != script::seed) {
    const auto second = static_cast<std::uint64_t>(clock_.now() / 1'000'000);
    const std::uint32_t calls = ++work_[static_cast<std::uint64_t>(meta.resource) << 32 | second];
    // Every so many calls: more than the requests on the resource in this second can cause?
    if (calls % max_calls_per_second == 0 &&
        calls >
            max_calls_per_second + 40 * masters_.size() * requests_in_second(meta.resource, second))
      busy_loop_ = true;
  }
  if (acquires(*run.which) || run.which == script::fence_bump || run.which == script::seed)
    track_fence(run.master);
}

void simulation::track_fence(std::size_t master) {
  for (damage& d : damages_) {
    if (d.master != master || d.fence_back || d.fence_before == 0)
      continue;
    const stored* fence =
        masters_[master]->keys().find(setup_.cfg.fence_key, masters_[master]->now_ms());
    if (fence == nullptr || fence->kind != stored::type::string ||
        counter_of(fence->text) < d.fence_before)
      continue;
    d.fence_back = true;
    if (d.record >= 0)
      records_.losses[static_cast<std::size_t>(d.record)].fence_recovered = clock_.now();
  }
}

const script_meta* simulation::take_meta(std::uint64_t connection) {
  if (connection >= metas_.size() || metas_[connection].empty())
    return nullptr;
  taken_ = metas_[connection].front();
  metas_[connection].pop_front();
  return &taken_;
}

void simulation::connection_closed(std::uint64_t connection) {
  if (connection < metas_.size())
    std::deque<script_meta>().swap(metas_[connection]);
  last_sample_.erase(connection);
}

// ---------------------------------------------------------------------------------------------
// What daemons were told

std::uint32_t simulation::new_instance(std::size_t) {
  instances_.emplace_back();
  return static_cast<std::uint32_t>(instances_.size() - 1);
}

void simulation::evidence(std::uint32_t instance, std::size_t master) {
  records_.evidence.push_back({instance, static_cast<std::uint32_t>(master), clock_.now()});
}

void simulation::script_answered(const sim_daemon& d, std::size_t master, std::uint64_t connection,
                                 const request_tag& tag, const script_meta& meta,
                                 sim_time sent_at) {
  if (!meta.which || meta.error)
    return;
  instance_book& book = instances_[d.instance()];
  const sim_time elapsed = clock_.now() - sent_at;
  const auto timeout_of = [&](std::uint64_t ttl_ms) {
    const auto ms = ttl_ms == 0 ? std::chrono::milliseconds(setup_.cfg.node_timeout_ms)
                                : node_timeout_for(ttl_ms, setup_.cfg.node_timeout_ms);
    return static_cast<sim_time>(ms.count()) * 1000;
  };
  // Of the operation's current round (the engine drops the replies of earlier ones) and well
  // inside the round's deadline: the engine certainly counted it.
  const auto current = book.generation.find(tag.op);
  const bool timely = current != book.generation.end() && current->second == tag.generation &&
                      2 * elapsed <= timeout_of(meta.ttl_ms);
  // Before the engine reads it: a master it does not trust does not count, nor one whose clock
  // jumped since the connection's last probe (the engine may see the jump in this very reply).
  const auto sampled = last_sample_.find(connection);
  const bool jumped = std::any_of(
      forward_jumps_[master].begin(), forward_jumps_[master].end(), [&](const auto& jump) {
        return sampled == last_sample_.end() || jump.first > sampled->second;
      });
  const bool trusted = d.alive() && d.engine().votes(master) && !jumped;
  const std::uint32_t bit = 1u << master;
  const script which = *meta.which;
  if (acquires(which)) {
    book.attempt_start.try_emplace(meta.owner, sent_at);
    // A permit's grant is of the slot this master gave: it counts for the owner with that slot.
    if (meta.result == 1 && timely && trusted)
      book.grant_mask[which == script::permit_acquire
                          ? tag_owner(
                                meta.owner, lock_kind::permit,
                                static_cast<std::uint32_t>(std::max<std::int64_t>(meta.slot, 0)))
                          : meta.owner] |= bit;
    if (which == script::hand_over && tag.kind == request_kind::hand_over)
      round_evidence(d, tag, meta.releasing, master, meta.released, timely);
    return;
  }
  if (releases(which)) {
    if (tag.kind == request_kind::release) // an UNLOCK's round (cleanups judge nothing)
      round_evidence(d, tag, meta.owner, master, meta.result, timely);
    return;
  }
  if (extends(which)) {
    if (tag.kind == request_kind::extend) {
      if (meta.result == 1 && timely && trusted) {
        auto& [round, mask] = book.extend_mask[meta.owner];
        const std::uint64_t this_round = static_cast<std::uint64_t>(tag.op) << 32 | tag.generation;
        if (round != this_round)
          mask = 0;
        round = this_round;
        mask |= bit;
      }
      round_evidence(d, tag, meta.owner, master, meta.result, timely);
    }
  }
}

void simulation::round_evidence(const sim_daemon& d, const request_tag& tag, const owner_id& owner,
                                std::size_t master, std::int64_t result, bool timely) {
  if (!timely || (result != 1 && result != -1))
    return;
  instance_book& book = instances_[d.instance()];
  round_book& round = book.rounds[static_cast<std::uint64_t>(tag.op) << 32 | tag.generation];
  if (round.owner != owner)
    round = {owner, 0, 0, 0};
  (result == -1 ? round.gone : round.yes) |= 1u << master;
  const auto lease = book.leases.find(owner);
  if (lease == book.leases.end() || lease->second.valid_until <= clock_.now() + 5'000)
    return;
  const auto lost = lost_by_owner_.find(owner);
  if (lost == lost_by_owner_.end())
    return;
  // A master that granted this lease says its key is gone while another master still has it,
  // and a fault did destroy it there: the daemon must judge it a key loss (engine_votes.cpp).
  for (const auto& [m, at] : lost->second) {
    const std::uint32_t bit = 1u << m;
    if ((round.gone & lease->second.mask & bit) == 0 || (round.told & bit) != 0 ||
        (round.yes & ~bit) == 0 || at < lease->second.granted_at)
      continue;
    round.told |= bit;
    evidence(d.instance(), m);
  }
}

void simulation::clock_sample(const sim_daemon& d, std::size_t master, std::uint64_t connection) {
  // The engine compares each TIME sample with the connection's previous one (node_health): a
  // probe after a forward jump beyond clock_jump_ms shows it. (Scripts' TIME shows it too, but
  // not in every phase of a round: only probes count as telling.)
  const sim_time now = clock_.now();
  const auto previous = last_sample_.find(connection);
  if (previous != last_sample_.end())
    for (const auto& [at, amount] : forward_jumps_[master])
      if (at > previous->second && at <= now) {
        evidence(d.instance(), master);
        break;
      }
  last_sample_[connection] = now;
}

void simulation::master_identified(const sim_daemon& d, std::size_t master,
                                   const master_facts& facts, std::uint64_t high_water) {
  if (!facts.fence && high_water > 0)
    evidence(d.instance(), master); // no fence counter where the fleet has one
}

// ---------------------------------------------------------------------------------------------
// Clients

sim_daemon* simulation::pick_daemon(prng& random) {
  std::vector<sim_daemon*> alive;
  for (auto& d : daemons_)
    if (d->alive())
      alive.push_back(d.get());
  return alive.empty() ? nullptr : alive[random.below(alive.size())];
}

void simulation::granted(std::uint32_t request) {
  request_record& r = records_.requests[request];
  instance_book& book = instances_[r.daemon_instance];
  if (const auto it = book.attempt_start.find(as_sent(r.owner, r.hold));
      it != book.attempt_start.end())
    r.attempt_start = it->second;
  if (!r.keep) {
    const auto mask = book.grant_mask.find(r.owner);
    // The engine keeps leases per hold name: an exclusive grant (or a set's) ends the others
    // of its name; shared holders and permits live side by side until they run out.
    std::vector<owner_id>& others = book.lease_on[queue_of(r)];
    std::erase_if(others, [&](const owner_id& other) {
      const auto lease = book.leases.find(other);
      const bool over = r.hold == hold_kind::exclusive || r.hold == hold_kind::multi ||
                        lease == book.leases.end() || lease->second.valid_until <= r.reply;
      if (over && lease != book.leases.end())
        book.leases.erase(lease);
      return over;
    });
    others.push_back(r.owner);
    book.leases[r.owner] = {mask == book.grant_mask.end() ? 0 : mask->second,
                            r.reply + r.validity_ms * 1000 - 2'000,
                            r.attempt_start >= 0 ? r.attempt_start : r.invoke};
  }
}

void simulation::extended(std::uint32_t request) {
  const request_record& r = records_.requests[request];
  instance_book& book = instances_[r.daemon_instance];
  const auto lease = book.leases.find(r.owner);
  if (lease == book.leases.end())
    return;
  lease->second.valid_until = r.reply + r.validity_ms * 1000 - 2'000;
  // The engine keeps the masters that extended it by the time it answered.
  const auto mask = book.extend_mask.find(r.owner);
  lease->second.mask = mask == book.extend_mask.end() ? 0 : mask->second.second;
}

void simulation::grant_unseen(std::uint32_t request, const owner_id& owner) {
  request_record& r = records_.requests[request];
  const instance_book& book = instances_[r.daemon_instance];
  if (const auto it = book.attempt_start.find(as_sent(owner, r.hold));
      it != book.attempt_start.end())
    r.attempt_start = it->second;
}

std::vector<std::uint32_t> simulation::recently_lost() const {
  const sim_time since = clock_.now() - static_cast<sim_time>(setup_.work.ttl_max_ms) * 1000;
  const std::uint32_t locks = setup_.work.hot_resources + setup_.work.cold_resources;
  std::vector<std::uint32_t> out;
  for (auto loss = records_.losses.rbegin(); loss != records_.losses.rend() && loss->at > since;
       ++loss)
    for (const auto& [resource, owner] : loss->locks)
      if (resource < locks)
        out.push_back(resource);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Faults

bool simulation::loss_allowed(std::size_t master) const {
  const sim_time now = clock_.now();
  std::vector<bool> damaged(masters_.size(), false);
  for (const damage& d : damages_)
    if (now < d.until || !d.fence_back)
      damaged[d.master] = true;
  damaged[master] = true;
  const auto count = static_cast<std::size_t>(std::count(damaged.begin(), damaged.end(), true));
  return count <= masters_.size() - quorum(masters_.size());
}

std::vector<std::size_t> simulation::bare_quorum_masters() const {
  const sim_time now = clock_.now();
  const auto needed = static_cast<int>(quorum(masters_.size()));
  std::uint32_t masks = 0;
  for (const instance_book& book : instances_)
    for (const auto& [owner, lease] : book.leases)
      if (lease.valid_until > now && std::popcount(lease.mask) == needed)
        masks |= lease.mask;
  std::vector<std::size_t> out;
  for (std::size_t m = 0; m < masters_.size(); ++m)
    if ((masks >> m & 1) != 0)
      out.push_back(m);
  return out;
}

void simulation::data_lost(std::size_t master, const std::vector<lost_key>& keys, bool clock_jump,
                           bool announced) {
  const sim_time now = clock_.now();
  damage d{master, now + static_cast<sim_time>(setup_.work.ttl_max_ms) * 1100 + 2'000'000, 0, true,
           -1};
  for (const lost_key& k : keys)
    if (k.key == setup_.cfg.fence_key)
      d.fence_before = counter_of(k.value);
  d.fence_back = d.fence_before == 0; // a clock jump expires keys, never the counter
  if (!announced) {
    data_loss loss;
    loss.master = static_cast<std::uint32_t>(master);
    loss.at = now;
    loss.clock_jump = clock_jump;
    loss.fence_before = d.fence_before;
    loss.register_lost = std::any_of(
        keys.begin(), keys.end(), [&](const lost_key& k) { return k.key == setup_.cfg.fence_key; });
    // The readers' guard (the lock key, 'redlockd:readers') lost while their sorted set
    // stays: an exclusive SET NX now succeeds there, so each live reader lost its hold.
    std::vector<lost_key> unguarded;
    for (const lost_key& k : keys) {
      if (k.value != readers_guard)
        continue;
      const std::string readers = k.key + " readers";
      if (std::any_of(keys.begin(), keys.end(),
                      [&](const lost_key& o) { return o.key == readers; }))
        continue; // lost with it: its members are in `keys`
      const std::int64_t master_now = masters_[master]->now_ms();
      const stored* set = masters_[master]->keys().peek(readers);
      if (set == nullptr || (set->expires_at >= 0 && set->expires_at < master_now))
        continue;
      for (const zset_entry& m : set->members)
        if (m.score >= static_cast<double>(master_now))
          unguarded.push_back({readers, m.member});
    }
    for (const std::vector<lost_key>* list :
         std::array<const std::vector<lost_key>*, 2>{&keys, &unguarded})
      for (const lost_key& k : *list) {
        // A hold's value starts with its owner (a label may follow).
        const auto it = resource_of_key_.find(k.key);
        if (it == resource_of_key_.end() || k.value.size() < owner_id{}.size())
          continue;
        const owner_id owner = owner_of(std::string_view(k.value).substr(0, owner_id{}.size()));
        loss.locks.emplace_back(it->second, owner);
        lost_by_owner_[owner].emplace_back(master, now);
      }
    d.record = static_cast<std::int64_t>(records_.losses.size());
    records_.losses.push_back(std::move(loss));
    if (clock_jump)
      forward_jumps_[master].emplace_back(now, 0);
  }
  damages_.push_back(d);
}

} // namespace

const std::vector<std::string>& weakenings() {
  static const std::vector<std::string> names = {
      "quorum-minus-one",   "no-quarantine",   "handover-skips-keyloss", "publish-on-cleanup",
      "permits-per-master", "no-write-intent", "readers-without-guard",  "set-checks-first-member"};
  return names;
}

const std::vector<std::string>& fault_profiles() {
  static const std::vector<std::string> names = {"none", "mixed", "key-loss", "restarts"};
  return names;
}

const std::vector<std::string>& mixes() {
  static const std::vector<std::string> names = {"exclusive", "shared", "permit", "set", "mixed"};
  return names;
}

run_result run_seed(const run_options& options) {
  simulation sim(options);
  return sim.run();
}

std::string excerpt(const history& h, std::uint32_t resource, sim_time at) {
  std::string out;
  char line[512];
  const sim_time from = at - 3'000'000;
  const sim_time to = at + 500'000;
  // The requests on the resource around `at`: the last 45 before it and the first 15 after.
  std::vector<std::uint32_t> before;
  std::vector<std::uint32_t> after;
  for (std::uint32_t i = 0; i < h.requests.size(); ++i) {
    const request_record& r = h.requests[i];
    const auto named = resources_of(r);
    if (std::find(named.begin(), named.end(), resource) == named.end() ||
        (r.reply >= 0 ? r.reply : h.end) < from || r.invoke > to)
      continue;
    (r.invoke <= at ? before : after).push_back(i);
  }
  if (before.size() > 45)
    before.erase(before.begin(), before.end() - 45);
  if (after.size() > 15)
    after.resize(15);
  before.insert(before.end(), after.begin(), after.end());
  for (const std::uint32_t i : before) {
    const request_record& r = h.requests[i];
    static constexpr const char* verbs[] = {"LOCK", "UNLOCK", "EXTEND"};
    static constexpr const char* results[] = {
        "(none)", "OK", "BUSY", "NOQUORUM", "NOTHELD", "ERR", "ERR PERMITS_MISMATCH"};
    // What it names: "LOCK r", "LOCK r SHARED", "LOCK s PERMITS n", "MLOCK 2 a b".
    std::string what = r.member_count > 0 ? std::string("M") + verbs[static_cast<int>(r.kind)] +
                                                " " + std::to_string(r.member_count)
                                          : verbs[static_cast<int>(r.kind)];
    for (const std::uint32_t named : resources_of(r))
      what += " " + h.resources[named];
    if (r.kind == client_op::lock && r.hold == hold_kind::shared)
      what += " SHARED";
    if (r.kind == client_op::lock && r.hold == hold_kind::permit)
      what += " PERMITS " + std::to_string(r.permits);
    std::snprintf(
        line, sizeof line,
        "  #%u %10.3f..%10.3f ms client %u daemon %u run %u %s ttl %llu%s%s -> %s%s%.*s "
        "fence %llu validity %lld%s\n",
        i, static_cast<double>(r.invoke) / 1000, static_cast<double>(r.reply) / 1000, r.client,
        r.daemon, r.daemon_instance, what.c_str(), static_cast<unsigned long long>(r.ttl_ms),
        r.wait_ms >= 0 ? (" WAIT " + std::to_string(r.wait_ms)).c_str() : "", r.keep ? " KEEP" : "",
        results[static_cast<int>(r.result)], r.owner[0] != 0 ? " owner " : "",
        is_tagged(view(r.owner)) ? 12 : 8, r.owner[0] != 0 ? view(r.owner).data() : "",
        static_cast<unsigned long long>(r.fence), static_cast<long long>(r.validity_ms),
        r.lost >= 0 ? (" LOST at " + std::to_string(r.lost / 1000)).c_str() : "");
    out += line;
  }
  for (const fault_record& f : h.faults) {
    if (f.end < from || f.start > to)
      continue;
    const char* flag = !f.flag                              ? ""
                       : f.kind == fault_kind::master_crash ? " (restarted with its data)"
                       : f.kind == fault_kind::partition    ? " (blackhole)"
                                                            : "";
    std::snprintf(line, sizeof line,
                  "  fault %s target %u masters %#x %10.3f..%10.3f ms amount %lld%s\n",
                  to_string(f.kind), f.target, f.masters, static_cast<double>(f.start) / 1000,
                  static_cast<double>(f.end) / 1000, static_cast<long long>(f.amount), flag);
    out += line;
  }
  for (const data_loss& l : h.losses)
    if (l.at >= from && l.at <= to) {
      std::snprintf(line, sizeof line, "  data loss on master %u at %10.3f ms (%zu locks%s)\n",
                    l.master, static_cast<double>(l.at) / 1000, l.locks.size(),
                    l.clock_jump ? ", clock jump" : "");
      out += line;
    }
  for (const loss_evidence& e : h.evidence)
    if (e.at >= from && e.at <= to) {
      std::snprintf(line, sizeof line, "  daemon run %u told master %u lost data at %10.3f ms\n",
                    e.daemon_instance, e.master, static_cast<double>(e.at) / 1000);
      out += line;
    }
  return out;
}

} // namespace redlockd::sim
