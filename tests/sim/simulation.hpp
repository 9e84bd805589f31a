// One run of the simulator: everything a seed decides (how many daemons and masters, their
// configuration, the network, the workload, the faults), the run in virtual time, and the
// checkers over its history. `run_seed(S)` twice gives the same history, bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkers.hpp"
#include "history.hpp"

namespace redlockd::sim {

struct run_options {
  std::uint64_t seed = 1;
  // A rule switched off in the engine (config::weakened): quorum-minus-one, no-quarantine.
  std::string weaken;
  bool verbose = false; // the engines' logs and the run's events on stderr, in virtual time
  // A scripted run (scenarios.hpp) instead of the seed's random workload and faults.
  std::string scenario;
  // The kinds of lock the clients take, instead of the seed's mix (mixes()).
  std::string mix;
  // The seed's faults drawn as this profile says, instead of the seed's (fault_profiles()).
  std::string faults;
};

struct run_result {
  std::uint64_t operations = 0; // client requests
  std::uint64_t events = 0;
  std::uint64_t digest = 0; // of every request and reply: equal for equal runs
  std::string setup;        // what the seed chose, one line
  history records;
  std::vector<violation> violations;
};

// The weakened variants --weaken accepts.
const std::vector<std::string>& weakenings();
// The mixes of kinds --mix accepts: exclusive, shared, permit, set (mostly that kind), mixed.
const std::vector<std::string>& mixes();
// The fault profiles --faults accepts: none, mixed, key-loss, restarts (simulation.cpp: choose).
const std::vector<std::string>& fault_profiles();

run_result run_seed(const run_options& options);

// The history of `resource` around `at`, a few dozen lines, for a violation report.
std::string excerpt(const history& h, std::uint32_t resource, sim_time at);

} // namespace redlockd::sim
