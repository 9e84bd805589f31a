// Scripted runs: the faults and requests of a known interleaving, step by step at fixed virtual
// times, through the same daemons, masters, sessions and checkers as a random run. They pin down
// what the random runs found (a reproduction from issue 21 reads as it was written there), and
// they show that the model can express an interleaving at all.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "scheduler.hpp"

namespace redlockd::sim {

struct scenario_step {
  enum class action : std::uint8_t { partition, blackhole, heal, flushall, lose_key, request };
  sim_time at = 0;
  action what = action::request;
  std::uint32_t daemon = 0;  // partition, blackhole, heal; request: the client's daemon
  std::uint32_t masters = 0; // partition, blackhole, heal: a bit set; flushall, lose_key: one
  std::uint32_t client = 0;  // request: a client has one connection, to one daemon
  // lose_key: the key (without a prefix; the scenarios use none).
  // request: a request line; "$N" stands for the owner the N-th request of the scenario was
  // granted (counting requests from 0). Such a step waits until that request is granted, and
  // is dropped if it is refused.
  std::string line;
};

struct scenario {
  std::string name;
  std::string about;
  std::size_t masters = 5;
  std::size_t daemons = 1;
  std::vector<std::string> resources;
  std::vector<std::pair<std::string, std::uint32_t>> semaphores; // name and n, after resources
  std::vector<scenario_step> steps;
  sim_time end = 0;
};

const std::vector<scenario>& scenarios();
const scenario* find_scenario(const std::string& name);

} // namespace redlockd::sim
