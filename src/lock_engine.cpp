#include "redlockd/lock_engine.hpp"

#include "redlockd/resp.hpp"
#include "redlockd/scripts.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

namespace redlockd {
namespace {

// Rounds of fencing proposals before an acquisition gives up. Each round proposes a value above
// everything seen; only daemons racing on the same fleet make a round fail.
constexpr unsigned max_fence_rounds = 4;

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

std::uint32_t next_generation(std::uint32_t generation) {
  ++generation;
  return generation == 0 ? 1 : generation; // 0 marks requests nobody waits for
}

} // namespace

lock_engine::lock_engine(const config& cfg, node_io& io, std::shared_ptr<spdlog::logger> log,
                         now_function now)
    : cfg_(cfg), io_(io), log_(std::move(log)), now_(std::move(now)),
      node_count_(cfg.nodes.size()) {}

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
  op.kind = kind;
  op.sink = std::move(sink);
  op.seq = seq;
  op.fence_rounds = 0;
  op.retry_ms = 0;
  op.t0 = now_();
  return slot;
}

void lock_engine::finish(std::uint32_t slot, std::string line) {
  operation& op = slots_[slot];
  op.phase = op_phase::idle;
  op.generation = next_generation(op.generation);
  std::shared_ptr<reply_sink> sink = std::move(op.sink);
  const std::uint64_t seq = op.seq;
  free_slots_.push_back(slot);
  if (sink)
    sink->deliver(seq, std::move(line));
}

void lock_engine::lock(const lock_request& req, std::shared_ptr<reply_sink> sink,
                       std::uint64_t seq) {
  const std::uint32_t slot = allocate(op_kind::lock, std::move(sink), seq);
  operation& op = slots_[slot];
  op.key.assign(cfg_.key_prefix).append(req.resource);
  op.owner = owners_.next();
  op.ttl_ms = req.ttl_ms;
  op.fence = fence_round(fences_.propose());
  begin_round(slot, op_phase::voting, request_kind::acquire);
}

void lock_engine::unlock(const unlock_request& req, std::shared_ptr<reply_sink> sink,
                         std::uint64_t seq) {
  const std::uint32_t slot = allocate(op_kind::unlock, std::move(sink), seq);
  operation& op = slots_[slot];
  op.key.assign(cfg_.key_prefix).append(req.resource);
  std::copy_n(req.owner.begin(), op.owner.size(), op.owner.begin());
  op.ttl_ms = 0;
  begin_round(slot, op_phase::voting, request_kind::release);
}

void lock_engine::extend(const extend_request& req, std::shared_ptr<reply_sink> sink,
                         std::uint64_t seq) {
  const std::uint32_t slot = allocate(op_kind::extend, std::move(sink), seq);
  operation& op = slots_[slot];
  op.key.assign(cfg_.key_prefix).append(req.resource);
  std::copy_n(req.owner.begin(), op.owner.size(), op.owner.begin());
  op.ttl_ms = req.ttl_ms;
  begin_round(slot, op_phase::voting, request_kind::extend);
}

void lock_engine::begin_round(std::uint32_t slot, op_phase phase, request_kind kind) {
  operation& op = slots_[slot];
  op.phase = phase;
  op.generation = next_generation(op.generation);
  op.tally.reset(node_count_);
  const auto timeout = op.ttl_ms == 0 ? std::chrono::milliseconds(cfg_.node_timeout_ms)
                                      : node_timeout_for(op.ttl_ms, cfg_.node_timeout_ms);
  const clock_type::time_point when = now_() + timeout;
  deadlines_.push({when, slot, op.generation});
  if (!armed_ || when < *armed_) {
    armed_ = when;
    io_.arm_timer(when);
  }
  send_round(slot, kind);
  decide(slot);
}

void lock_engine::send_round(std::uint32_t slot, request_kind kind) {
  for (std::size_t node = 0; node < node_count_; ++node) {
    if (io_.usable(node))
      send_command(node, slot, kind, true);
    else
      slots_[slot].tally.record(node, vote::failed);
  }
}

void lock_engine::send_command(std::size_t node, std::uint32_t slot, request_kind kind,
                               bool by_sha) {
  const operation& op = slots_[slot];
  // EVALSHA normally; EVAL with the source after a node answered NOSCRIPT.
  auto head = [by_sha](script s) {
    return by_sha ? std::pair{std::string_view("EVALSHA"), script_sha(s)}
                  : std::pair{std::string_view("EVAL"), script_source(s)};
  };
  scratch_.clear();
  const std::string_view owner = view(op.owner);
  switch (kind) {
  case request_kind::acquire: {
    const auto [verb, body] = head(script::acquire);
    append_command(scratch_, {verb, body, "2", op.key, cfg_.fence_key, owner,
                              decimal(op.ttl_ms).view(), decimal(op.fence.proposed()).view()});
    break;
  }
  case request_kind::release: {
    const auto [verb, body] = head(script::release);
    append_command(scratch_, {verb, body, "1", op.key, owner});
    break;
  }
  case request_kind::extend: {
    const auto [verb, body] = head(script::extend);
    append_command(scratch_, {verb, body, "1", op.key, owner, decimal(op.ttl_ms).view()});
    break;
  }
  case request_kind::fence_bump: {
    const auto [verb, body] = head(script::fence_bump);
    append_command(scratch_, {verb, body, "1", cfg_.fence_key, decimal(op.fence.proposed()).view()});
    break;
  }
  default:
    return;
  }
  io_.send(node, request_tag{kind, slot, op.generation}, scratch_);
}

