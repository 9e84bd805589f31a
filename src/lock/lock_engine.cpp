// The orchestrator: requests become operations, operations run rounds on the masters, finished
// rounds are judged (decisions.hpp) and answered. LOCK's own path (WAIT, fencing, KEEP) is in
// engine_acquire.cpp; reading replies into votes in engine_votes.cpp.
#include "redlockd/lock/lock_engine.hpp"

#include "redlockd/lock/decisions.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>

namespace redlockd {
namespace {

// The seed of the retry jitter: from `random` when one is injected (the simulator), else from
// std::random_device.
std::minstd_rand::result_type jitter_seed(const random_bytes& random) {
  if (!random)
    return std::random_device{}();
  std::array<std::uint8_t, 4> bytes{};
  random(bytes);
  return static_cast<std::minstd_rand::result_type>(bytes[0] | bytes[1] << 8 | bytes[2] << 16 |
                                                    static_cast<std::uint32_t>(bytes[3]) << 24);
}

} // namespace

lock_engine::lock_engine(const config& cfg, node_io& io, std::shared_ptr<spdlog::logger> log,
                         now_function now, random_bytes random)
    : cfg_(cfg), io_(io), log_(std::move(log)), now_(std::move(now)), node_count_(cfg.nodes.size()),
      keys_(cfg.fence_key), owners_(random), daemon_id_(view(owners_.next()).substr(0, 16)),
      mark_slack_ms_(2 * std::uint64_t{cfg.node_timeout_ms} + 100),
      release_wake_(release_wake(keys_, daemon_id_, true, mark_slack_ms_)),
      health_(cfg, io, *log_, now_, fences_, counters_, keys_, daemon_id_,
              [this](clock_type::time_point when, std::uint32_t node, std::uint64_t stamp) {
                add_deadline(when, node, stamp, timer_kind::node);
              }),
      leases_(cfg.lock_delay_ms, now_),
      cleanups_(io, cfg.nodes.size(), keys_, release_wake_,
                [this](std::uint32_t masters, std::string_view key) { key_lost(masters, key); }),
      random_(jitter_seed(random)) {}

// ---------------------------------------------------------------------------------------------
// Client requests

void lock_engine::lock(const lock_request& req, std::shared_ptr<reply_sink> sink,
                       std::uint64_t seq) {
  const std::uint32_t slot = allocate(op_kind::lock, std::move(sink), seq);
  operation& op = slots_[slot];
  const lock_kind kind = req.mode == lock_mode::shared    ? lock_kind::shared
                         : req.mode == lock_mode::permits ? lock_kind::permit
                                                          : lock_kind::exclusive;
  name_hold(op, kind, {&req.resource, 1}, req.permits);
  op.ttl_ms = req.ttl_ms;
  start_lock(slot, req.keep, req.wait_ms, req.label, req.max_hold_ms);
}

void lock_engine::mlock(const mlock_request& req, std::shared_ptr<reply_sink> sink,
                        std::uint64_t seq) {
  const std::uint32_t slot = allocate(op_kind::lock, std::move(sink), seq);
  operation& op = slots_[slot];
  name_hold(op, lock_kind::multi, req.resources, 0);
  op.ttl_ms = req.ttl_ms;
  start_lock(slot, req.keep, req.wait_ms, req.label, req.max_hold_ms);
}

void lock_engine::name_hold(operation& op, lock_kind kind,
                            std::span<const std::string_view> resources, std::uint32_t permits) {
  op.hold_kind = kind;
  op.permits = kind == lock_kind::permit ? permits : 0;
  op.lock.shown.assign(resources.empty() ? std::string_view() : resources.front());
  if (kind != lock_kind::multi) {
    op.key.assign(cfg_.key_prefix).append(op.lock.shown);
    if (kind == lock_kind::permit)
      op.key.append(permits_suffix);
    return;
  }
  // A set is named by its member keys in one order, whatever order the client gave.
  std::vector<std::string_view> sorted(resources.begin(), resources.end());
  std::sort(sorted.begin(), sorted.end());
  op.key.clear();
  for (const std::string_view resource : sorted) {
    if (!op.key.empty())
      op.key.push_back(member_separator);
    op.key.append(cfg_.key_prefix).append(resource);
  }
}

void lock_engine::start_lock(std::uint32_t slot, bool keep, std::optional<std::uint64_t> wait_ms,
                             std::optional<std::string_view> label,
                             std::optional<std::uint64_t> max_hold_ms) {
  operation& op = slots_[slot];
  op.lock.label.assign(label.value_or(std::string_view()));
  op.lock.max_hold_ms = hold_limit(max_hold_ms, cfg_.max_hold_ms);
  if (keep) {
    // Counted from the request on; finish() gives it back if no KEEP lock comes of it.
    if (!keeps_.reserve(op.sink.get(), cfg_.max_keep_locks_per_connection)) {
      finish(slot, format_error(err_code::too_many,
                                "this connection holds max_keep_locks_per_connection KEEP locks"));
      return;
    }
    op.lock.keep = true;
  }
  if (wait_ms) {
    if (queues_.total() >= cfg_.max_waiters ||
        queues_.waiting_on(op.key) >= cfg_.max_waiters_per_resource) {
      finish(slot, format_error(err_code::too_many, "too many waiters"));
      return;
    }
    op.lock.queued = true;
    op.lock.wait_until = op.t0 + std::chrono::milliseconds(*wait_ms);
    op.lock.last_failure = format_busy(0);
    add_deadline(op.lock.wait_until, slot, op.serial, timer_kind::wait_expiry);
    if (op.hold_kind == lock_kind::multi)
      ++set_waiters_;
    if (queues_.join(op.key, {slot, op.serial}))
      try_acquire(slot);
    return;
  }
  if (const auto head = queues_.head(op.key)) {
    // Waiters are served first come, first served: a try-lock does not jump the queue. One for
    // a semaphore whose waiters here name another n may name the wrong n: the masters say
    // (PERMITS_MISMATCH where another n is in force, else BUSY), and its round takes nothing.
    if (op.hold_kind == lock_kind::permit && slots_[head->slot].permits != op.permits) {
      op.lock.check_only = true;
      try_acquire(slot);
      return;
    }
    ++counters_.busy;
    finish(slot, format_busy(0));
    return;
  }
  try_acquire(slot);
}

void lock_engine::unlock(const unlock_request& req, std::shared_ptr<reply_sink> sink,
                         std::uint64_t seq) {
  const std::uint32_t slot = allocate(op_kind::unlock, std::move(sink), seq);
  // The owner says its hold's kind; a set's owner with one resource releases that member.
  name_hold(slots_[slot], kind_of_owner(req.owner), {&req.resource, 1}, 0);
  start_unlock(slot, req.owner);
}

void lock_engine::munlock(const munlock_request& req, std::shared_ptr<reply_sink> sink,
                          std::uint64_t seq) {
  const std::uint32_t slot = allocate(op_kind::unlock, std::move(sink), seq);
  name_hold(slots_[slot], lock_kind::multi, req.resources, 0);
  start_unlock(slot, req.owner);
}

void lock_engine::start_unlock(std::uint32_t slot, std::string_view owner) {
  operation& op = slots_[slot];
  std::copy_n(owner.begin(), op.owner.size(), op.owner.begin());
  op.ttl_ms = 0;
  expect_lease(op);
  const bool held_here = leases_.find(op.key, op.owner) || keeps_.find(op.key, op.owner);
  // An explicit UNLOCK of a KEEP lock ends its renewals whatever the nodes answer.
  if (const auto index = keeps_.index_of(op.key, op.owner))
    keeps_.drop(*index);
  else if (kind_of_owner(owner) == lock_kind::multi)
    keep_rest_of_set(op);
  if (!start_hand_over(slot, held_here)) // a waiter here takes the lock over in the same round
    begin_round(slot, op_phase::voting, request_kind::release);
}

void lock_engine::keep_rest_of_set(const operation& op) {
  // Some members of a KEEP set released (UNLOCK of one, MUNLOCK of some): its renewals go on
  // with the rest, or the next one finds a released member gone and says LOST about a set the
  // client let go of (the simulator, seed 288).
  const std::vector<std::string_view> released = members_of(op.key);
  for (std::uint32_t index = 0; index < keeps_.slots(); ++index) {
    keep_lock& k = keeps_.at(index);
    if (!k.active || k.kind != lock_kind::multi || k.owner != op.owner)
      continue;
    std::string rest = set_without(k.key, released);
    if (rest.empty()) {
      keeps_.drop(index);
      continue;
    }
    if (std::find(released.begin(), released.end(), cfg_.key_prefix + k.shown) != released.end())
      k.shown = std::string_view(rest)
                    .substr(0, rest.find(member_separator))
                    .substr(cfg_.key_prefix.size()); // LOST names a member it still holds
    keeps_.rename(index, std::move(rest));
  }
}

void lock_engine::extend(const extend_request& req, std::shared_ptr<reply_sink> sink,
                         std::uint64_t seq) {
  const std::uint32_t slot = allocate(op_kind::extend, std::move(sink), seq);
  name_hold(slots_[slot], kind_of_owner(req.owner), {&req.resource, 1}, 0);
  start_extend(slot, req.owner, req.ttl_ms);
}

void lock_engine::mextend(const mextend_request& req, std::shared_ptr<reply_sink> sink,
                          std::uint64_t seq) {
  const std::uint32_t slot = allocate(op_kind::extend, std::move(sink), seq);
  name_hold(slots_[slot], lock_kind::multi, req.resources, 0);
  start_extend(slot, req.owner, req.ttl_ms);
}

void lock_engine::start_extend(std::uint32_t slot, std::string_view owner, std::uint64_t ttl_ms) {
  operation& op = slots_[slot];
  std::copy_n(owner.begin(), op.owner.size(), op.owner.begin());
  op.ttl_ms = ttl_ms;
  expect_lease(op);
  begin_round(slot, op_phase::voting, request_kind::extend);
}

void lock_engine::client_gone(const reply_sink* client) {
  for (std::uint32_t index = 0; index < keeps_.slots(); ++index)
    if (keeps_.at(index).active && keeps_.at(index).sink.get() == client)
      end_keep(index);
  for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
    operation& op = slots_[slot];
    if (op.phase == op_phase::idle || op.sink.get() != client)
      continue;
    op.sink.reset(); // an acquisition in flight is released when it completes
    if (op.kind != op_kind::lock)
      continue;
    // The next waiter must not sleep until its own deadline because the head left.
    if (op.lock.queued)
      dequeue(slot, now_());
    if (op.phase == op_phase::waiting)
      finish(slot, {});
  }
  // Acquisitions in flight lost their sink above; the client's count goes with it, so that a new
  // session at the same address starts from zero.
  keeps_.forget_client(client);
}

