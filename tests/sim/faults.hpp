// The nemesis: faults at random times from the seed, each only of a kind README.md and
// proto/PROTOCOL.md say redlockd handles (tests/sim/README.md lists the ones left out and why).
// Each run enables its own subset of kinds and its own rate (swarm testing), and the faults stop
// some time before the workload does, so that the last part of a run is healthy and liveness
// can be judged.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "daemon.hpp"
#include "history.hpp"
#include "master.hpp"
#include "network.hpp"
#include "prng.hpp"
#include "scheduler.hpp"

namespace redlockd::sim {

struct fault_plan {
  sim_time mean_interval = 1'000'000; // between two faults
  sim_time until = 0;                 // no fault starts after this
  std::array<double, 10> weight{};    // by fault_kind
  std::uint64_t clock_jump_ms = 500;  // the daemons' configured bound
  std::int64_t max_drift_ppm = 2500;
  std::uint64_t longest_ttl_ms = 0; // a lost key outlives its loss by at most this
  double minority_partitions = 0;   // how often a partition cuts exactly N-Q masters
};

// Where a fault's consequences are booked.
class fault_books {
 public:
  // A master lost data to a fault at the current time: keys (and its fence counter, unless
  // `clock_jump`: a forward jump expired them). `announced`: an empty restart, which every
  // daemon learns of from the new run_id before the master votes again.
  virtual void data_lost(std::size_t master, const std::vector<lost_key>& keys, bool clock_jump,
                         bool announced) = 0;
  // Whether a data loss on `master` now would leave fewer than a majority of masters that kept
  // their data (lost data neither expired nor re-seeded yet).
  virtual bool loss_allowed(std::size_t master) const = 0;
  // The masters that granted a lease still valid on exactly a quorum of masters: a loss there
  // leaves it on fewer, which only key-loss detection can see (a targeted nemesis).
  virtual std::vector<std::size_t> bare_quorum_masters() const = 0;

 protected:
  ~fault_books() = default;
};

class fault_injector final : public event_target {
 public:
  fault_injector(scheduler& clock, prng random, fault_plan plan,
                 std::vector<std::unique_ptr<master>>& masters, network& net,
                 std::vector<std::unique_ptr<sim_daemon>>& daemons, history& records,
                 fault_books& books);

  void start();
  void fire(std::uint32_t kind, std::uint64_t arg) override;
  // Something is faulty now (a fault is in force; instant ones count until they are done).
  bool active() const { return active_ > 0; }

 private:
  enum event_kind : std::uint32_t { next_fault, heal };
  void inject();
  void heal_fault(std::size_t index);
  sim_time duration(std::int64_t min_ms, std::int64_t max_ms) {
    return random_.log_between(min_ms * 1000, max_ms * 1000);
  }

  scheduler& clock_;
  prng random_;
  fault_plan plan_;
  std::vector<std::unique_ptr<master>>& masters_;
  network& net_;
  std::vector<std::unique_ptr<sim_daemon>>& daemons_;
  history& records_;
  fault_books& books_;
  std::vector<bool> master_busy_; // a crash or a pause in force: no second one
  std::vector<bool> daemon_busy_;
  std::vector<std::uint32_t> partitions_; // per (daemon, master): partitions in force
  std::uint32_t active_ = 0;
};

} // namespace redlockd::sim