void lock_engine::release_everywhere(const operation& op) {
  // Also on nodes that refused or did not answer: their SET may have happened after all.
  scratch_.clear();
  append_command(scratch_, {"EVALSHA", script_sha(script::release), "1", op.key, view(op.owner)});
  for (std::size_t node = 0; node < node_count_; ++node)
    if (io_.usable(node))
      io_.send(node, request_tag{request_kind::release, 0, 0}, scratch_);
}

std::int64_t lock_engine::validity_now(const operation& op) const {
  const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(now_() - op.t0);
  return validity_ms(op.ttl_ms, elapsed, cfg_.clock_drift_factor);
}

void lock_engine::on_reply(std::size_t node, const request_tag& tag, const redisReply& reply) {
  if (tag.generation == 0 || tag.op >= slots_.size())
    return; // fire-and-forget release
  operation& op = slots_[tag.op];
  if (op.generation != tag.generation || op.phase == op_phase::idle ||
      op.tally.of(node) != vote::pending)
    return; // a late reply of an earlier round: its slot was kept, the answer is discarded

  if (is_error(reply)) {
    const std::string_view text = as_string(reply);
    if (text.starts_with("NOSCRIPT")) {
      // The node lost its scripts (restart, SCRIPT FLUSH): run this one by source, reload the rest.
      io_.reload_scripts(node);
      send_command(node, tag.op, tag.kind, false);
      return;
    }
    log_->warn("node {} answered an error: {}", cfg_.nodes[node].to_string(), text);
    op.tally.record(node, vote::failed);
    decide(tag.op);
    return;
  }

  vote v = vote::failed;
  switch (tag.kind) {
  case request_kind::acquire:
    if (array_size(reply) == 2) {
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
    if (const auto n = as_integer(reply))
      v = *n == 1 ? vote::yes : vote::no;
    break;
  case request_kind::extend:
    if (const auto n = as_integer(reply))
      v = *n != 1 ? vote::no : validity_now(op) > 0 ? vote::yes : vote::failed;
    break;
  default:
    break;
  }
  op.tally.record(node, v);
  decide(tag.op);
}

void lock_engine::on_failure(std::size_t node, const request_tag& tag) {
  if (tag.generation == 0 || tag.op >= slots_.size())
    return;
  operation& op = slots_[tag.op];
  if (op.generation != tag.generation || op.phase == op_phase::idle)
    return;
  if (op.tally.record(node, vote::failed))
    decide(tag.op);
}

void lock_engine::on_timer() {
  armed_.reset();
  const clock_type::time_point now = now_();
  while (!deadlines_.empty() && deadlines_.top().when <= now) {
    const deadline_entry entry = deadlines_.top();
    deadlines_.pop();
    operation& op = slots_[entry.slot];
    if (op.generation != entry.generation || op.phase == op_phase::idle)
      continue;
    // Nodes that did not answer in time count as no; their late replies will be discarded.
    for (std::size_t node = 0; node < node_count_; ++node)
      op.tally.record(node, vote::failed);
    decide(entry.slot);
  }
  if (const auto next = next_deadline()) {
    armed_ = *next;
    io_.arm_timer(*next);
  }
}

std::optional<clock_type::time_point> lock_engine::next_deadline() {
  // Drop deadlines of finished rounds so that they do not wake the loop.
  while (!deadlines_.empty()) {
    const deadline_entry& top = deadlines_.top();
    const operation& op = slots_[top.slot];
    if (op.generation == top.generation && op.phase != op_phase::idle)
      return top.when;
    deadlines_.pop();
  }
  return std::nullopt;
}

void lock_engine::decide(std::uint32_t slot) {
  operation& op = slots_[slot];
  if (op.phase == op_phase::idle)
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
  case op_kind::unlock:
    if (reached) {
      ++counters_.released;
      finish(slot, format_ok());
    } else {
      ++counters_.notheld;
      finish(slot, format_notheld());
    }
    return;
  case op_kind::extend: {
    const std::int64_t validity = reached ? validity_now(op) : 0;
    if (validity > 0) {
      ++counters_.extended;
      finish(slot, format_extend_ok(validity));
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
    if (op.fence.conflict()) {
      // A granting node had seen this token or a larger one: another daemon handed out tokens,
      // or this one restarted. Propose above everything seen, in a round of its own.
      ++counters_.fence_conflicts;
      start_fencing_round(slot);
      return;
    }
    const std::int64_t validity = validity_now(op);
    if (validity > 0) {
      ++counters_.acquired;
      finish(slot, format_lock_ok(view(op.owner), op.fence.proposed(), validity));
      return;
    }
  }
  release_everywhere(op);
  if (op.tally.refused_by_majority()) {
    ++counters_.busy;
    finish(slot, format_busy(op.retry_ms));
  } else {
    ++counters_.noquorum;
    finish(slot, format_noquorum(op.tally.yes(), op.tally.needed()));
  }
}

void lock_engine::start_fencing_round(std::uint32_t slot) {
  operation& op = slots_[slot];
  if (++op.fence_rounds > max_fence_rounds) {
    log_->warn("giving up on a fencing token for '{}' after {} rounds", op.key, max_fence_rounds);
    release_everywhere(op);
    ++counters_.noquorum;
    finish(slot, format_noquorum(0, op.tally.needed()));
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
      ++counters_.acquired;
      finish(slot, format_lock_ok(view(op.owner), op.fence.proposed(), validity));
      return;
    }
  } else if (op.fence.conflict() && validity_now(op) > 0) {
    start_fencing_round(slot);
    return;
  }
  release_everywhere(op);
  ++counters_.noquorum;
  finish(slot, format_noquorum(op.tally.yes(), op.tally.needed()));
}

} // namespace redlockd