// ---------------------------------------------------------------------------------------------
// Masters

void lock_engine::on_node_connected(std::size_t node, const node_facts& facts) {
  health_.on_connected(node, facts);
}

void lock_engine::on_node_ready(std::size_t node) {
  cleanups_.on_node_ready(node, now_());
  health_.on_ready(node);
}

bool lock_engine::on_node_time(std::size_t node, std::uint64_t seconds, std::uint64_t micros,
                               std::optional<clock_type::time_point> sent_at) {
  return health_.on_time(node, {seconds, micros}, sent_at.value_or(now_()));
}

void lock_engine::on_reply(std::size_t node, const request_tag& tag, const script_reply& reply) {
  switch (tag.kind) {
  case request_kind::cleanup:
    cleanups_.on_reply(node, tag, &reply, now_());
    return;
  case request_kind::fleet_read:
    health_.on_register_read(node, tag, std::get_if<register_reply>(&reply));
    return;
  case request_kind::seed:
    if (tag.op < node_count_)
      health_.on_seed_reply(node, tag, reply);
    return;
  case request_kind::quarantine_mark:
    if (tag.op < node_count_)
      health_.on_mark_reply(node, tag, reply);
    return;
  default:
    break;
  }
  if (tag.generation == 0 || tag.op >= slots_.size())
    return;
  if (!expects(tag, node)) {
    if (tag.kind == traits_of(slots_[tag.op].hold_kind).acquire_request)
      late_grant(tag, reply); // a waiter's failed attempt: a split
    // A granted one, fenced: its lease's masters. Its place may serve a request of another kind
    // by now (a fenced grant frees it at once): the round's tag finds it, not the place's kind.
    if (is_acquire_request(tag.kind))
      late_winning_grant(tag, node, reply);
    return;
  }
  if (tag.kind == request_kind::hand_over)
    pass_to_waiter(tag.op, node, &reply); // the waiter's vote; the UNLOCK's own below
  take_reply(node, tag, reply);
}

