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

scenario_step lose_key(std::uint32_t master, std::string key) {
  return {0, scenario_step::action::lose_key, 0, master, 0, std::move(key)};
}
scenario_step request(std::uint32_t client, std::uint32_t daemon, std::string line) {
  return {0, scenario_step::action::request, daemon, 0, client, std::move(line)};
}

std::vector<scenario> make_scenarios() {
  std::vector<scenario> out;
  // Issue 21, case 1: locks r1 and r2 are held on masters 0, 1, 2 only (the daemon's traffic
  // to 3 and 4 was lost when they were granted), a waiter queues behind r1 (refused by 0, 1, 2,
  // it sleeps for the holder's TTL), master 2 loses both keys, and the holder of r1 unlocks it:
  // the hand-over path must notice that r1's key is gone on master 2 as a plain UNLOCK does, or
  // a new LOCK r2 is granted by masters 2, 3 and 4 while r2's holder still holds it. (The issue
  // emptied master 2 with FLUSHALL; a grant now refuses where the fence register is gone, which
  // catches that on its own, so the keys go one by one here, as an operator's DEL would.)
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
      at(2'600'000, lose_key(2, "r1")),
      at(2'600'000, lose_key(2, "r2")),
      at(3'000'000, request(0, 0, "UNLOCK r1 $1")),  // request 4: handed to request 3
      at(3'100'000, request(3, 0, "LOCK r2 30000")), // request 5: must not be granted
  };
  handover.end = 4'000'000;
  out.push_back(handover);

  // The long run's seed 24695: a master emptied by FLUSHALL while the daemons stay connected.
  // Lock r is held on masters 0, 1, 2 only (daemon 0's traffic to 3 and 4 was lost when it was
  // granted); master 2 is emptied; a LOCK r through daemon 1, which granted nothing and so has
  // no lease to judge a key loss by, must not be granted by masters 2, 3 and 4: master 2's
  // grant refuses where its fence register is gone, and daemon 1 quarantines it.
  scenario flushed;
  flushed.name = "flushall-connected";
  flushed.about = "seed 24695: a FLUSHALL while connected must not let the emptied master vote";
  flushed.daemons = 2;
  flushed.resources = {"r", "warm"};
  flushed.steps = {
      at(200'000, request(2, 0, "LOCK warm 100")), // every master counts
      at(500'000, blackhole(0, 0b11000)),
      at(600'000, request(0, 0, "LOCK r 30000")),
      at(1'500'000, heal(0, 0b11000)),
      at(2'600'000, flushall(2)),
      at(3'000'000, request(1, 1, "LOCK r 30000")), // must not be granted
  };
  flushed.end = 4'000'000;
  out.push_back(flushed);

  // The books, not the engine: a reader holds r on masters 0, 1, 2 (daemon 0 cut from 3 and 4);
  // master 2 loses r's key, the readers' guard, while its readers set stays; an exclusive LOCK
  // through daemon 1, which granted nothing, is then granted by 2, 3 and 4. Daemon 1 cannot know
  // (daemon 0 would learn it at the reader's release or extension, answered -1 by master 2), so
  // that is a key loss the granting daemon was not told of: excused.
  // The books took a lost guard for no hold's loss, and this for a second holder (a survey seed
  // of the key-loss fault).
  scenario guard;
  guard.name = "guard-loss";
  guard.about = "a readers' guard lost alone is a loss of each reader there, not a second holder";
  guard.daemons = 2;
  guard.resources = {"r", "warm"};
  guard.steps = {
      at(200'000, request(2, 0, "LOCK warm 100")), // every master counts
      at(500'000, blackhole(0, 0b11000)),
      at(600'000, request(0, 0, "LOCK r 30000 SHARED")),
      at(1'500'000, heal(0, 0b11000)),
      at(2'600'000, lose_key(2, "r")),
      at(3'000'000, request(1, 1, "LOCK r 30000")), // granted: a loss daemon 1 was not told of
  };
  guard.end = 4'000'000;
  out.push_back(guard);

  // The research note's semaphore counterexample (next-lock-kinds.md, section 4.2), n = 2: X
  // through daemon 0 while it cannot reach masters 3 and 4 (X is on 0, 1, 2), Y through daemon 1
  // while it cannot reach 0 and 1 (on 2, 3, 4: master 2 has X's slot, so Y's first attempts may
  // split over two slots and fail; its WAIT tries again until one slot holds on all three),
  // heal, then Z through daemon 0: 0 and 1 hold X and 3 and 4 hold Y, each on one slot, and 2
  // both, so Z gets the other slot of each pair, never one slot on a majority: refused.
  // Counted per master ("a majority admitted any slot"), Z is granted: three holders.
  scenario semaphore;
  semaphore.name = "semaphore-split";
  semaphore.about = "research note 4.2: permits as slots bound a semaphore split across daemons";
  semaphore.daemons = 2;
  semaphore.resources = {"warm"};
  semaphore.semaphores = {{"pool", 2}};
  semaphore.steps = {
      at(200'000, request(3, 0, "LOCK warm 100")), // every master counts
      at(350'000, request(4, 1, "LOCK warm 100")), // after the first's TTL
      at(500'000, blackhole(0, 0b11000)),
      at(500'000, blackhole(1, 0b00011)),
      at(600'000, request(0, 0, "LOCK pool 30000 PERMITS 2")),
      at(700'000, request(1, 1, "LOCK pool 30000 PERMITS 2 WAIT 5000")),
      at(6'000'000, heal(0, 0b11000)),
      at(6'000'000, heal(1, 0b00011)),
      at(7'000'000, request(2, 0, "LOCK pool 30000 PERMITS 2")), // Z: must be refused
  };
  semaphore.end = 8'000'000;
  out.push_back(std::move(semaphore));

  // Its control: the same without the waiter. The holder's plain UNLOCK finds r1's key gone on
  // master 2 and quarantines it, so the LOCK r2 that follows gets NOQUORUM: nothing to report.
  scenario unlock = handover;
  unlock.name = "unlock-keyloss";
  unlock.about = "issue 21 case 1's control: a plain UNLOCK judges key loss";
  std::erase_if(unlock.steps, [](const scenario_step& step) {
    return step.line.find("WAIT") != std::string::npos;
  });
  out.push_back(std::move(unlock));

  // Issue 21, case 2: both daemons' waiters marked r1 on every master ('*'), then r1 is handed
  // over on masters 0 and 1 only (daemon 0 cannot reach master 2). Once the old holder's key
  // expires on master 2, daemon 1's waiter is granted there and refused by 0 and 1; the cleanup
  // of that attempt finds the '*' marker and publishes a wake-up, which sends the waiter to try
  // again at once: each failed attempt wakes the next. (Staged for the markers of c2376dd. With
  // the wait marks, the hand-over yields to daemon 1's earlier head and the loop does not form
  // even under --weaken publish-on-cleanup; random seeds catch that one, README.md.)
  scenario loop;
  loop.name = "wakeup-loop";
  loop.about = "issue 21 case 2: a failed attempt's cleanup must not wake anyone";
  loop.masters = 3;
  loop.daemons = 2;
  loop.resources = {"r1", "warm"};
  loop.steps = {
      at(200'000, request(4, 0, "LOCK warm 100")),            // request 0
      at(300'000, request(0, 0, "LOCK r1 1000")),             // request 1
      at(400'000, request(1, 1, "LOCK r1 30000 WAIT 10000")), // request 2: daemon 1 waits
      at(450'000, request(2, 0, "LOCK r1 30000 WAIT 10000")), // request 3: daemon 0 waits
      at(500'000, blackhole(0, 0b100)),
      at(600'000, request(0, 0, "UNLOCK r1 $1")), // request 4: handed to request 3 on 0 and 1
  };
  loop.end = 12'000'000;
  out.push_back(std::move(loop));

  // Issue 21, case 3: two clients of daemon 0 pass r1 back and forth (LOCK ... WAIT, UNLOCK:
  // handed over each time) while daemon 1's waiter, refused once, sleeps for the holder's TTL
  // and finds the lock held again each time it wakes.
  scenario starve;
  starve.name = "handover-starves";
  starve.about = "issue 21 case 3: another daemon's head waiter must get its turn";
  starve.daemons = 2;
  starve.resources = {"r1", "warm"};
  starve.steps = {
      at(200'000, request(4, 0, "LOCK warm 100")),          // request 0
      at(300'000, request(0, 0, "LOCK r1 1000")),           // request 1
      at(310'000, request(2, 1, "LOCK r1 1000 WAIT 6000")), // request 2: daemon 1 waits
  };
  // From 320 ms on, every 100 ms: the other client of daemon 0 queues, the holder unlocks.
  std::uint32_t holder = 0;
  std::size_t holder_request = 1;
  std::size_t next_request = 3;
  for (sim_time t = 320'000; t < 6'000'000; t += 100'000) {
    const std::uint32_t other = 1 - holder;
    starve.steps.push_back(at(t, request(other, 0, "LOCK r1 1000 WAIT 5000")));
    const std::size_t queued = next_request++;
    starve.steps.push_back(
        at(t + 50'000, request(holder, 0, "UNLOCK r1 $" + std::to_string(holder_request))));
    ++next_request;
    holder = other;
    holder_request = queued;
  }
  starve.end = 8'000'000;
  out.push_back(std::move(starve));
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
