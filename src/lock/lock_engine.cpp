#include "redlockd/lock/lock_engine.hpp"

#include "redlockd/resp/resp.hpp"
#include "redlockd/resp/scripts.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

namespace redlockd {
namespace {

// Rounds of fencing proposals before an acquisition gives up. Each round proposes a value above
// everything seen; only daemons racing on the same fleet make a round fail.
constexpr unsigned max_fence_rounds = 4;

std::uint32_t node_bit(std::size_t node) {
  return std::uint32_t{1} << node;
}

// The nodes that voted yes, as a bit set (max_nodes fits in 32 bits).
std::uint32_t yes_mask(const vote_tally& tally, std::size_t nodes) {
  std::uint32_t mask = 0;
  for (std::size_t node = 0; node < nodes; ++node)
    if (tally.of(node) == vote::yes)
      mask |= node_bit(node);
  return mask;
}

// A waiter refused without a hint (or because nodes are down) tries again after this long.
constexpr std::uint64_t default_retry_ms = 20;

// Decimal text of a number, on the stack.
struct decimal {
  explicit decimal(std::uint64_t value) {
    const auto result = std::to_chars(text, text + sizeof text, value);
    size = static_cast<std::size_t>(result.ptr - text);
  }
  std::string_view view() const { return {text, size}; }
  char text[24];
  std::size_t size = 0;
};

// Entries are reused rather than freed, so that a busy daemon stops allocating: their strings
// keep their capacity.
template <typename T>
std::uint32_t take_slot(std::vector<T>& items, std::vector<std::uint32_t>& free) {
  if (free.empty()) {
    items.emplace_back();
    return static_cast<std::uint32_t>(items.size() - 1);
  }
  const std::uint32_t index = free.back();
  free.pop_back();
  return index;
}

std::uint32_t next_generation(std::uint32_t generation) {
  ++generation;
  return generation == 0 ? 1 : generation; // 0 marks requests nobody waits for
}

std::uint64_t ms_until(clock_type::time_point from, clock_type::time_point to) {
  if (to <= from)
    return 0;
  return static_cast<std::uint64_t>(
      std::chrono::ceil<std::chrono::milliseconds>(to - from).count());
}

} // namespace

lock_engine::lock_engine(const config& cfg, node_io& io, std::shared_ptr<spdlog::logger> log,
                         now_function now)
    : cfg_(cfg), io_(io), log_(std::move(log)), now_(std::move(now)), node_count_(cfg.nodes.size()),
      random_(std::random_device{}()), max_ttl_key_(cfg.fence_key + ":max_ttl") {}

// ---------------------------------------------------------------------------------------------
// Quarantine: every decision that protects safety uses what a majority of the masters holds

void lock_engine::on_node_connected(std::size_t node, const node_facts& facts) {
  node_health& h = health_[node];
  h.clock.reset(); // a new connection: clock samples start again
  fences_.observe(facts.fence.value_or(0));
  if (facts.max_ttl_ms > max_ttl_granted_)
    max_ttl_granted_ = facts.max_ttl_ms;
  if (!started_) {
    h.pending_run_id.assign(facts.run_id);
    h.pending = facts;
    h.pending->run_id = h.pending_run_id;
    try_start();
    return;
  }
  judge(node, facts);
}

void lock_engine::try_start() {
  // The fleet's fence and longest TTL are known once a majority of masters that kept their data
  // answered: any later read of fewer, or of masters that lost data, could miss a value.
  std::size_t connected = 0;
  std::size_t intact = 0;
  for (std::size_t node = 0; node < node_count_; ++node) {
    const node_health& h = health_[node];
    if (!h.pending)
      continue;
    ++connected;
    const bool lost_fence = !h.pending->fence && fences_.high_water() > 0;
    if (!lost_fence && h.pending->uptime_ms >= max_ttl_granted_)
      ++intact;
  }
  if (intact < quorum(node_count_) && connected < node_count_)
    return;
  if (intact < quorum(node_count_))
    log_->error("fewer than a majority of masters are known to have kept their data (restarted "
                "within the longest TTL, or without a fence counter): every master was read, "
                "starting anyway; if they did lose it, fences may go back");
  started_ = true;
  for (std::size_t node = 0; node < node_count_; ++node) {
    node_health& h = health_[node];
    if (!h.pending)
      continue;
    const node_facts facts = *h.pending;
    judge(node, facts);
    h.pending.reset();
  }
}

void lock_engine::judge(std::size_t node, const node_facts& facts) {
  node_health& h = health_[node];
  const clock_type::time_point now = now_();
  // The uptime only says something at first contact; later a new run_id does.
  const bool first_contact = h.run_id.empty();
  const bool new_run = !first_contact && h.run_id != facts.run_id;
  h.run_id.assign(facts.run_id);
  if (new_run || (first_contact && facts.uptime_ms < max_ttl_granted_)) {
    if (new_run) {
      ++counters_.restarts;
      log_->warn("node {} restarted (new run_id, up {} ms)", cfg_.nodes[node].to_string(),
                 facts.uptime_ms);
    }
    quarantine(node, quarantine_reason::restart, now - std::chrono::milliseconds(facts.uptime_ms));
    return;
  }
  const bool judged = h.state == trust::quarantined || h.state == trust::reseeding;
  if (!judged && !facts.fence && fences_.high_water() > 0) {
    // Up longer than any lock lives, yet without the fence counter: its data went (FLUSHALL, a
    // replaced disk) at a time nobody knows: count from now.
    ++counters_.key_losses;
    log_->warn("node {} has no fence counter while the fleet has one: its data was lost",
               cfg_.nodes[node].to_string());
    quarantine(node, quarantine_reason::keyloss, now);
    return;
  }
  if (h.state == trust::unknown)
    h.state = trust::trusted;
  else if (h.state == trust::reseeding && h.read_done)
    send_seed(node); // the seed sent on the lost connection may not have landed
}

void lock_engine::quarantine(std::size_t node, quarantine_reason reason,
                             clock_type::time_point since) {
  if (cfg_.unsafe_disable_quarantine) {
    health_[node].state = trust::trusted; // the weakened daemon of the chaos suite's controls
    return;
  }
  node_health& h = health_[node];
  // Every lock it may have lost lives at most the longest TTL past the latest loss.
  const bool fresh = h.state == trust::trusted || h.state == trust::unknown;
  h.lost_since = fresh ? since : std::max(h.lost_since, since);
  h.state = trust::quarantined;
  h.reason = reason;
  // What this daemon knows now; the fleet read may make it longer, never shorter.
  const auto length = std::chrono::milliseconds(max_ttl_granted_);
  const auto drift = std::chrono::microseconds(drift_us(max_ttl_granted_, cfg_.clock_drift_factor));
  h.quarantined_until = std::max(h.quarantined_until, h.lost_since + length + drift);
  log_->warn("node {} quarantined: its votes do not count until every lock it may have lost has "
             "expired (at least {} ms; the longest TTL is read from a majority of the others)",
             cfg_.nodes[node].to_string(), ms_until(now_(), h.quarantined_until));
  start_fleet_read(node);
}

void lock_engine::start_fleet_read(std::size_t node) {
  node_health& h = health_[node];
  h.read_generation = next_generation(h.read_generation);
  h.read_done = false;
  h.read_sent = h.read_answers = h.read_trusted_answers = 0;
  h.read_fence = h.read_max_ttl = 0;
  scratch_.clear();
  append_command(scratch_, {"MGET", cfg_.fence_key, max_ttl_key_});
  for (std::size_t other = 0; other < node_count_; ++other) {
    if (other == node || !io_.usable(other))
      continue;
    ++h.read_sent;
    io_.send(
        other,
        request_tag{request_kind::fleet_read, static_cast<std::uint32_t>(node), h.read_generation},
        scratch_);
  }
  // Asked again if a majority has not answered by then (masters down, links reconnecting).
  add_deadline(now_() +
                   std::chrono::milliseconds(std::max<std::uint32_t>(cfg_.node_timeout_ms, 1) * 20),
               static_cast<std::uint32_t>(node), h.read_generation, timer_kind::node);
}

void lock_engine::fleet_read_reply(std::size_t answering, const request_tag& tag,
                                   const redisReply* reply) {
  node_health& h = health_[tag.op];
  if (h.read_done || h.read_generation != tag.generation)
    return;
  ++h.read_answers;
  std::uint64_t fence = 0;
  std::uint64_t max_ttl = 0;
  if (reply != nullptr && array_size(*reply) == 2) {
    const std::string_view fence_text = as_string(array_at(*reply, 0));
    const std::string_view ttl_text = as_string(array_at(*reply, 1));
    if (parse_counter(fence_text.data(), fence_text.size(), fence) &&
        parse_counter(ttl_text.data(), ttl_text.size(), max_ttl)) {
      h.read_fence = std::max(h.read_fence, fence);
      h.read_max_ttl = std::max(h.read_max_ttl, max_ttl);
      if (trusted(answering))
        ++h.read_trusted_answers;
    }
  }
  std::size_t trusted_nodes = 0;
  for (std::size_t other = 0; other < node_count_; ++other)
    if (other != tag.op && trusted(other))
      ++trusted_nodes;
  const bool majority = h.read_trusted_answers >= quorum(node_count_);
  // When fewer than a majority kept their data there is no better answer to wait for.
  const bool best_effort = trusted_nodes < quorum(node_count_) && h.read_answers == h.read_sent;
  if (majority || best_effort)
    fleet_read_done(tag.op);
}

void lock_engine::fleet_read_done(std::size_t node) {
  node_health& h = health_[node];
  h.read_done = true;
  fences_.observe(h.read_fence);
  if (h.read_max_ttl > max_ttl_granted_)
    max_ttl_granted_ = h.read_max_ttl;
  if (h.state == trust::quarantined) {
    const auto drift =
        std::chrono::microseconds(drift_us(max_ttl_granted_, cfg_.clock_drift_factor));
    h.quarantined_until = std::max(
        h.quarantined_until, h.lost_since + std::chrono::milliseconds(max_ttl_granted_) + drift);
    if (now_() < h.quarantined_until) {
      add_deadline(h.quarantined_until, static_cast<std::uint32_t>(node), h.read_generation,
                   timer_kind::node);
      return;
    }
    h.state = trust::reseeding;
  }
  if (h.state == trust::reseeding)
    send_seed(node);
}

void lock_engine::send_seed(std::size_t node) {
  // By source: a seed must not be lost to NOSCRIPT. It lands before any vote on the connection.
  node_health& h = health_[node];
  scratch_.clear();
  append_command(scratch_,
                 {"EVAL", script_source(script::seed), "2", cfg_.fence_key, max_ttl_key_,
                  decimal(fences_.high_water()).view(), decimal(max_ttl_granted_).view()});
  io_.send(node,
           request_tag{request_kind::seed, static_cast<std::uint32_t>(node), h.read_generation},
           scratch_);
  h.seed_in_flight = true;
}

void lock_engine::seed_reply(std::size_t node, const request_tag& tag, const redisReply* reply) {
  node_health& h = health_[node];
  if (tag.op != node || h.read_generation != tag.generation || h.state != trust::reseeding)
    return;
  h.seed_in_flight = false;
  if (reply == nullptr || is_error(*reply)) {
    log_->warn("node {}: re-seeding failed{}{}; trying again", cfg_.nodes[node].to_string(),
               reply ? ": " : "", reply ? as_string(*reply) : "");
    add_deadline(
        now_() + std::chrono::milliseconds(std::max<std::uint32_t>(cfg_.node_timeout_ms, 1) * 20),
        static_cast<std::uint32_t>(node), h.read_generation, timer_kind::node);
    return;
  }
  h.state = trust::trusted;
  h.reason = quarantine_reason::none;
  log_->info("node {} out of quarantine (re-seeded: fence {}, longest TTL {} ms)",
             cfg_.nodes[node].to_string(), fences_.high_water(), max_ttl_granted_);
}

void lock_engine::node_timer(std::size_t node) {
  node_health& h = health_[node];
  if (!h.read_done) {
    start_fleet_read(node); // no majority answered in time: ask again
    return;
  }
  if (h.state == trust::quarantined && now_() >= h.quarantined_until) {
    h.state = trust::reseeding;
    send_seed(node);
  } else if (h.state == trust::reseeding && !h.seed_in_flight) {
    send_seed(node); // the last one was refused
  }
}

bool lock_engine::trusted(std::size_t node) const {
  return health_[node].state == trust::trusted;
}

bool lock_engine::eligible(std::size_t node) const {
  return io_.usable(node) && started_ && trusted(node);
}

std::int64_t lock_engine::clock_jump_bound_us() const {
  // A forward jump shortens every lock on that master by the jump; the drift allowance of the
  // shortest TTL granted is what such a lock can lose, so that is the bound (clock_jump_ms caps
  // it).
  const std::int64_t configured = static_cast<std::int64_t>(cfg_.clock_jump_ms) * 1000;
  if (min_ttl_granted_ == 0)
    return configured;
  return std::min(configured, drift_us(min_ttl_granted_, cfg_.clock_drift_factor));
}

bool lock_engine::on_node_time(std::size_t node, std::uint64_t seconds, std::uint64_t micros,
                               std::optional<clock_type::time_point> sent_at) {
  node_health& h = health_[node];
  const auto node_us = static_cast<std::int64_t>(seconds * 1'000'000 + micros);
  const clock_type::time_point received = now_();
  const clock_type::time_point sent = std::min(sent_at.value_or(received), received);
  const auto previous = h.clock;
  h.clock = node_health::time_sample{node_us, sent, received};
  if (!previous)
    return true;
  const auto us = [](clock_type::duration d) {
    return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  };
  // Each TIME was read between its request's send and its reply's handling, so between the two
  // samples at most (received - previous sent) and at least (sent - previous received) passed.
  const std::int64_t node_delta = node_us - previous->node_us;
  const std::int64_t skew = node_delta - us(received - previous->sent);
  const std::int64_t behind = us(sent - previous->received) - node_delta;
  const std::int64_t bound = clock_jump_bound_us();
  if (skew > bound) {
    // Its keys now expire early by up to the jump: locks granted there may already be gone.
    ++counters_.clock_jumps;
    log_->warn("node {}: clock jumped {} ms forward", cfg_.nodes[node].to_string(), skew / 1000);
    quarantine(node, quarantine_reason::clock, received);
    return false;
  }
  if (behind > static_cast<std::int64_t>(cfg_.clock_jump_ms) * 1000) {
    ++counters_.clock_jumps_backward;
    log_->warn("node {}: clock jumped {} ms backward (its locks last longer than granted)",
               cfg_.nodes[node].to_string(), behind / 1000);
  }
  return true;
}

lock_engine::node_status lock_engine::status_of(std::size_t node) {
  const node_health& h = health_[node];
  if (h.state != trust::quarantined && h.state != trust::reseeding)
    return {};
  return {h.reason, static_cast<std::int64_t>(ms_until(now_(), h.quarantined_until))};
}

void lock_engine::raise_max_ttl(std::uint64_t ttl_ms) {
  // The masters record it themselves with every grant and extension (the scripts).
  max_ttl_granted_ = std::max(max_ttl_granted_, ttl_ms);
  min_ttl_granted_ = min_ttl_granted_ == 0 ? ttl_ms : std::min(min_ttl_granted_, ttl_ms);
}

// ---------------------------------------------------------------------------------------------
// Operations and rounds

std::uint32_t lock_engine::allocate(op_kind kind, std::shared_ptr<reply_sink> sink,
                                    std::uint64_t seq) {
  const std::uint32_t slot = take_slot(slots_, free_slots_);
  operation& op = slots_[slot];
  op.serial = next_serial_++;
  op.kind = kind;
  op.phase = op_phase::waiting;
  op.sink = std::move(sink);
  op.seq = seq;
  op.fence_rounds = 0;
  op.retry_ms = 0;
  op.queued = false;
  op.keep = false;
  op.keep_started = false;
  op.drain = false;
  op.granted = 0;
  op.expect_held = 0;
  op.missing = 0;
  op.t0 = now_();
  op.requested_at = op.t0;
  return slot;
}

void lock_engine::release_keep_count(const operation& op) {
  if (!op.keep)
    return;
  const auto it = keeps_per_client_.find(op.sink.get());
  if (it != keeps_per_client_.end() && --it->second == 0)
    keeps_per_client_.erase(it);
}

std::shared_ptr<reply_sink> lock_engine::retire(std::uint32_t slot) {
  operation& op = slots_[slot];
  // A KEEP acquisition that did not become a KEEP lock gives its place back.
  if (op.kind == op_kind::lock && op.keep && !op.keep_started)
    release_keep_count(op);
  std::shared_ptr<reply_sink> sink = std::move(op.sink);
  if (op.kind == op_kind::lock && sink)
    acquire_latency_.record(now_() - op.requested_at);
  if (op.drain && op.phase == op_phase::voting && op.tally.pending() > 0) {
    // Answered at quorum; the slot stays until the other nodes have answered or timed out: the
    // lease learns every node that granted it, and a node that lost the key is noticed.
    op.phase = op_phase::draining;
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

bool grant_reply::refresh(clock_type::time_point now, clock_type::time_point until) {
  if (until <= now)
    return false;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
  if (left < 1)
    return false;
  line.resize(validity_at); // in place: no allocation on the common path
  line.append(decimal(static_cast<std::uint64_t>(left)).view()).push_back('\n');
  return true;
}

std::string grant_reply::expired_line() const {
  return needed == 0 ? format_notheld() : format_noquorum(0, needed);
}

std::optional<clock_type::time_point> lock_engine::valid_until(const grant_reply& grant) const {
  if (grant.keep_generation == 0)
    return grant.valid_until;
  if (grant.keep_index >= keeps_.size())
    return std::nullopt;
  const keep_lock& k = keeps_[grant.keep_index];
  if (!k.active || k.generation != grant.keep_generation)
    return std::nullopt;
  return k.valid_until;
}

void lock_engine::grant_expired(const grant_reply& grant) {
  // The client never saw this KEEP lock: release it without a LOST.
  if (grant.keep_generation == 0 || grant.keep_index >= keeps_.size())
    return;
  keep_lock& k = keeps_[grant.keep_index];
  if (!k.active || k.generation != grant.keep_generation)
    return;
  release_everywhere(k.key, k.owner, now_() + std::chrono::milliseconds(k.ttl_ms));
  const std::string key = k.key;
  drop_keep(grant.keep_index);
  wake_head(key, now_());
}

void lock_engine::free_slot(std::uint32_t slot) {
  operation& op = slots_[slot];
  op.phase = op_phase::idle;
  op.generation = next_generation(op.generation);
  free_slots_.push_back(slot);
}

void lock_engine::add_deadline(clock_type::time_point when, std::uint32_t slot, std::uint64_t stamp,
                               timer_kind kind) {
  deadlines_.push({when, stamp, slot, kind});
  if (!armed_ || when < *armed_) {
    armed_ = when;
    io_.arm_timer(when);
  }
}

void lock_engine::begin_round(std::uint32_t slot, op_phase phase, request_kind kind) {
  operation& op = slots_[slot];
  op.phase = phase;
  op.generation = next_generation(op.generation);
  op.tally.reset(node_count_);
  const auto timeout = op.ttl_ms == 0 ? std::chrono::milliseconds(cfg_.node_timeout_ms)
                                      : node_timeout_for(op.ttl_ms, cfg_.node_timeout_ms);
  add_deadline(now_() + timeout, slot, op.generation, timer_kind::round);
  send_round(slot, kind);
  decide(slot);
}

void lock_engine::send_round(std::uint32_t slot, request_kind kind) {
  // The command is the same for every node: formatted once, written to each.
  bool formatted = false;
  for (std::size_t node = 0; node < node_count_; ++node) {
    if (eligible(node)) {
      if (!formatted)
        format_command(slot, kind, true);
      formatted = true;
      io_.send(node, request_tag{kind, slot, slots_[slot].generation}, command_);
      continue;
    }
    slots_[slot].tally.record(node, vote::failed);
    if (kind == request_kind::release) {
      // A quarantined or unreachable node does not vote, but it must not keep the key either.
      const std::uint32_t entry = new_cleanup(slots_[slot].key, slots_[slot].owner,
                                              now_() + std::chrono::milliseconds(max_ttl_granted_));
      if (io_.usable(node)) {
        format_cleanup(entry, true);
        send_cleanup(node, entry);
      } else {
        owe_cleanup(node, entry);
      }
      if (cleanups_[entry].refs == 0)
        free_cleanups_.push_back(entry);
    }
  }
}

void lock_engine::format_command(std::uint32_t slot, request_kind kind, bool by_sha) {
  const operation& op = slots_[slot];
  // EVALSHA normally; EVAL with the source after a node answered NOSCRIPT.
  auto head = [by_sha](script s) {
    return by_sha ? std::pair{std::string_view("EVALSHA"), script_sha(s)}
                  : std::pair{std::string_view("EVAL"), script_source(s)};
  };
  command_.clear();
  const std::string_view owner = view(op.owner);
  switch (kind) {
  case request_kind::acquire: {
    const auto [verb, body] = head(script::acquire);
    append_command(command_, {verb, body, "3", op.key, cfg_.fence_key, max_ttl_key_, owner,
                              decimal(op.ttl_ms).view(), decimal(op.fence.proposed()).view()});
    break;
  }
  case request_kind::release: {
    const auto [verb, body] = head(script::release);
    append_command(command_, {verb, body, "1", op.key, owner});
    break;
  }
  case request_kind::extend: {
    const auto [verb, body] = head(script::extend);
    append_command(command_,
                   {verb, body, "2", op.key, max_ttl_key_, owner, decimal(op.ttl_ms).view()});
    break;
  }
  case request_kind::fence_bump: {
    const auto [verb, body] = head(script::fence_bump);
    append_command(command_,
                   {verb, body, "1", cfg_.fence_key, decimal(op.fence.proposed()).view()});
    break;
  }
  default:
    break;
  }
}

std::uint32_t lock_engine::new_cleanup(std::string_view key, const owner_id& owner,
                                       clock_type::time_point expires) {
  const std::uint32_t entry = take_slot(cleanups_, free_cleanups_);
  cleanup_entry& c = cleanups_[entry];
  c.key.assign(key);
  c.owner = owner;
  c.expires = expires;
  c.refs = 0;
  return entry;
}

void lock_engine::release_everywhere(std::string_view key, const owner_id& owner,
                                     clock_type::time_point expires) {
  const std::uint32_t entry = new_cleanup(key, owner, expires);
  format_cleanup(entry, true); // the same bytes for every node
  for (std::size_t node = 0; node < node_count_; ++node) {
    if (io_.usable(node))
      send_cleanup(node, entry);
    else
      owe_cleanup(node, entry);
  }
  if (cleanups_[entry].refs == 0)
    free_cleanups_.push_back(entry);
}

void lock_engine::format_cleanup(std::uint32_t entry, bool by_sha) {
  const cleanup_entry& c = cleanups_[entry];
  scratch_.clear();
  if (by_sha)
    append_command(scratch_, {"EVALSHA", script_sha(script::release), "1", c.key, view(c.owner)});
  else
    append_command(scratch_, {"EVAL", script_source(script::release), "1", c.key, view(c.owner)});
}

void lock_engine::send_cleanup(std::size_t node, std::uint32_t entry) {
  // scratch_ holds the entry's release. Its reply only matters if it is NOSCRIPT or never
  // comes: then the release is sent again.
  ++cleanups_[entry].refs;
  io_.send(node, request_tag{request_kind::cleanup, entry, 1}, scratch_);
}

void lock_engine::owe_cleanup(std::size_t node, std::uint32_t entry) {
  // Bounded: past this many, the oldest are left to expire by their TTL.
  constexpr std::size_t max_owed = 65536;
  auto& owed = owed_[node];
  if (owed.size() >= max_owed) {
    drop_cleanup_ref(owed.front());
    owed.erase(owed.begin());
  }
  ++cleanups_[entry].refs;
  owed.push_back(entry);
}

void lock_engine::drop_cleanup_ref(std::uint32_t entry) {
  if (--cleanups_[entry].refs == 0)
    free_cleanups_.push_back(entry);
}

void lock_engine::cleanup_reply(std::size_t node, const request_tag& tag, const redisReply* reply) {
  if (tag.op >= cleanups_.size() || cleanups_[tag.op].refs == 0)
    return;
  if (reply == nullptr) {
    owe_cleanup(node, tag.op); // the connection was lost: send it when the node is back
  } else if (is_error(*reply) && as_string(*reply).starts_with("NOSCRIPT")) {
    io_.reload_scripts(node);
    format_cleanup(tag.op, false);
    send_cleanup(node, tag.op);
  }
  drop_cleanup_ref(tag.op);
}

void lock_engine::on_node_ready(std::size_t node) {
  auto owed = std::move(owed_[node]);
  owed_[node].clear();
  const clock_type::time_point now = now_();
  for (const std::uint32_t entry : owed) {
    if (now < cleanups_[entry].expires && io_.usable(node)) {
      format_cleanup(entry, true);
      send_cleanup(node, entry);
    }
    drop_cleanup_ref(entry);
  }
}

std::int64_t lock_engine::validity_now(const operation& op) const {
  const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(now_() - op.t0);
  return validity_ms(op.ttl_ms, elapsed, cfg_.clock_drift_factor);
}

// ---------------------------------------------------------------------------------------------
// Client requests

void lock_engine::lock(const lock_request& req, std::shared_ptr<reply_sink> sink,
                       std::uint64_t seq) {
  const std::uint32_t slot = allocate(op_kind::lock, std::move(sink), seq);
  operation& op = slots_[slot];
  op.key.assign(cfg_.key_prefix).append(req.resource);
  op.ttl_ms = req.ttl_ms;
  const auto queue = queues_.find(op.key);
  if (req.keep) {
    auto& held = keeps_per_client_[op.sink.get()];
    if (held >= cfg_.max_keep_locks_per_connection) {
      finish(slot, format_error(error_code::too_many,
                                "this connection holds max_keep_locks_per_connection KEEP locks"));
      return;
    }
    // Counted from the request on, so a burst cannot overshoot. op.keep says the count was
    // raised: finish() gives it back once if the acquisition does not become a KEEP lock.
    ++held;
    op.keep = true;
  }
  if (req.wait_ms) {
    const std::size_t queued_here = queue == queues_.end() ? 0 : queue->second.size();
    if (waiter_count_ >= cfg_.max_waiters || queued_here >= cfg_.max_waiters_per_resource) {
      finish(slot, format_error(error_code::too_many, "too many waiters"));
      return;
    }
    op.queued = true;
    op.wait_until = op.t0 + std::chrono::milliseconds(*req.wait_ms);
    op.last_failure = format_busy(0);
    auto& waiting = queue == queues_.end() ? queues_[op.key] : queue->second;
    waiting.emplace_back(slot, op.serial);
    ++waiter_count_;
    add_deadline(op.wait_until, slot, op.serial, timer_kind::wait_expiry);
    if (waiting.size() == 1)
      try_acquire(slot);
    return;
  }
  if (queue != queues_.end() && !queue->second.empty()) {
    // Waiters are served first come, first served: a try-lock does not jump the queue.
    ++counters_.busy;
    finish(slot, format_busy(0));
    return;
  }
  try_acquire(slot);
}

void lock_engine::unlock(const unlock_request& req, std::shared_ptr<reply_sink> sink,
                         std::uint64_t seq) {
  const std::uint32_t slot = allocate(op_kind::unlock, std::move(sink), seq);
  operation& op = slots_[slot];
  op.key.assign(cfg_.key_prefix).append(req.resource);
  std::copy_n(req.owner.begin(), op.owner.size(), op.owner.begin());
  op.ttl_ms = 0;
  expect_lease(op);
  // An explicit UNLOCK of a KEEP lock ends its renewals whatever the nodes answer.
  if (const auto keep = keep_by_key_.find(op.key);
      keep != keep_by_key_.end() && keeps_[keep->second].owner == op.owner)
    drop_keep(keep->second);
  begin_round(slot, op_phase::voting, request_kind::release);
}

void lock_engine::extend(const extend_request& req, std::shared_ptr<reply_sink> sink,
                         std::uint64_t seq) {
  const std::uint32_t slot = allocate(op_kind::extend, std::move(sink), seq);
  operation& op = slots_[slot];
  op.key.assign(cfg_.key_prefix).append(req.resource);
  std::copy_n(req.owner.begin(), op.owner.size(), op.owner.begin());
  op.ttl_ms = req.ttl_ms;
  raise_max_ttl(op.ttl_ms);
  expect_lease(op);
  begin_round(slot, op_phase::voting, request_kind::extend);
}

void lock_engine::client_gone(const reply_sink* client) {
  for (std::uint32_t index = 0; index < keeps_.size(); ++index) {
    keep_lock& k = keeps_[index];
    if (!k.active || k.sink.get() != client)
      continue;
    const std::string key = k.key;
    release_everywhere(key, k.owner, now_() + std::chrono::milliseconds(k.ttl_ms));
    drop_keep(index);
    delay(key);
    wake_head(key, delayed_until(key).value_or(now_()));
  }
  for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
    operation& op = slots_[slot];
    if (op.phase == op_phase::idle || op.sink.get() != client)
      continue;
    op.sink.reset(); // an acquisition in flight is released when it completes
    if (op.kind != op_kind::lock)
      continue;
    // The next waiter must not sleep until its own deadline because the head left.
    if (op.queued)
      dequeue(slot, now_());
    if (op.phase == op_phase::waiting)
      finish(slot, {});
  }
  // Acquisitions in flight lost their sink above; the client's count goes with it, so that a new
  // session at the same address starts from zero.
  keeps_per_client_.erase(client);
}

void lock_engine::shutdown() {
  for (std::uint32_t index = 0; index < keeps_.size(); ++index) {
    keep_lock& k = keeps_[index];
    if (!k.active)
      continue;
    if (k.sink)
      k.sink->push(
          format_lost(std::string_view(k.key).substr(cfg_.key_prefix.size()), view(k.owner)),
          k.seq);
    ++counters_.lost;
    release_everywhere(k.key, k.owner, now_() + std::chrono::milliseconds(k.ttl_ms));
    drop_keep(index);
  }
  for (std::uint32_t slot = 0; slot < slots_.size(); ++slot) {
    operation& op = slots_[slot];
    if (op.kind != op_kind::lock || !op.queued)
      continue;
    dequeue(slot);
    if (op.phase == op_phase::waiting)
      finish(slot, format_error(error_code::shutting_down, "the daemon is stopping"));
    // An attempt in flight is answered when it completes; it no longer waits after that.
  }
}

// ---------------------------------------------------------------------------------------------
// Replies and deadlines

void lock_engine::on_reply(std::size_t node, const request_tag& tag, const redisReply& reply) {
  switch (tag.kind) {
  case request_kind::cleanup:
    cleanup_reply(node, tag, &reply);
    return;
  case request_kind::fleet_read:
    if (tag.op < node_count_)
      fleet_read_reply(node, tag, is_error(reply) ? nullptr : &reply);
    return;
  case request_kind::seed:
    seed_reply(node, tag, &reply);
    return;
  default:
    break;
  }
  if (tag.generation == 0 || tag.op >= slots_.size())
    return;
  operation& op = slots_[tag.op];
  if (op.generation != tag.generation ||
      (op.phase != op_phase::voting && op.phase != op_phase::fencing &&
       op.phase != op_phase::draining) ||
      op.tally.of(node) != vote::pending)
    return; // a late reply of an earlier round: its slot was kept, the answer is discarded
  if (op.phase == op_phase::draining) {
    drain_reply(tag.op, node, reply);
    return;
  }

  if (is_error(reply)) {
    const std::string_view text = as_string(reply);
    if (text.starts_with("NOSCRIPT")) {
      // The node lost its scripts (restart, SCRIPT FLUSH): run this one by source, reload the rest.
      io_.reload_scripts(node);
      format_command(tag.op, tag.kind, false);
      io_.send(node, tag, command_);
      return;
    }
    log_->warn("node {} answered an error: {}", cfg_.nodes[node].to_string(), text);
    op.tally.record(node, vote::failed);
    after_vote(tag.op);
    return;
  }

  vote v = vote::failed;
  if (!trusted(node)) {
    // Quarantined after the request was sent: its vote no longer counts.
    op.tally.record(node, v);
    after_vote(tag.op);
    return;
  }
  switch (tag.kind) {
  case request_kind::acquire:
    if (array_size(reply) == 4 && !clock_ok(node, array_at(reply, 2), array_at(reply, 3), op.t0)) {
      v = vote::failed; // the node's clock jumped: its grant cannot be trusted
    } else if (array_size(reply) == 4) {
      const redisReply& granted = array_at(reply, 0);
      const redisReply& detail = array_at(reply, 1);
      if (as_integer(granted) == 1) {
        const std::string_view text = as_string(detail);
        std::uint64_t previous = 0;
        if (parse_counter(text.data(), text.size(), previous)) {
          fences_.observe(previous);
          op.fence.accept(previous);
          // A grant that comes too late to leave any validity is no grant.
          v = validity_now(op) > 0 ? vote::yes : vote::failed;
        } else {
          log_->error("node {}: fence key '{}' holds a non-numeric value",
                      cfg_.nodes[node].to_string(), cfg_.fence_key);
        }
      } else if (as_integer(granted) == 0) {
        const auto remaining = as_integer(detail).value_or(0);
        if (remaining > 0) {
          const auto ms = static_cast<std::uint64_t>(remaining);
          op.retry_ms = op.retry_ms == 0 ? ms : std::min(op.retry_ms, ms);
        }
        v = vote::no;
      }
    }
    break;
  case request_kind::fence_bump: {
    const std::string_view text = as_string(reply);
    std::uint64_t previous = 0;
    if (parse_counter(text.data(), text.size(), previous)) {
      fences_.observe(previous);
      v = op.fence.accept(previous) ? vote::yes : vote::no;
    }
    break;
  }
  case request_kind::release:
    if (const auto n = as_integer(reply)) {
      v = *n == 1 ? vote::yes : vote::no;
      if (*n == -1)
        op.missing |= node_bit(node);
    }
    break;
  case request_kind::extend:
    if (array_size(reply) == 3 && !clock_ok(node, array_at(reply, 1), array_at(reply, 2), op.t0)) {
      v = vote::failed;
    } else if (const auto n = array_size(reply) == 3 ? as_integer(array_at(reply, 0))
                                                     : std::optional<std::int64_t>{}) {
      v = *n != 1 ? vote::no : validity_now(op) > 0 ? vote::yes : vote::failed;
      if (*n == -1)
        op.missing |= node_bit(node); // judged against the nodes that granted the lock
    }
    break;
  default:
    break;
  }
  op.tally.record(node, v);
  after_vote(tag.op);
}

void lock_engine::drain_reply(std::uint32_t slot, std::size_t node, const redisReply& reply) {
  // The client has its answer: only what the lease and key-loss detection need is read here.
  operation& op = slots_[slot];
  std::optional<std::int64_t> result;
  if (!is_error(reply)) {
    if (op.kind == op_kind::unlock)
      result = as_integer(reply);
    else if (array_size(reply) >= 3)
      result = as_integer(array_at(reply, 0)); // acquire and extend: {result, ..., TIME}
  }
  const bool yes = result == 1;
  if (result == -1)
    op.missing |= node_bit(node);
  if (yes && op.kind == op_kind::lock)
    op.granted |= node_bit(node);
  op.tally.record(node, yes ? vote::yes : result ? vote::no : vote::failed);
  after_vote(slot);
}

void lock_engine::after_vote(std::uint32_t slot) {
  operation& op = slots_[slot];
  if (op.missing != 0)
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
    if (const auto held = leases_.find(op.key);
        held != leases_.end() && held->second.owner == op.owner)
      held->second.granted = op.granted;
    if (const auto keep = keep_by_key_.find(op.key);
        keep != keep_by_key_.end() && keeps_[keep->second].owner == op.owner)
      keeps_[keep->second].granted = op.granted;
  }
  free_slot(slot);
}

void lock_engine::expect_lease(operation& op) {
  // Only the nodes that granted the lock (or its last renewal) can have lost its key.
  if (const auto held = leases_.find(op.key);
      held != leases_.end() && held->second.owner == op.owner) {
    op.expect_held = held->second.granted;
    op.expect_until = held->second.valid_until;
  } else if (const auto keep = keep_by_key_.find(op.key);
             keep != keep_by_key_.end() && keeps_[keep->second].owner == op.owner) {
    op.expect_held = keeps_[keep->second].granted;
    op.expect_until = keeps_[keep->second].valid_until;
  } else {
    return;
  }
  op.drain = op.expect_held != 0;
}

void lock_engine::judge_key_loss(operation& op) {
  // A node that granted this lease says the key is gone while the lease is still valid, and
  // another node still holds it for the same owner (so it was not released elsewhere): the node
  // lost a live key without restarting (eviction, FLUSHALL, a clock jump).
  const std::uint32_t lost = op.missing & op.expect_held;
  if (lost == 0 || op.tally.yes() == 0 || now_() >= op.expect_until)
    return;
  op.missing &= ~lost;
  for (std::size_t node = 0; node < node_count_; ++node) {
    if ((lost & node_bit(node)) == 0)
      continue;
    ++counters_.key_losses;
    log_->warn("node {} lost the key of a valid lock on '{}'", cfg_.nodes[node].to_string(),
               op.key);
    quarantine(node, quarantine_reason::keyloss, now_());
  }
}

bool lock_engine::clock_ok(std::size_t node, const redisReply& seconds, const redisReply& micros,
                           clock_type::time_point sent_at) {
  std::uint64_t s = 0;
  std::uint64_t us = 0;
  const std::string_view s_text = as_string(seconds);
  const std::string_view us_text = as_string(micros);
  if (!parse_counter(s_text.data(), s_text.size(), s) ||
      !parse_counter(us_text.data(), us_text.size(), us))
    return true; // no usable sample: judged by the next one
  return on_node_time(node, s, us, sent_at);
}

void lock_engine::on_failure(std::size_t node, const request_tag& tag) {
  switch (tag.kind) {
  case request_kind::cleanup:
    cleanup_reply(node, tag, nullptr);
    return;
  case request_kind::fleet_read:
    if (tag.op < node_count_)
      fleet_read_reply(node, tag, nullptr);
    return;
  case request_kind::seed:
    if (tag.op < node_count_)
      health_[tag.op].seed_in_flight = false; // sent again when the node reconnects (judge)
    return;
  default:
    break;
  }
  if (tag.generation == 0 || tag.op >= slots_.size())
    return;
  operation& op = slots_[tag.op];
  if (op.generation != tag.generation ||
      (op.phase != op_phase::voting && op.phase != op_phase::fencing &&
       op.phase != op_phase::draining))
    return;
  if (op.tally.record(node, vote::failed))
    after_vote(tag.op);
}

bool lock_engine::expired(const deadline_entry& entry) const {
  switch (entry.kind) {
  case timer_kind::round: {
    const operation& op = slots_[entry.slot];
    return op.generation != entry.stamp ||
           (op.phase != op_phase::voting && op.phase != op_phase::fencing &&
            op.phase != op_phase::draining);
  }
  case timer_kind::wait_retry:
  case timer_kind::wait_expiry: {
    const operation& op = slots_[entry.slot];
    return op.serial != entry.stamp || op.phase == op_phase::idle;
  }
  case timer_kind::renew:
    return !keeps_[entry.slot].active || keeps_[entry.slot].generation != entry.stamp;
  case timer_kind::node:
    return health_[entry.slot].read_generation != entry.stamp;
  }
  return true;
}

void lock_engine::fire(const deadline_entry& entry) {
  switch (entry.kind) {
  case timer_kind::round: {
    // Nodes that did not answer in time count as no; their late replies will be discarded.
    operation& op = slots_[entry.slot];
    for (std::size_t node = 0; node < node_count_; ++node)
      op.tally.record(node, vote::failed);
    after_vote(entry.slot);
    return;
  }
  case timer_kind::wait_retry:
    if (slots_[entry.slot].phase == op_phase::waiting)
      try_acquire(entry.slot);
    return;
  case timer_kind::wait_expiry: {
    operation& op = slots_[entry.slot];
    // An attempt in flight decides by itself when it completes.
    if (op.phase != op_phase::waiting)
      return;
    dequeue(entry.slot, now_());
    if (op.last_failure.starts_with("BUSY"))
      ++counters_.busy;
    else
      ++counters_.noquorum;
    finish(entry.slot, std::move(op.last_failure));
    return;
  }
  case timer_kind::renew:
    renew(entry.slot);
    return;
  case timer_kind::node:
    node_timer(entry.slot);
    return;
  }
}

void lock_engine::on_timer() {
  armed_.reset();
  const clock_type::time_point now = now_();
  while (!deadlines_.empty() && deadlines_.top().when <= now) {
    const deadline_entry entry = deadlines_.top();
    deadlines_.pop();
    if (!expired(entry))
      fire(entry);
  }
  if (const auto next = next_deadline()) {
    armed_ = *next;
    io_.arm_timer(*next);
  }
}

std::optional<clock_type::time_point> lock_engine::next_deadline() {
  // Drop deadlines that no longer apply so that they do not wake the loop.
  while (!deadlines_.empty()) {
    if (!expired(deadlines_.top()))
      return deadlines_.top().when;
    deadlines_.pop();
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Decisions

void lock_engine::decide(std::uint32_t slot) {
  operation& op = slots_[slot];
  if (op.phase != op_phase::voting && op.phase != op_phase::fencing)
    return;
  const auto state = op.tally.state();
  if (state == vote_tally::outcome::pending)
    return;
  const bool reached = state == vote_tally::outcome::reached;
  switch (op.kind) {
  case op_kind::lock:
    if (op.phase == op_phase::voting)
      decide_lock(slot);
    else
      decide_fencing(slot);
    return;
  case op_kind::renew:
    decide_renewal(slot);
    return;
  case op_kind::unlock:
    if (reached) {
      ++counters_.released;
      if (const auto held = leases_.find(op.key);
          held != leases_.end() && held->second.owner == op.owner)
        leases_.erase(held);
      const std::string key = op.key;
      finish(slot, format_ok());
      wake_head(key, now_()); // the lock is free: the head waiter goes now, no polling
    } else {
      ++counters_.notheld;
      finish(slot, format_notheld());
    }
    return;
  case op_kind::extend: {
    const std::int64_t validity = reached ? validity_now(op) : 0;
    if (validity > 0) {
      ++counters_.extended;
      if (const auto held = leases_.find(op.key);
          held != leases_.end() && held->second.owner == op.owner) {
        const clock_type::time_point now = now_();
        held->second.expires = op.t0 + std::chrono::milliseconds(op.ttl_ms);
        held->second.valid_until = now + std::chrono::milliseconds(validity);
        held->second.granted = yes_mask(op.tally, node_count_);
      }
      grant_reply grant;
      grant.line = format_extend_ok(validity);
      grant.validity_at = 3; // "OK <validity>"
      grant.valid_until = now_() + std::chrono::milliseconds(validity);

      finish_grant(slot, std::move(grant));
    } else if (op.tally.refused_by_majority()) {
      ++counters_.notheld;
      finish(slot, format_notheld());
    } else {
      ++counters_.noquorum;
      finish(slot, format_noquorum(op.tally.yes(), op.tally.needed()));
    }
    return;
  }
  }
}

void lock_engine::decide_lock(std::uint32_t slot) {
  operation& op = slots_[slot];
  if (op.tally.state() == vote_tally::outcome::reached) {
    op.granted = yes_mask(op.tally, node_count_); // a fencing round resets the tally
    if (op.fence.conflict()) {
      // A granting node had seen this token or a larger one: another daemon handed out tokens,
      // or this one restarted. Propose above everything seen, in a round of its own.
      ++counters_.fence_conflicts;
      start_fencing_round(slot);
      return;
    }
    const std::int64_t validity = validity_now(op);
    if (validity > 0) {
      lock_acquired(slot, validity);
      return;
    }
  }
  if (op.tally.refused_by_majority())
    lock_failed(slot, format_busy(op.retry_ms));
  else
    lock_failed(slot, format_noquorum(op.tally.yes(), op.tally.needed()));
}

void lock_engine::start_fencing_round(std::uint32_t slot) {
  operation& op = slots_[slot];
  if (++op.fence_rounds > max_fence_rounds) {
    log_->warn("giving up on a fencing token for '{}' after {} rounds", op.key, max_fence_rounds);
    lock_failed(slot, format_noquorum(0, op.tally.needed()));
    return;
  }
  fences_.observe(op.fence.max_previous());
  op.fence = fence_round(fences_.propose());
  begin_round(slot, op_phase::fencing, request_kind::fence_bump);
}

void lock_engine::decide_fencing(std::uint32_t slot) {
  operation& op = slots_[slot];
  if (op.tally.state() == vote_tally::outcome::reached) {
    const std::int64_t validity = validity_now(op);
    if (validity > 0) {
      lock_acquired(slot, validity);
      return;
    }
  } else if (op.fence.conflict() && validity_now(op) > 0) {
    start_fencing_round(slot);
    return;
  }
  lock_failed(slot, format_noquorum(op.tally.yes(), op.tally.needed()));
}

void lock_engine::lock_acquired(std::uint32_t slot, std::int64_t validity) {
  operation& op = slots_[slot];
  if (op.queued) {
    dequeue(slot);
    // The next waiter is woken by an UNLOCK through this daemon, or tries when this lease ends.
    wake_head(op.key, op.t0 + std::chrono::milliseconds(op.ttl_ms) + jitter(default_retry_ms));
  }
  if (!op.sink) {
    // The client left while its acquisition was in flight: nobody will use or release it.
    const std::string key = op.key;
    release_everywhere(key, op.owner, op.t0 + std::chrono::milliseconds(op.ttl_ms));
    finish(slot, {});
    wake_head(key, now_());
    return;
  }
  ++counters_.acquired;
  const clock_type::time_point now = now_();
  grant_reply grant;
  grant.line = format_lock_ok(view(op.owner), op.fence.proposed(), validity);
  grant.validity_at = grant.line.rfind(' ') + 1;
  grant.valid_until = now + std::chrono::milliseconds(validity);
  grant.needed = quorum(node_count_);
  if (op.keep) {
    grant.keep_index = start_keep(slot, validity);
    grant.keep_generation = keeps_[grant.keep_index].generation;
  } else {
    leases_[op.key] = {op.owner, op.t0 + std::chrono::milliseconds(op.ttl_ms),
                       now_() + std::chrono::milliseconds(validity), op.granted};
    sweep_delays();
  }
  op.drain = true; // grants that come after the reply belong to the lock too
  finish_grant(slot, std::move(grant));
}

void lock_engine::lock_failed(std::uint32_t slot, std::string line) {
  operation& op = slots_[slot];
  release_everywhere(op.key, op.owner, op.t0 + std::chrono::milliseconds(op.ttl_ms));
  const bool busy = line.starts_with("BUSY");
  const clock_type::time_point now = now_();
  if (op.queued && op.sink && now < op.wait_until) {
    // Wait for the holder: at the time its remaining TTL suggests, plus jitter so that daemons
    // sharing the fleet do not collide again; never in a busy loop.
    const std::uint64_t hint = busy && op.retry_ms > 0 ? op.retry_ms : default_retry_ms;
    const auto when =
        std::min(now + std::chrono::milliseconds(hint) + jitter(default_retry_ms), op.wait_until);
    op.last_failure = std::move(line);
    op.phase = op_phase::waiting;
    op.generation = next_generation(op.generation);
    if (when < op.wait_until)
      add_deadline(when, slot, op.serial, timer_kind::wait_retry);
    return;
  }
  if (op.queued) {
    const std::string key = op.key;
    dequeue(slot);
    wake_head(key,
              now + std::chrono::milliseconds(op.retry_ms > 0 ? op.retry_ms : default_retry_ms));
  }
  if (busy)
    ++counters_.busy;
  else
    ++counters_.noquorum;
  finish(slot, std::move(line));
}

// ---------------------------------------------------------------------------------------------
// WAIT: one FIFO queue per resource; only its head tries

void lock_engine::try_acquire(std::uint32_t slot) {
  operation& op = slots_[slot];
  if (const auto until = delayed_until(op.key)) {
    ++counters_.delayed;
    const std::uint64_t remaining = ms_until(now_(), *until);
    if (!op.queued) {
      ++counters_.busy;
      finish(slot, format_busy(remaining));
      return;
    }
    op.phase = op_phase::waiting;
    op.last_failure = format_busy(remaining);
    add_deadline(*until, slot, op.serial, timer_kind::wait_retry);
    return;
  }
  raise_max_ttl(op.ttl_ms);
  // Every attempt is a new acquisition: a fresh owner, a fresh start time, a fresh proposal.
  op.owner = owners_.next();
  op.t0 = now_();
  op.fence = fence_round(fences_.propose());
  op.fence_rounds = 0;
  op.retry_ms = 0;
  begin_round(slot, op_phase::voting, request_kind::acquire);
}

void lock_engine::dequeue(std::uint32_t slot, std::optional<clock_type::time_point> wake_next) {
  operation& op = slots_[slot];
  if (!op.queued)
    return;
  op.queued = false;
  --waiter_count_;
  const auto queue = queues_.find(op.key);
  if (queue == queues_.end())
    return;
  auto& waiting = queue->second;
  const auto it = std::find(waiting.begin(), waiting.end(), std::pair{slot, op.serial});
  if (it == waiting.end())
    return;
  const bool was_head = it == waiting.begin();
  waiting.erase(it);
  if (waiting.empty()) {
    queues_.erase(queue);
    return;
  }
  // Only the head tries: a new head gets its turn, or it would sleep until its own deadline.
  if (was_head && wake_next)
    wake_head(op.key, *wake_next);
}

void lock_engine::wake_head(const std::string& key, clock_type::time_point when) {
  const auto queue = queues_.find(key);
  if (queue == queues_.end() || queue->second.empty())
    return;
  const auto [slot, serial] = queue->second.front();
  if (slots_[slot].phase == op_phase::waiting)
    add_deadline(when, slot, serial, timer_kind::wait_retry);
}

std::chrono::milliseconds lock_engine::jitter(std::uint64_t up_to_ms) {
  std::uniform_int_distribution<std::uint64_t> pick(0, up_to_ms);
  return std::chrono::milliseconds(pick(random_));
}

// ---------------------------------------------------------------------------------------------
// KEEP: renewed about every TTL/3 while the connection lives

std::uint32_t lock_engine::start_keep(std::uint32_t slot, std::int64_t validity) {
  const operation& op = slots_[slot];
  const std::uint32_t index = take_slot(keeps_, free_keeps_);
  keep_lock& k = keeps_[index];
  k.active = true;
  k.renewing = false;
  k.key = op.key;
  k.owner = op.owner;
  k.ttl_ms = op.ttl_ms;
  k.valid_until = now_() + std::chrono::milliseconds(validity);
  k.granted = op.granted;
  k.sink = op.sink;
  k.seq = op.seq;
  slots_[slot].keep_started = true; // the count now belongs to the KEEP lock
  keep_by_key_[k.key] = index;
  add_deadline(op.t0 + std::chrono::milliseconds(op.ttl_ms / 3), index, k.generation,
               timer_kind::renew);
  return index;
}

void lock_engine::renew(std::uint32_t index) {
  keep_lock& k = keeps_[index];
  if (!k.active || k.renewing)
    return;
  k.renewing = true;
  const std::uint32_t slot = allocate(op_kind::renew, nullptr, 0);
  operation& op = slots_[slot];
  op.key = k.key;
  op.owner = k.owner;
  op.ttl_ms = k.ttl_ms;
  op.keep_index = index;
  op.keep_generation = k.generation;
  expect_lease(op);
  begin_round(slot, op_phase::voting, request_kind::extend);
}

void lock_engine::decide_renewal(std::uint32_t slot) {
  operation& op = slots_[slot];
  const std::uint32_t index = op.keep_index;
  keep_lock& k = keeps_[index];
  if (!k.active || k.generation != op.keep_generation) {
    finish(slot, {}); // unlocked or dropped meanwhile
    return;
  }
  k.renewing = false;
  const clock_type::time_point now = now_();
  const std::int64_t validity =
      op.tally.state() == vote_tally::outcome::reached ? validity_now(op) : 0;
  if (validity > 0) {
    ++counters_.renewed;
    k.valid_until = now + std::chrono::milliseconds(validity);
    k.granted = yes_mask(op.tally, node_count_); // where the key now lives to the new TTL
    add_deadline(op.t0 + std::chrono::milliseconds(k.ttl_ms / 3), index, k.generation,
                 timer_kind::renew);
  } else if (op.tally.refused_by_majority()) {
    lose(index); // the key is gone or someone else's on a majority
  } else {
    // Too few nodes answered: try again soon, but give up (LOST) while a third of the TTL is
    // still valid, so that the holder has time to stop before the lock can go to someone else.
    const auto retry = std::chrono::milliseconds(std::max<std::uint64_t>(1, k.ttl_ms / 10));
    const auto budget = node_timeout_for(k.ttl_ms, cfg_.node_timeout_ms);
    const auto reserve = std::chrono::milliseconds(k.ttl_ms / 3);
    if (now + retry + budget + reserve < k.valid_until)
      add_deadline(now + retry, index, k.generation, timer_kind::renew);
    else
      lose(index);
  }
  finish(slot, {});
}

void lock_engine::lose(std::uint32_t index) {
  keep_lock& k = keeps_[index];
  ++counters_.lost;
  const std::string key = k.key;
  log_->warn("KEEP lock on '{}' lost: no quorum renewed it in time", key);
  if (k.sink)
    k.sink->push(format_lost(std::string_view(key).substr(cfg_.key_prefix.size()), view(k.owner)),
                 k.seq);
  release_everywhere(key, k.owner, now_() + std::chrono::milliseconds(k.ttl_ms));
  drop_keep(index);
  delay(key);
  wake_head(key, delayed_until(key).value_or(now_()));
}

void lock_engine::drop_keep(std::uint32_t index) {
  keep_lock& k = keeps_[index];
  if (!k.active)
    return;
  if (const auto it = keep_by_key_.find(k.key); it != keep_by_key_.end() && it->second == index)
    keep_by_key_.erase(it);
  k.active = false;
  k.renewing = false;
  if (const auto it = keeps_per_client_.find(k.sink.get());
      it != keeps_per_client_.end() && --it->second == 0)
    keeps_per_client_.erase(it);
  k.sink.reset();
  k.generation = next_generation(k.generation);
  free_keeps_.push_back(index);
}

// ---------------------------------------------------------------------------------------------
// lock-delay

void lock_engine::delay(const std::string& key) {
  if (cfg_.lock_delay_ms == 0)
    return;
  delays_[key] = now_() + std::chrono::milliseconds(cfg_.lock_delay_ms);
  sweep_delays();
}

std::optional<clock_type::time_point> lock_engine::delayed_until(const std::string& key) {
  if (cfg_.lock_delay_ms == 0)
    return std::nullopt;
  const clock_type::time_point now = now_();
  if (const auto ended = leases_.find(key);
      ended != leases_.end() && ended->second.expires <= now) {
    // A lease granted here ran out without an UNLOCK: its holder may still be at work.
    const auto until = ended->second.expires + std::chrono::milliseconds(cfg_.lock_delay_ms);
    auto& delayed = delays_[key];
    delayed = std::max(delayed, until);
    leases_.erase(ended);
  }
  if (const auto delayed = delays_.find(key); delayed != delays_.end()) {
    if (delayed->second > now)
      return delayed->second;
    delays_.erase(delayed);
  }
  return std::nullopt;
}

void lock_engine::sweep_delays() {
  if (leases_.size() + delays_.size() < delay_sweep_at_)
    return;
  const clock_type::time_point now = now_();
  const auto delay_ms = std::chrono::milliseconds(cfg_.lock_delay_ms);
  std::erase_if(leases_, [&](const auto& entry) { return entry.second.expires + delay_ms <= now; });
  std::erase_if(delays_, [&](const auto& entry) { return entry.second <= now; });
  // Amortised: the next sweep comes when the tables have doubled again.
  delay_sweep_at_ = std::max<std::size_t>(1024, 2 * (leases_.size() + delays_.size()));
}

} // namespace redlockd