bool lock_engine::expects(const request_tag& tag, std::size_t node) const {
  // A late reply of an earlier round: its slot was kept, the answer is discarded.
  const operation& op = slots_[tag.op];
  return op.generation == tag.generation && op.collecting() && op.tally.of(node) == vote::pending;
}

void lock_engine::take_reply(std::size_t node, const request_tag& tag, const script_reply& reply) {
  if (!expects(tag, node))
    return;
  if (const auto* error = std::get_if<error_reply>(&reply); error && error->noscript()) {
    // The node lost its scripts (restart, SCRIPT FLUSH): this one goes again by source, the rest
    // are reloaded. After the answer too: an UNLOCK's release must still run there.
    io_.reload_scripts(node);
    request_tag again = tag;
    const operation& op = slots_[tag.op];
    if (tag.kind == request_kind::hand_over && !handing_to_waiter(op))
      again.kind = request_kind::release; // the waiter's round is over: only the release is left
    format_round(op, again.kind, script_by::source);
    io_.send(node, again, command_);
    return;
  }
  if (slots_[tag.op].phase == op_phase::draining)
    drain_reply(tag.op, node, reply);
  else
    count_vote(tag.op, node, reply);
}

void lock_engine::on_failure(std::size_t node, const request_tag& tag) {
  switch (tag.kind) {
  case request_kind::cleanup:
    cleanups_.on_reply(node, tag, nullptr, now_());
    return;
  case request_kind::fleet_read:
    health_.on_register_read(node, tag, nullptr);
    return;
  case request_kind::seed:
    health_.on_seed_lost(tag);
    return;
  case request_kind::quarantine_mark:
    health_.on_mark_lost(tag);
    return;
  default:
    break;
  }
  if (tag.generation == 0 || tag.op >= slots_.size())
    return;
  const operation& op = slots_[tag.op];
  if (op.generation != tag.generation || !op.collecting())
    return;
  if (tag.kind == request_kind::hand_over)
    pass_to_waiter(tag.op, node, nullptr);
  if (slots_[tag.op].tally.record(node, vote::failed))
    after_vote(tag.op);
}

