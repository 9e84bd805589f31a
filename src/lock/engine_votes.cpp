// Reading masters' typed replies into votes, and noticing a master that lost a live key. Part of
// lock_engine (the orchestrator is lock_engine.cpp); the per-kind rules are in decisions.cpp.
#include "redlockd/lock/decisions.hpp"
#include "redlockd/lock/handover.hpp"
#include "redlockd/lock/lock_engine.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <variant>

namespace redlockd {
namespace {

std::uint32_t node_bit(std::size_t node) {
  return std::uint32_t{1} << node;
}

} // namespace

void lock_engine::count_vote(std::uint32_t slot, std::size_t node, const script_reply& reply) {
  operation& op = slots_[slot];
  if (const auto* error = std::get_if<error_reply>(&reply)) { // NOSCRIPT: take_reply resent it
    log_->warn("node {} answered an error: {}", cfg_.nodes[node].to_string(), error->text);
    op.tally.record(node, vote::failed);
    after_vote(slot);
    return;
  }
  vote v = vote::failed;
  bool gone = false;
  if (!health_.trusted(node)) {
    // Quarantined after the request was sent: its vote no longer counts.
  } else if (const auto* acquire = std::get_if<acquire_reply>(&reply)) {
    if (acquire->lost_data()) {
      data_lost(node);
    } else if (clock_ok(node, acquire->time, op)) {
      const bool granted = acquire->complete && acquire->status == 1;
      if (granted) {
        op.lock.took |= node_bit(node);
        op.lock.kept_ticket =
            std::max(op.lock.kept_ticket,
                     kept_entry_ticket(op.lock.fence.proposed(), acquire->rival_ticket));
        op.lock.rivals_marked = op.lock.rivals_marked || acquire->rival_ticket != 0;
      }
      if (granted && acquire->slot)
        op.lock.slots[node] = static_cast<std::int16_t>(*acquire->slot);
      if (acquire->complete && acquire->status == 2) { // judged when the round ends
        op.lock.permits_in_force = acquire->permits_in_force;
        op.lock.refused_for_n |= node_bit(node);
      }
      const acquire_vote counted = count_acquire(*acquire, fences_, op.lock.fence, op.lock.retry_ms,
                                                 granted ? validity_now(op) : 0);
      if (counted.bad_fence)
        log_->error("node {}: fence key '{}' holds a non-numeric value",
                    cfg_.nodes[node].to_string(), cfg_.fence_key);
      v = counted.cast;
    }
  } else if (const auto* hand = std::get_if<hand_over_reply>(&reply)) {
    // An UNLOCK's hand-over: its own vote is release's (the waiter's went to the waiter).
    v = count_release(hand->release, gone);
  } else if (const auto* bump = std::get_if<fence_bump_reply>(&reply)) {
    if (bump->lost_data)
      data_lost(node);
    v = count_fence_bump(*bump, fences_, op.lock.fence);
  } else if (const auto* release = std::get_if<release_reply>(&reply)) {
    v = count_release(*release, gone);
  } else if (const auto* extend = std::get_if<extend_reply>(&reply)) {
    if (clock_ok(node, extend->time, op)) {
      const bool set = extend->complete && extend->result == 1;
      v = count_extend(*extend, set ? validity_now(op) : 0, gone);
    }
  }
  if (gone && !skips_key_loss(reply))
    op.watch.missing |= node_bit(node);
  op.tally.record(node, v);
  after_vote(slot);
}

bool lock_engine::clock_ok(std::size_t node, const std::optional<node_time>& time,
                           const operation& op) {
  // A vote that comes with a clock jump does not count: the grant cannot be trusted.
  return !time || health_.on_time(node, *time, op.t0);
}

bool lock_engine::skips_key_loss(const script_reply& reply) const {
  // handover-skips-keyloss: the simulator's weakened variant only (config::weakened).
  return cfg_.weakened.handover_skips_keyloss && std::holds_alternative<hand_over_reply>(reply);
}

void lock_engine::drain_reply(std::uint32_t slot, std::size_t node, const script_reply& reply) {
  // The client has its answer: only what the lease and key-loss detection need is read here.
  operation& op = slots_[slot];
  const std::optional<std::int64_t> result = late_result(reply);
  bool yes = result == 1;
  if (const auto* acquire = std::get_if<acquire_reply>(&reply);
      yes && acquire != nullptr && acquire->slot && *acquire->slot != op.lock.slot) {
    // A permit's late grant of another slot than the one a majority gave: a minority hold of
    // this attempt, released there.
    yes = false;
    cleanups_.on(node, op.hold(), op.owner, op.t0 + std::chrono::milliseconds(op.ttl_ms),
                 released::attempt);
  }
  if (result == -1 && !skips_key_loss(reply))
    op.watch.missing |= node_bit(node);
  if (yes && op.kind == op_kind::lock)
    op.watch.granted |= node_bit(node);
  op.tally.record(node, yes ? vote::yes : result ? vote::no : vote::failed);
  after_vote(slot);
}

void lock_engine::after_vote(std::uint32_t slot) {
  operation& op = slots_[slot];
  if (op.watch.missing != 0)
    judge_key_loss(op);
  if (op.phase != op_phase::draining)
    decide(slot);
  else if (op.tally.pending() == 0)
    end_draining(slot);
}

void lock_engine::end_draining(std::uint32_t slot) {
  operation& op = slots_[slot];
  // Grants that came after the reply belong to the lease (or KEEP lock) too.
  if (op.kind == op_kind::lock) {
    if (lease* held = leases_.find(op.key, op.owner))
      held->granted = op.watch.granted;
    if (keep_lock* k = keeps_.find(op.key, op.owner))
      k->granted = op.watch.granted;
  }
  free_slot(slot);
}

void lock_engine::expect_lease(operation& op) {
  // Only the nodes that granted the lock (or its last renewal) can have lost its key.
  if (const lease* held = leases_.find(op.key, op.owner)) {
    op.watch.expect_held = held->granted;
    op.watch.expect_until = held->valid_until;
  } else if (const keep_lock* k = keeps_.find(op.key, op.owner)) {
    op.watch.expect_held = k->granted;
    op.watch.expect_until = k->valid_until;
  } else if (!expect_set_holding(op)) {
    return;
  }
  op.watch.drain = op.watch.expect_held != 0;
}

bool lock_engine::expect_set_holding(operation& op) {
  // Some members of a set (UNLOCK of one, MUNLOCK or MEXTEND of some): the set's lease or KEEP
  // lock, kept under all its members, says which masters granted them (each master grants a
  // set whole or not at all). A key lost there is judged as for the whole set (simulator seed
  // 13002028 --faults key-loss: a set released member by member told nothing, and the master
  // that had lost its keys voted for a second holder of a member). The tables have no index by
  // owner: they are looked through, for a set's owner only.
  if (kind_of_owner(view(op.owner)) != lock_kind::multi)
    return false;
  const std::vector<std::string_view> wanted = members_of(op.key);
  bool found = false;
  if (const lease* held = leases_.find_set(op.owner, wanted)) {
    op.watch.expect_held = held->granted;
    op.watch.expect_until = held->valid_until;
    found = true;
  }
  for (std::uint32_t index = 0; !found && index < keeps_.slots(); ++index) {
    const keep_lock& k = keeps_.at(index);
    if (k.active && k.kind == lock_kind::multi && k.owner == op.owner &&
        holds_members(k.key, wanted)) {
      op.watch.expect_held = k.granted;
      op.watch.expect_until = k.valid_until;
      found = true;
    }
  }
  return found;
}

void lock_engine::judge_key_loss(operation& op) {
  // The masters that released, extended or renewed it still held it (key_loss.hpp).
  key_lost(lost_keys(op.watch, op.tally.yes(), now_()), op.key);
}

void lock_engine::data_lost(std::size_t node) {
  // Every master that votes was seeded with a fence register: one without it lost its data while
  // connected (FLUSHALL), and locks it granted may still be valid elsewhere.
  log_->warn("node {} has no fence register: it lost its data", cfg_.nodes[node].to_string());
  health_.key_lost(node);
}

void lock_engine::key_lost(std::uint32_t masters, std::string_view key) {
  for (std::size_t node = 0; node < node_count_; ++node) {
    if ((masters & node_bit(node)) == 0)
      continue;
    log_->warn("node {} lost the key of a valid lock on '{}'", cfg_.nodes[node].to_string(), key);
    health_.key_lost(node);
  }
}

} // namespace redlockd
