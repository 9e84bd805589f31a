#include "faults.hpp"

#include <algorithm>
#include <bit>

namespace redlockd::sim {

fault_injector::fault_injector(scheduler& clock, prng random, fault_plan plan,
                               std::vector<std::unique_ptr<master>>& masters, network& net,
                               std::vector<std::unique_ptr<sim_daemon>>& daemons, history& records,
                               fault_books& books)
    : clock_(clock), random_(std::move(random)), plan_(plan), masters_(masters), net_(net),
      daemons_(daemons), records_(records), books_(books), master_busy_(masters.size(), false),
      daemon_busy_(daemons.size(), false), partitions_(masters.size() * daemons.size(), 0) {}

void fault_injector::start() {
  double total = 0;
  for (const double w : plan_.weight)
    total += w;
  if (total > 0)
    clock_.after(random_.exponential(static_cast<double>(plan_.mean_interval)), *this, next_fault);
}

void fault_injector::fire(std::uint32_t kind, std::uint64_t arg) {
  if (kind == next_fault) {
    if (clock_.now() >= plan_.until)
      return;
    inject();
    clock_.after(random_.exponential(static_cast<double>(plan_.mean_interval)), *this, next_fault);
  } else {
    heal_fault(arg);
  }
}

void fault_injector::inject() {
  double total = 0;
  for (const double w : plan_.weight)
    total += w;
  double pick = random_.unit() * total;
  std::size_t which = 0;
  while (which + 1 < plan_.weight.size() && pick >= plan_.weight[which]) {
    pick -= plan_.weight[which];
    ++which;
  }
  const auto kind = static_cast<fault_kind>(which);
  const sim_time now = clock_.now();
  fault_record f{kind, 0, 0, now, now, 0, false};
  const auto m = static_cast<std::uint32_t>(random_.below(masters_.size()));
  const auto d = static_cast<std::uint32_t>(random_.below(daemons_.size()));
  master& target = *masters_[m];
  sim_time heal_after = -1;
  switch (kind) {
  case fault_kind::master_crash: {
    if (master_busy_[m])
      return;
    master_busy_[m] = true;
    f.target = m;
    // Empty only if a majority keeps its data; otherwise as AOF keeps it. An empty restart
    // counts as a loss from the crash on, so that no other master's can overlap it unseen.
    f.flag = !books_.loss_allowed(m) || random_.chance(0.5);
    if (!f.flag)
      books_.data_lost(m, target.flushall(), false, true);
    target.crash();
    net_.master_crashed(m);
    heal_after = duration(10, 5000);
    break;
  }
  case fault_kind::master_key_loss:
    // Keys lost while the fence counter stays: caught only by the daemon that granted a lost
    // lock, at its holder's next UNLOCK (handed over or not), EXTEND or renewal (PROTOCOL.md,
    // quarantined:keyloss), not fleet-wide: the checkers excuse a daemon not told yet.
    {
      // Mostly where it matters: a master of a lease granted on a bare quorum.
      const std::vector<std::size_t> fragile = books_.bare_quorum_masters();
      const std::size_t at =
          !fragile.empty() && random_.chance(0.8) ? fragile[random_.below(fragile.size())] : m;
      master& where = *masters_[at];
      if (!where.up() || !books_.loss_allowed(at))
        return;
      f.target = static_cast<std::uint32_t>(at);
      books_.data_lost(at, where.lose_keys_with_ttl(random_, 0.2 + 0.8 * random_.unit()), false,
                       false);
      // In force while a daemon told of it may keep the master out (its quarantine lasts up to
      // the longest TTL): an UNLOCK whose master is quarantined mid-round may answer NOTHELD
      // (seed 13003065 --faults key-loss), which the contract checker then allows.
      heal_after = static_cast<sim_time>(plan_.longest_ttl_ms) * 1100 + 2'000'000;
      break;
    }
  case fault_kind::master_flushall:
    if (!target.up() || !books_.loss_allowed(m))
      return;
    f.target = m;
    books_.data_lost(m, target.flushall(), false, false);
    break;
  case fault_kind::master_pause:
    if (master_busy_[m] || !target.up())
      return;
    master_busy_[m] = true;
    f.target = m;
    target.set_paused(true);
    heal_after = duration(20, 5000);
    break;
  case fault_kind::master_slow:
    if (target.reply_delay() > 0)
      return;
    f.target = m;
    f.amount = duration(2, 100);
    target.set_reply_delay(f.amount);
    heal_after = duration(100, 10000);
    break;
  case fault_kind::master_clock_jump: {
    f.target = m;
    // Forward jumps large enough to be seen (beyond clock_jump_ms): smaller ones hide inside the
    // drift allowance only one at a time, and README asks for NTP in slew mode against them.
    const bool forward = books_.loss_allowed(m) && random_.chance(0.5);
    f.amount =
        forward
            ? random_.between(static_cast<std::int64_t>(plan_.clock_jump_ms) + 500, 30'000) * 1000
            : -duration(50, 10000);
    const std::vector<lost_key> lost = target.jump(f.amount);
    if (forward)
      books_.data_lost(m, lost, true, false);
    break;
  }
  case fault_kind::master_drift:
    f.target = m;
    f.amount = random_.between(-plan_.max_drift_ppm, plan_.max_drift_ppm);
    target.set_drift(f.amount);
    break;
  case fault_kind::daemon_crash: {
    const auto alive =
        std::count_if(daemons_.begin(), daemons_.end(), [](const auto& x) { return x->alive(); });
    if (daemon_busy_[d] || !daemons_[d]->alive() || alive < 2)
      return;
    daemon_busy_[d] = true;
    f.target = d;
    daemons_[d]->crash();
    heal_after = duration(10, 3000);
    break;
  }
  case fault_kind::partition: {
    f.target = d;
    f.masters = static_cast<std::uint32_t>(random_.between(1, (1 << masters_.size()) - 1));
    if (random_.chance(plan_.minority_partitions)) {
      // Just short of a majority: grants go on, on exactly a quorum of the others.
      f.masters = 0;
      const std::size_t minority = masters_.size() - (masters_.size() / 2 + 1);
      while (static_cast<std::size_t>(std::popcount(f.masters)) < minority)
        f.masters |= 1u << random_.below(masters_.size());
    }
    f.flag = random_.chance(0.5); // a blackhole rather than a path that holds traffic
    for (std::size_t x = 0; x < masters_.size(); ++x)
      if ((f.masters >> x & 1) != 0 && partitions_[d * masters_.size() + x]++ == 0)
        net_.set_partitioned(d, x, true, f.flag);
    heal_after = duration(20, 10000);
    break;
  }
  case fault_kind::link_reset:
    if (!daemons_[d]->alive() || daemons_[d]->link_connection(m) == 0)
      return;
    f.target = d;
    f.masters = 1u << m;
    net_.reset(daemons_[d]->link_connection(m));
    break;
  case fault_kind::wake_loss:
    if (!daemons_[d]->alive() || daemons_[d]->subscriber_connection(m) == 0)
      return;
    f.target = d;
    f.masters = 1u << m;
    net_.reset(daemons_[d]->subscriber_connection(m));
    break;
  }
  records_.faults.push_back(f);
  if (heal_after >= 0) {
    ++active_;
    clock_.after(heal_after, *this, heal, records_.faults.size() - 1);
  }
}

void fault_injector::heal_fault(std::size_t index) {
  fault_record& f = records_.faults[index];
  f.end = clock_.now();
  --active_;
  switch (f.kind) {
  case fault_kind::master_crash: {
    masters_[f.target]->restart(f.flag); // emptied at the crash already, if it was to be
    master_busy_[f.target] = false;
    break;
  }
  case fault_kind::master_pause:
    masters_[f.target]->set_paused(false);
    net_.master_resumed(f.target);
    master_busy_[f.target] = false;
    break;
  case fault_kind::master_slow:
    masters_[f.target]->set_reply_delay(0);
    break;
  case fault_kind::daemon_crash:
    daemons_[f.target]->start();
    daemon_busy_[f.target] = false;
    break;
  case fault_kind::partition:
    for (std::size_t x = 0; x < masters_.size(); ++x)
      if ((f.masters >> x & 1) != 0 && --partitions_[f.target * masters_.size() + x] == 0)
        net_.set_partitioned(f.target, x, false);
    break;
  default:
    break;
  }
}

} // namespace redlockd::sim