// ---------------------------------------------------------------------------------------------
// Operations and rounds

std::uint32_t lock_engine::allocate(op_kind kind, std::shared_ptr<reply_sink> sink,
                                    std::uint64_t seq) {
  std::uint32_t slot = 0;
  if (free_slots_.empty()) {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  operation& op = slots_[slot];
  op.serial = next_serial_++;
  op.kind = kind;
  op.enter(op_phase::waiting);
  op.sink = std::move(sink);
  op.seq = seq;
  op.lock.fence_rounds = 0;
  op.lock.retry_ms = 0;
  op.lock.queued = op.lock.keep = op.lock.keep_started = op.lock.woken = false;
  op.lock.retry_stamp = op.lock.ticket = 0;
  op.lock.split_retries = 0;
  op.lock.deferred = false;
  op.lock.failed_generation = 0;
  op.lock.label.clear();
  op.lock.max_hold_ms = 0;
  op.lock.shown.clear();
  op.lock.slot = 0;
  op.lock.permits_in_force = 0;
  op.lock.refused_for_n = 0;
  op.lock.check_only = false;
  op.hold_kind = lock_kind::exclusive;
  op.permits = 0;
  op.handing = {};
  op.watch = {};
  op.t0 = now_();
  op.lock.requested_at = op.t0;
  return slot;
}

std::shared_ptr<reply_sink> lock_engine::retire(std::uint32_t slot) {
  operation& op = slots_[slot];
  // A KEEP acquisition that did not become a KEEP lock gives its place back.
  if (op.kind == op_kind::lock && op.lock.keep && !op.lock.keep_started)
    keeps_.unreserve(op.sink.get());
  std::shared_ptr<reply_sink> sink = std::move(op.sink);
  if (op.kind == op_kind::lock && sink)
    acquire_latency_.record(now_() - op.lock.requested_at);
  if (op.watch.drain && op.phase == op_phase::voting && op.tally.pending() > 0) {
    // Answered at quorum; the slot stays until the other nodes have answered or timed out: the
    // lease learns every node that granted it, and a node that lost the key is noticed.
    op.enter(op_phase::draining);
  } else {
    free_slot(slot);
  }
  return sink;
}

void lock_engine::finish(std::uint32_t slot, std::string line) {
  const std::uint64_t seq = slots_[slot].seq;
  if (const auto sink = retire(slot); sink && !line.empty())
    sink->deliver(seq, std::move(line));
}

void lock_engine::finish_grant(std::uint32_t slot, grant_reply grant) {
  const std::uint64_t seq = slots_[slot].seq;
  if (const auto sink = retire(slot))
    sink->deliver_grant(seq, std::move(grant), now_());
}

void lock_engine::free_slot(std::uint32_t slot) {
  operation& op = slots_[slot];
  op.enter(op_phase::idle);
  op.generation = next_generation(op.generation);
  op.handing.active = false;
  free_slots_.push_back(slot);
}

void lock_engine::begin_round(std::uint32_t slot, op_phase phase, request_kind kind) {
  open_round(slot, phase);
  send_round(slot, kind);
  decide(slot);
}

void lock_engine::open_round(std::uint32_t slot, op_phase phase) {
  operation& op = slots_[slot];
  op.enter(phase);
  op.generation = next_generation(op.generation);
  // quorum-minus-one: the simulator's weakened variant only (config::weakened).
  op.tally.reset(node_count_, cfg_.weakened.quorum_minus_one ? quorum(node_count_) - 1 : 0);
  // An UNLOCK waits node_timeout_ms for each master, with or without a waiter to hand over to.
  const auto timeout = op.ttl_ms == 0 ? std::chrono::milliseconds(cfg_.node_timeout_ms)
                                      : node_timeout_for(op.ttl_ms, cfg_.node_timeout_ms);
  add_deadline(now_() + timeout, slot, op.generation, timer_kind::round);
}

void lock_engine::send_round(std::uint32_t slot, request_kind kind) {
  operation& op = slots_[slot];
  bool formatted = false; // the command is the same for every node: formatted once
  for (std::size_t node = 0; node < node_count_; ++node) {
    if (eligible(node)) {
      if (!formatted)
        format_round(op, kind, script_by::sha);
      formatted = true;
      io_.send(node, request_tag{kind, slot, op.generation}, command_);
      continue;
    }
    op.tally.record(node, vote::failed);
    // A quarantined or unreachable node does not vote, but it must not keep the key either.
    if (kind == request_kind::release || kind == request_kind::hand_over)
      cleanups_.on(node, op.hold(), op.owner, now_() + std::chrono::milliseconds(health_.max_ttl()),
                   released::lock);
  }
}

void lock_engine::format_round(const operation& op, request_kind kind, script_by by) {
  command_.clear();
  const std::string_view owner = view(op.owner);
  const lock_kind_traits& row = traits_of(op.hold_kind);
  switch (kind) {
  case request_kind::acquire:
  case request_kind::acquire_slot: {
    acquire_call call{owner,          op.lock.label, op.ttl_ms,         op.lock.fence.proposed(),
                      first_slot(op), nullptr,       op.lock.check_only};
    wait_mark mark;
    // A refusal marks that this daemon waits (and a writer's leaves its intent, but in the
    // weakened daemon of the test suite's controls).
    const bool unmarked = cfg_.unsafe_no_write_intent && op.hold_kind == lock_kind::exclusive;
    if (op.lock.queued && row.leaves_marks && !unmarked) {
      mark = mark_of(op);
      call.mark = &mark;
    }
    row.write_acquire(command_, by, op.hold(), keys_, call, value_);
    break;
  }
  case request_kind::release:
    row.write_release(command_, by, op.hold(), keys_, {owner, release_wake_, false}, marker_);
    break;
  case request_kind::extend:
    row.write_extend(command_, by, op.hold(), keys_, owner, op.ttl_ms);
    break;
  case request_kind::fence_bump:
    append_fence_bump(command_, by, keys_, op.lock.fence.proposed());
    break;
  case request_kind::hand_over: { // op is the UNLOCK (both exclusive: start_hand_over)
    const operation& waiter = slots_[op.handing.waiter_slot];
    append_hand_over(command_, by, op.key, keys_,
                     hold_value(value_, view(waiter.owner), waiter.lock.label), waiter.ttl_ms,
                     waiter.lock.fence.proposed(), mark_of(waiter), owner);
    break;
  }
  default:
    break;
  }
}

std::uint32_t lock_engine::first_slot(const operation& op) const {
  // Concurrent acquirers of one semaphore start on different slots (the owner's random bits
  // pick), while every master of one attempt starts on the same one.
  if (op.permits == 0)
    return 0;
  std::uint32_t bits = 0;
  for (std::size_t i = 8; i < 16; ++i)
    bits = bits * 31 + static_cast<unsigned char>(op.owner[i]);
  return bits % op.permits;
}

// `op` is the head of its queue (only heads try).
wait_mark lock_engine::mark_of(const operation& op) {
  std::uint64_t next_wait_ms = 0;
  if (const auto next = queues_.behind_head(op.key))
    next_wait_ms = std::max<std::uint64_t>(ms_until(now_(), slots_[next->slot].lock.wait_until), 1);
  return {wait_marker(marker_, keys_, op.key),
          ms_until(now_(), op.lock.wait_until),
          daemon_id_,
          op.lock.ticket,
          mark_slack_ms_,
          next_wait_ms};
}

std::int64_t lock_engine::validity_now(const operation& op) const {
  const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(now_() - op.t0);
  return validity_ms(op.ttl_ms, elapsed, cfg_.clock_drift_factor);
}

const vote_tally& lock_engine::votes_of(std::uint32_t slot) {
  operation& op = slots_[slot];
  // A permit's acquire decides by slot: each slot is a mutex, granted by a majority or not.
  if (op.kind != op_kind::lock || op.phase != op_phase::voting ||
      traits_of(op.hold_kind).votes != vote_rule::same_slot)
    return op.tally;
  slot_tally_ = same_slot_view(op.tally, op.lock.slots, op.lock.slot);
  // The weakened daemon of the test suite's controls: each master counts permits on its own.
  if (cfg_.unsafe_count_permits_per_master)
    return op.tally;
  return slot_tally_;
}

void lock_engine::decide(std::uint32_t slot) {
  operation& op = slots_[slot];
  if (op.phase != op_phase::voting && op.phase != op_phase::fencing)
    return;
  const vote_tally& tally = votes_of(slot);
  if (tally.state() == vote_tally::outcome::pending)
    return;
  // A permit's check round (operation::check_only) can only be refused: what it asks is how
  // many masters hold another n, so it hears every master (or the round's timeout) first.
  if (op.kind == op_kind::lock && op.lock.check_only && op.tally.pending() > 0)
    return;
  switch (op.kind) {
  case op_kind::lock: {
    const bool reached = tally.state() == vote_tally::outcome::reached;
    const std::int64_t validity = reached || op.lock.fence.conflict() ? validity_now(op) : 0;
    decide_lock(slot, op.phase == op_phase::voting
                          ? judge_acquire(tally, op.lock.fence.conflict(), validity)
                          : judge_fencing(tally, op.lock.fence.conflict(), validity));
    return;
  }
  case op_kind::renew:
    decide_renewal(slot);
    return;
  case op_kind::unlock:
    decide_unlock(slot);
    return;
  case op_kind::extend:
    decide_extend(slot);
    return;
  }
}

void lock_engine::decide_unlock(std::uint32_t slot) {
  operation& op = slots_[slot];
  const bool released = judge_release(op.tally).what == verdict::kind::granted;
  ++(released ? counters_.released : counters_.notheld);
  // Its client stopped work either way: the lease's end must not lock-delay the name as a
  // holder's that vanished would (only an UNLOCK's absence says a holder may be at work).
  leases_.release(op.key, op.owner);
  if (op.hold_kind == lock_kind::multi) // some members (or all, named in another order)
    leases_.release_members(op.owner, members_of(op.key));
  // The head waiter goes now, no polling, where the lock may be free: a hand-over's head took
  // part in this very round; NOTHELD may have deleted the key on some masters all the same
  // (another lost its key, or only a minority held it): where a master said so, where one has
  // not answered yet (NOTHELD is decided once a majority cannot say yes), and for a set
  // (multi_release deletes the members it finds and answers 0 or -1 if one is missing). The
  // masters publish only for other daemons' heads: without this, the head sleeps the old
  // holder's TTL on a lock a majority may no longer hold. At most one wake per UNLOCK (issue 21).
  const bool may_be_free =
      released || op.tally.yes() > 0 || op.tally.pending() > 0 || op.hold_kind == lock_kind::multi;
  const bool wake = may_be_free && !op.handing.active;
  const std::string key = op.key;
  finish(slot, released ? format_ok() : format_notheld());
  if (wake)
    lock_released(key, now_());
}

void lock_engine::decide_extend(std::uint32_t slot) {
  operation& op = slots_[slot];
  const bool reached = op.tally.state() == vote_tally::outcome::reached;
  const verdict v = judge_extend(op.tally, reached ? validity_now(op) : 0);
  if (v.what == verdict::kind::notheld) {
    ++counters_.notheld;
    finish(slot, format_notheld());
    return;
  }
  if (v.what != verdict::kind::granted) {
    ++counters_.noquorum;
    finish(slot, format_noquorum(op.tally.yes(), op.tally.needed()));
    return;
  }
  ++counters_.extended;
  health_.granting(op.ttl_ms);
  const clock_type::time_point now = now_();
  if (lease* held = leases_.find(op.key, op.owner)) {
    held->expires = op.t0 + std::chrono::milliseconds(op.ttl_ms);
    held->valid_until = now + std::chrono::milliseconds(v.validity_ms);
    held->granted = op.tally.yes_mask();
  } else if (op.hold_kind == lock_kind::multi) {
    // Some members of a set extended: the set's lease judges key loss for all of them, so it
    // ends no later than the shortest (a key judged lost must have been due to live).
    if (lease* set = leases_.find_set(op.owner, members_of(op.key)))
      set->valid_until = std::min(set->valid_until, now + std::chrono::milliseconds(v.validity_ms));
  }
  grant_reply grant;
  grant.line = format_extend_ok(v.validity_ms);
  grant.validity_at = 3; // "OK <validity>"
  grant.valid_until = now + std::chrono::milliseconds(v.validity_ms);
  finish_grant(slot, std::move(grant));
}

// ---------------------------------------------------------------------------------------------
// Deadlines: one heap, one timer

void lock_engine::add_deadline(clock_type::time_point when, std::uint32_t slot, std::uint64_t stamp,
                               timer_kind kind) {
  if (deadlines_.add({when, stamp, slot, kind}))
    io_.arm_timer(when);
}

bool lock_engine::stale(const deadline& entry) const {
  switch (entry.kind) {
  case timer_kind::round: {
    const operation& op = slots_[entry.slot];
    return op.generation != entry.stamp || !op.collecting();
  }
  case timer_kind::wait_retry: {
    const operation& op = slots_[entry.slot];
    return op.lock.retry_stamp != entry.stamp || op.phase != op_phase::waiting;
  }
  case timer_kind::wait_expiry: {
    const operation& op = slots_[entry.slot];
    return op.serial != entry.stamp || op.phase == op_phase::idle;
  }
  case timer_kind::renew:
    return keeps_.live(entry.slot, static_cast<std::uint32_t>(entry.stamp)) == nullptr;
  case timer_kind::node:
    return health_.timer_stale(entry.slot, entry.stamp);
  }
  return true;
}

void lock_engine::fire(const deadline& entry) {
  switch (entry.kind) {
  case timer_kind::round:
    // Nodes that did not answer in time count as no; their late replies will be discarded.
    for (std::size_t node = 0; node < node_count_; ++node)
      slots_[entry.slot].tally.record(node, vote::failed);
    after_vote(entry.slot);
    return;
  case timer_kind::wait_retry:
    try_acquire(entry.slot);
    return;
  case timer_kind::wait_expiry: {
    const operation& op = slots_[entry.slot];
    // An attempt in flight decides by itself when it completes.
    if (op.phase == op_phase::waiting)
      wait_ran_out(entry.slot);
    return;
  }
  case timer_kind::renew:
    renew(entry.slot);
    return;
  case timer_kind::node:
    health_.on_timer(entry.slot);
    return;
  }
}

void lock_engine::on_timer() {
  const auto next = deadlines_.run_due(
      now_(), [this](const deadline& d) { return stale(d); },
      [this](const deadline& d) { fire(d); });
  if (next)
    io_.arm_timer(*next);
}

std::optional<clock_type::time_point> lock_engine::next_deadline() {
  return deadlines_.next([this](const deadline& d) { return stale(d); });
}

} // namespace redlockd
