#include "scenarios.hpp"

namespace redlockd::sim {
namespace {

scenario_step at(sim_time when, scenario_step step) {
  step.at = when;
  return step;
}
scenario_step blackhole(std::uint32_t daemon, std::uint32_t masters) {
  return {0, scenario_step::action::blackhole, daemon, masters, 0, {}};
}
scenario_step heal(std::uint32_t daemon, std::uint32_t masters) {
  return {0, scenario_step::action::heal, daemon, masters, 0, {}};
}
scenario_step flushall(std::uint32_t master) {
  return {0, scenario_step::action::flushall, 0, master, 0, {}};
}
scenario_step request(std::uint32_t client, std::uint32_t daemon, std::string line) {
  return {0, scenario_step::action::request, daemon, 0, client, std::move(line)};
}

std::vector<scenario> make_scenarios() {
  std::vector<scenario> out;
  // Issue 21, case 1: locks r1 and r2 are held on masters 0, 1, 2 only (the daemon's traffic
  // to 3 and 4 was lost when they were granted), a waiter queues behind r1 (refused by 0, 1, 2,
  // it sleeps for the holder's TTL), master 2 is emptied, and the holder of r1 unlocks it: the
  // hand-over path must notice that r1's key is gone on master 2 as a plain UNLOCK does, or a
  // new LOCK r2 is granted by masters 2, 3 and 4 while r2's holder still holds it.
  scenario handover;
  handover.name = "handover-keyloss";
  handover.about = "issue 21 case 1: a hand-over must judge key loss as an UNLOCK does";
  handover.resources = {"r1", "r2", "warm"};
  handover.steps = {
      at(200'000, request(4, 0, "LOCK warm 100")), // request 0: every master counts
      at(500'000, blackhole(0, 0b11000)),
      at(600'000, request(0, 0, "LOCK r1 30000")), // request 1
      at(610'000, request(1, 0, "LOCK r2 30000")), // request 2
      at(1'500'000, heal(0, 0b11000)),
      at(2'500'000, request(2, 0, "LOCK r1 30000 WAIT 20000")), // request 3: queued behind r1
      at(2'600'000, flushall(2)),
      at(3'000'000, request(0, 0, "UNLOCK r1 $1")),  // request 4: handed to request 3
      at(3'100'000, request(3, 0, "LOCK r2 30000")), // request 5: must not be granted
  };
  handover.end = 4'000'000;
  out.push_back(handover);

  // Its control: the same without the waiter. The holder's plain UNLOCK finds r1's key gone on
  // master 2 and quarantines it, so the LOCK r2 that follows gets NOQUORUM: nothing to report.
  scenario unlock = handover;
  unlock.name = "unlock-keyloss";
  unlock.about = "issue 21 case 1's control: a plain UNLOCK judges key loss";
  std::erase_if(unlock.steps, [](const scenario_step& step) {
    return step.line.find("WAIT") != std::string::npos;
  });
  out.push_back(std::move(unlock));
  return out;
}

} // namespace

const std::vector<scenario>& scenarios() {
  static const std::vector<scenario> all = make_scenarios();
  return all;
}

const scenario* find_scenario(const std::string& name) {
  for (const scenario& s : scenarios())
    if (s.name == name)
      return &s;
  return nullptr;
}

} // namespace redlockd::sim
