#include "redlockd/lock/node_health.hpp"

#include "redlockd/lock/redlock.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>

namespace redlockd {

node_health::node_health(const config& cfg, node_io& io, spdlog::logger& log,
                         const now_function& now, fence_register& fences, engine_counters& counters,
                         const register_keys& keys, std::string_view daemon_id,
                         deadline_function add_deadline)
    : cfg_(cfg), io_(io), log_(log), now_(now), fences_(fences), counters_(counters), keys_(keys),
      add_deadline_(std::move(add_deadline)), node_count_(cfg.nodes.size()),
      mark_key_(keys.fence + ":quarantine:" + std::string(daemon_id)) {}

void node_health::on_connected(std::size_t node, const node_facts& facts) {
  node_record& h = nodes_[node];
  // The last sample of the same run stays: the first TIME of the new connection is judged
  // against it, or a jump while this daemon was away would pass unseen (simulator seed 250274).
  const std::string& run = started_ ? h.run_id : h.pending_run_id;
  if (!run.empty() && run != facts.run_id)
    h.clock.reset();
  h.clock_carried = h.clock.has_value();
  fences_.observe(facts.fence.value_or(0));
  max_ttl_ = std::max(max_ttl_, facts.max_ttl_ms);
  if (!started_) {
    h.pending_run_id.assign(facts.run_id);
    h.pending = facts;
    h.pending->run_id = h.pending_run_id;
    try_start();
    return;
  }
  judge(node, facts);
}

void node_health::on_ready(std::size_t node) {
  // A read that could not ask this master (its handshake had not ended) may need its answer:
  // a new fleet's masters end their handshakes one after the other, and a read of one or two
  // of them decides nothing. Asked again now rather than at the retry, 20 node timeouts away.
  for (std::size_t judged = 0; judged < node_count_; ++judged) {
    const node_record& h = nodes_[judged];
    const bool reading =
        (h.state == trust::quarantined || h.state == trust::reseeding) && h.marked && !h.read_done;
    if (reading && (h.read_asked & (std::uint32_t{1} << node)) == 0)
      start_fleet_read(judged);
  }
}

void node_health::try_start() {
  // The fleet's fence and longest TTL are known once a majority of masters that kept their data
  // answered: any later read of fewer, or of masters that lost data, could miss a value.
  std::size_t connected = 0;
  std::size_t intact = 0;
  for (std::size_t node = 0; node < node_count_; ++node) {
    const node_record& h = nodes_[node];
    if (!h.pending)
      continue;
    ++connected;
    const bool lost_fence = !h.pending->fence && fences_.high_water() > 0;
    if (!lost_fence && h.pending->uptime_ms >= max_ttl_)
      ++intact;
  }
  if (intact < quorum(node_count_) && connected < node_count_)
    return;
  if (intact < quorum(node_count_))
    log_.error("fewer than a majority of masters are known to have kept their data (restarted "
               "within the longest TTL, or without a fence counter): every master was read, "
               "starting anyway; if they did lose it, tokens go on from the masters' clock");
  started_ = true;
  for (std::size_t node = 0; node < node_count_; ++node) {
    node_record& h = nodes_[node];
    if (!h.pending)
      continue;
    const node_facts facts = *h.pending;
    judge(node, facts);
    h.pending.reset();
  }
}

void node_health::judge(std::size_t node, const node_facts& facts) {
  node_record& h = nodes_[node];
  const clock_type::time_point now = now_();
  // The uptime only says something at first contact; later a new run_id does.
  const bool first_contact = h.run_id.empty();
  const bool new_run = !first_contact && h.run_id != facts.run_id;
  h.run_id.assign(facts.run_id);
  if (new_run || (first_contact && facts.uptime_ms < max_ttl_)) {
    if (new_run) {
      ++counters_.restarts;
      log_.warn("node {} restarted (new run_id, up {} ms)", cfg_.nodes[node].to_string(),
                facts.uptime_ms);
    }
    quarantine(node, quarantine_reason::restart, now - std::chrono::milliseconds(facts.uptime_ms));
    return;
  }
  const bool judged = h.state == trust::quarantined || h.state == trust::reseeding;
  if (!judged && !facts.fence) {
    // No master votes without the fence register: a grant refuses where it is missing, which
    // is how a FLUSHALL while connected shows (lock_engine::data_lost). So a master without one
    // is seeded first, through the quarantine: on a new fleet (none has one yet) that takes the
    // longest TTL recorded, none, and the seed creates it.
    if (fences_.high_water() > 0) {
      // Up longer than any lock lives, yet without the fence counter: its data went (FLUSHALL, a
      // replaced disk) at a time nobody knows: count from now.
      ++counters_.key_losses;
      log_.warn("node {} has no fence counter while the fleet has one: its data was lost",
                cfg_.nodes[node].to_string());
    }
    quarantine(node, quarantine_reason::keyloss, now);
    return;
  }
  if (h.state == trust::unknown)
    h.state = trust::trusted;
  else if (judged && h.marks_out == 0) // (one sent while the link was down goes out first on it)
    send_mark(node); // its answer sends the seed again if one was lost with the connection
}

void node_health::key_lost(std::size_t node) {
  ++counters_.key_losses;
  quarantine(node, quarantine_reason::keyloss, now_());
}

std::chrono::microseconds node_health::drift_of_max_ttl() const {
  return std::chrono::microseconds(drift_us(max_ttl_, cfg_.clock_drift_factor));
}

void node_health::quarantine(std::size_t node, quarantine_reason reason,
                             clock_type::time_point since) {
  if (cfg_.unsafe_disable_quarantine) {
    // The weakened daemon of the chaos suite's controls votes with it at once; it still gives it
    // a fence register (mark and seed in one go, this daemon's figures), or nothing is granted.
    nodes_[node].state = trust::trusted;
    send_mark(node);
    send_seed(node);
    return;
  }
  node_record& h = nodes_[node];
  // Every lock it may have lost lives at most the longest TTL past the latest loss.
  const bool fresh = h.state == trust::trusted || h.state == trust::unknown;
  h.lost_since = fresh ? since : std::max(h.lost_since, since);
  h.state = trust::quarantined;
  h.reason = reason;
  h.empty_seed.reset();
  // What this daemon knows now; the fleet read may make it longer, never shorter.
  h.quarantined_until = std::max(
      h.quarantined_until, h.lost_since + std::chrono::milliseconds(max_ttl_) + drift_of_max_ttl());
  if (fences_.high_water() > 0)
    log_.warn("node {} quarantined: its votes do not count until every lock it may have lost has "
              "expired (at least {} ms; the longest TTL is read from a majority of the others)",
              cfg_.nodes[node].to_string(), ms_until(now_(), h.quarantined_until));
  else
    log_.info("node {} has no fence counter yet (a new fleet): it is seeded before it votes",
              cfg_.nodes[node].to_string());
  // The mark first, then the fleet read (on_mark_reply): a lock the node lost before the mark
  // was set was granted before the read, so the read sees its TTL on a majority; a loss after
  // it takes the mark away, and the seed finds it gone.
  h.marked = false;
  h.seed_in_flight = false; // the answer of one sent earlier is ignored (a new generation)
  h.read_generation = next_generation(h.read_generation);
  h.mark_generation = h.read_generation;
  h.read_done = false;
  send_mark(node);
  add_deadline_(retry_at(), static_cast<std::uint32_t>(node), h.read_generation);
}

void node_health::send_mark(std::size_t node) {
  // By source, like the seed (and, like it, also during a connection's handshake: it goes out
  // before any vote). It outlives the quarantine comfortably; should it expire first, the seed
  // finds it gone and the quarantine only starts over. Lost with a connection: set again at the
  // reconnection (judge), or at the next timer.
  command_.clear();
  append_quarantine_mark(command_, keys_, mark_key_, mark_life_ms(), nodes_[node].marked);
  ++nodes_[node].marks_out;
  io_.send(node,
           request_tag{request_kind::quarantine_mark, static_cast<std::uint32_t>(node),
                       nodes_[node].mark_generation},
           command_);
}

void node_health::on_mark_reply(std::size_t node, const request_tag& tag,
                                const script_reply& reply) {
  node_record& h = nodes_[node];
  if (tag.op == node && h.marks_out > 0)
    --h.marks_out;
  // Checked against the quarantine, not the fleet read in progress: a read restarted while
  // the answer was on its way (a master came back, a retry) must not drop an answer that says
  // the mark was gone, or the mark it set again lets the seed through (simulator seed 13004379
  // --faults key-loss: two FLUSHALLs while this daemon was cut off, quarantine over 47 ms later).
  if (tag.op != node || tag.generation != h.mark_generation ||
      (h.state != trust::quarantined && h.state != trust::reseeding))
    return;
  const auto* answer = std::get_if<seed_reply>(&reply);
  if (answer == nullptr || !answer->result) { // an error: set it again a little later
    add_deadline_(retry_at(), static_cast<std::uint32_t>(node), h.read_generation);
    return;
  }
  if (h.marked) { // set again at a reconnection
    if (*answer->result == 1) {
      maybe_seed(node); // still there: nothing lost since it was first set
      return;
    }
    ++counters_.key_losses;
    log_.warn("node {} lost data again during its quarantine (its quarantine mark is gone)",
              cfg_.nodes[node].to_string());
    quarantine(node, h.reason, now_()); // a seed in flight is then ignored (a new generation)
    return;
  }
  h.marked = true;
  // Locks lost before the mark was set live at most the longest TTL more.
  h.lost_since = std::max(h.lost_since, now_());
  h.quarantined_until = std::max(
      h.quarantined_until, h.lost_since + std::chrono::milliseconds(max_ttl_) + drift_of_max_ttl());
  start_fleet_read(node);
}

clock_type::time_point node_health::retry_at() const {
  return now_() + std::chrono::milliseconds(std::max<std::uint32_t>(cfg_.node_timeout_ms, 1) * 20);
}

void node_health::start_fleet_read(std::size_t node) {
  node_record& h = nodes_[node];
  h.read_generation = next_generation(h.read_generation);
  h.read_done = false;
  h.read_sent = h.read_answers = h.read_trusted_answers = h.read_without_fence = h.read_with_fence =
      0;
  h.read_asked = h.read_answered = 0;
  h.read_fence = h.read_max_ttl = 0;
  command_.clear();
  append_register_read(command_, keys_);
  const request_tag tag{request_kind::fleet_read, static_cast<std::uint32_t>(node),
                        h.read_generation};
  // The node itself is asked too: whether it has a fence register now (another daemon may have
  // seeded it since this one connected) counts below; its vote does not (it is not trusted).
  for (std::size_t other = 0; other < node_count_; ++other) {
    if (!io_.usable(other))
      continue;
    ++h.read_sent;
    h.read_asked |= std::uint32_t{1} << other;
    io_.send(other, tag, command_);
  }
  // Asked again if a majority has not answered by then (masters down, links reconnecting).
  add_deadline_(retry_at(), static_cast<std::uint32_t>(node), h.read_generation);
  if (node_count_ == 1)
    fleet_read_done(node); // a fleet of one master: there is nobody else to ask
}

void node_health::on_register_read(std::size_t answering, const request_tag& tag,
                                   const register_reply* reply) {
  if (tag.op >= node_count_)
    return;
  node_record& h = nodes_[tag.op];
  if (h.read_done || h.read_generation != tag.generation)
    return;
  ++h.read_answers;
  if (reply != nullptr && reply->ok) {
    h.read_fence = std::max(h.read_fence, reply->fence);
    h.read_max_ttl = std::max(h.read_max_ttl, reply->max_ttl_ms);
    h.read_answered |= std::uint32_t{1} << answering;
    if (trusted(answering))
      ++h.read_trusted_answers;
    // A register this daemon seeded from a read of a fleet without history, and that no grant
    // has raised since, counts as none: a new fleet's masters are seeded one after the other,
    // and the reads of the last ones would otherwise never find a majority either way (CI:
    // master 4 down, 1 and 3 seeded while 0 and 2 were read).
    const auto& seeded = nodes_[answering].empty_seed;
    if (reply->has_fence && !(seeded && *seeded == reply->fence))
      ++h.read_with_fence;
    else
      ++h.read_without_fence;
  }
  std::size_t trusted_nodes = 0;
  for (std::size_t other = 0; other < node_count_; ++other)
    if (other != tag.op && trusted(other))
      ++trusted_nodes;
  const bool majority = h.read_trusted_answers >= quorum(node_count_);
  // Fewer than a majority trusted (a young fleet's masters are all in restart quarantine), yet
  // every master asked answered: enough when a majority of the masters has its fence register
  // (kept, or seeded from a majority), or when a majority has none (a new fleet, or a majority
  // lost its data: tokens go on from the masters' clock, PROTOCOL.md). Otherwise the counter lives
  // on masters not heard: wait for them (the simulator's seed 41754: two masters that lost their
  // data were seeded from the one master up, down since the start, and tokens went back to 1).
  const bool best_effort =
      trusted_nodes < quorum(node_count_) && h.read_answers == h.read_sent &&
      (h.read_with_fence >= quorum(node_count_) || h.read_without_fence >= quorum(node_count_));
  if (majority || best_effort) {
    h.read_found_empty = h.read_without_fence >= quorum(node_count_);
    fleet_read_done(tag.op);
    return;
  }
  // Every master asked answered, but too few of them were trusted when they did (a new fleet's
  // masters are seeded one after the other): if enough of them are trusted now, ask them again
  // at once rather than at the next retry.
  std::size_t trusted_now = 0;
  for (std::size_t other = 0; other < node_count_; ++other)
    if ((h.read_answered & (std::uint32_t{1} << other)) != 0 && trusted(other))
      ++trusted_now;
  if (h.read_answers == h.read_sent && trusted_now >= quorum(node_count_))
    start_fleet_read(tag.op);
}

void node_health::fleet_read_done(std::size_t node) {
  node_record& h = nodes_[node];
  h.read_done = true;
  fences_.observe(h.read_fence);
  max_ttl_ = std::max(max_ttl_, h.read_max_ttl);
  if (h.state == trust::quarantined) {
    h.quarantined_until =
        std::max(h.quarantined_until,
                 h.lost_since + std::chrono::milliseconds(max_ttl_) + drift_of_max_ttl());
    if (now_() < h.quarantined_until) {
      add_deadline_(h.quarantined_until, static_cast<std::uint32_t>(node), h.read_generation);
      return;
    }
  }
  maybe_seed(node);
}

void node_health::maybe_seed(std::size_t node) {
  // Only once the mark is set: the seed checks it, and a mark set after the seed would prove
  // nothing about the time in between. (Its answer comes back here; the timer asks again.)
  node_record& h = nodes_[node];
  if (!h.read_done)
    return;
  if (!h.marked) {
    add_deadline_(retry_at(), static_cast<std::uint32_t>(node), h.read_generation);
    return;
  }
  if (h.state == trust::quarantined && now_() >= h.quarantined_until)
    h.state = trust::reseeding;
  if (h.state == trust::reseeding && !h.seed_in_flight)
    send_seed(node);
}

void node_health::send_seed(std::size_t node) {
  // By source: a seed must not be lost to NOSCRIPT. It lands before any vote on the connection.
  node_record& h = nodes_[node];
  command_.clear();
  h.seed_fence = fences_.high_water();
  append_seed(command_, keys_, mark_key_, h.seed_fence, max_ttl_);
  io_.send(node,
           request_tag{request_kind::seed, static_cast<std::uint32_t>(node), h.read_generation},
           command_);
  h.seed_in_flight = true;
}

void node_health::on_seed_reply(std::size_t node, const request_tag& tag,
                                const script_reply& reply) {
  node_record& h = nodes_[node];
  if (tag.op != node || h.read_generation != tag.generation || h.state != trust::reseeding)
    return;
  h.seed_in_flight = false;
  if (const auto* error = std::get_if<error_reply>(&reply)) {
    log_.warn("node {}: re-seeding failed: {}; trying again", cfg_.nodes[node].to_string(),
              error->text);
    add_deadline_(retry_at(), static_cast<std::uint32_t>(node), h.read_generation);
    return;
  }
  const auto* answer = std::get_if<seed_reply>(&reply);
  if (answer != nullptr && answer->result == 0) {
    // The mark set when the quarantine started is gone: the node lost its data again since.
    ++counters_.key_losses;
    log_.warn("node {} lost data again during its quarantine (its quarantine mark is gone): "
              "quarantined again",
              cfg_.nodes[node].to_string());
    h.state = trust::quarantined;
    h.marked = false;
    quarantine(node, h.reason, now_());
    return;
  }
  if (answer == nullptr || !answer->result) {
    add_deadline_(retry_at(), static_cast<std::uint32_t>(node), h.read_generation);
    return;
  }
  h.state = trust::trusted;
  h.reason = quarantine_reason::none;
  h.empty_seed.reset();
  if (h.read_found_empty)
    h.empty_seed = h.seed_fence;
  log_.info("node {} out of quarantine (re-seeded: fence {}, longest TTL {} ms)",
            cfg_.nodes[node].to_string(), fences_.high_water(), max_ttl_);
}

void node_health::on_seed_lost(const request_tag& tag) {
  if (tag.op < node_count_)
    nodes_[tag.op].seed_in_flight = false; // sent again when the node reconnects (judge)
}

void node_health::on_mark_lost(const request_tag& tag) {
  if (tag.op < node_count_ && nodes_[tag.op].marks_out > 0)
    --nodes_[tag.op].marks_out; // sent again when the node reconnects (judge)
}

void node_health::on_timer(std::size_t node) {
  node_record& h = nodes_[node];
  const bool judged = h.state == trust::quarantined || h.state == trust::reseeding;
  if (judged && !h.marked) {
    if (h.marks_out == 0)
      send_mark(node); // answered with an error (or not sent); the read follows the answer
    add_deadline_(retry_at(), static_cast<std::uint32_t>(node), h.read_generation);
    return;
  }
  if (!h.read_done) {
    start_fleet_read(node); // no majority answered in time: ask again
    return;
  }
  maybe_seed(node); // the quarantine is over, or the last seed was refused
}

std::int64_t node_health::clock_jump_bound_us() const {
  // A forward jump shortens every lock on that master by the jump; the drift allowance of the
  // shortest TTL granted is what such a lock can lose, so that is the bound (clock_jump_ms caps
  // it).
  const std::int64_t configured = static_cast<std::int64_t>(cfg_.clock_jump_ms) * 1000;
  if (min_ttl_ == 0)
    return configured;
  return std::min(configured, drift_us(min_ttl_, cfg_.clock_drift_factor));
}

bool node_health::on_time(std::size_t node, const node_time& time, clock_type::time_point sent_at) {
  node_record& h = nodes_[node];
  const auto node_us = static_cast<std::int64_t>(time.seconds * 1'000'000 + time.micros);
  const clock_type::time_point received = now_();
  const clock_type::time_point sent = std::min(sent_at, received);
  const auto previous = h.clock;
  h.clock = time_sample{node_us, sent, received};
  if (!previous)
    return true;
  const auto us = [](clock_type::duration d) {
    return std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  };
  // Each TIME was read between its request's send and its reply's handling, so between the two
  // samples at most (received - previous sent) and at least (sent - previous received) passed.
  // Across a reconnection a clock may have run off by the drift factor over the gap, which can
  // be more than the bound and is no jump. Between probes of one connection the bound alone
  // counts, as it always did (a 100 ms lock's bound is 3 ms; 1 % of a 500 ms probe is 5 ms).
  const std::int64_t node_delta = node_us - previous->node_us;
  const std::int64_t longest = us(received - previous->sent);
  const auto drift = h.clock_carried ? static_cast<std::int64_t>(std::ceil(
                                           static_cast<double>(longest) * cfg_.clock_drift_factor))
                                     : 0;
  h.clock_carried = false;
  const std::int64_t skew = node_delta - longest - drift;
  const std::int64_t behind = us(sent - previous->received) - drift - node_delta;
  if (skew > clock_jump_bound_us()) {
    // Its keys now expire early by up to the jump: locks granted there may already be gone.
    ++counters_.clock_jumps;
    log_.warn("node {}: clock jumped {} ms forward", cfg_.nodes[node].to_string(), skew / 1000);
    quarantine(node, quarantine_reason::clock, received);
    return false;
  }
  if (behind > static_cast<std::int64_t>(cfg_.clock_jump_ms) * 1000) {
    ++counters_.clock_jumps_backward;
    log_.warn("node {}: clock jumped {} ms backward (its locks last longer than granted)",
              cfg_.nodes[node].to_string(), behind / 1000);
  }
  return true;
}

std::optional<std::uint64_t> node_health::fleet_time_us() const {
  std::array<std::int64_t, max_nodes> now_on{};
  std::size_t sampled = 0;
  const clock_type::time_point now = now_();
  for (std::size_t node = 0; node < node_count_; ++node) {
    const node_record& h = nodes_[node];
    if (h.state != trust::trusted || !h.clock)
      continue;
    // Its TIME was read before the reply was handled: a lower bound of its clock now.
    now_on[sampled++] =
        h.clock->node_us +
        std::chrono::duration_cast<std::chrono::microseconds>(now - h.clock->received).count();
  }
  const std::size_t majority = quorum(node_count_);
  if (sampled < majority)
    return std::nullopt;
  // The majority-th latest: a minority of clocks set ahead cannot raise it.
  std::nth_element(now_on.begin(), now_on.begin() + static_cast<std::ptrdiff_t>(majority - 1),
                   now_on.begin() + static_cast<std::ptrdiff_t>(sampled), std::greater<>());
  const std::int64_t time = now_on[majority - 1];
  if (time <= 0 || time >= (std::int64_t{1} << 53))
    return std::nullopt;
  return static_cast<std::uint64_t>(time);
}

node_status node_health::status_of(std::size_t node) const {
  const node_record& h = nodes_[node];
  if (h.state != trust::quarantined && h.state != trust::reseeding)
    return {};
  return {h.reason, static_cast<std::int64_t>(ms_until(now_(), h.quarantined_until))};
}

void node_health::granting(std::uint64_t ttl_ms) {
  // The masters record it themselves with every grant and extension (the scripts).
  max_ttl_ = std::max(max_ttl_, ttl_ms);
  min_ttl_ = min_ttl_ == 0 ? ttl_ms : std::min(min_ttl_, ttl_ms);
}

} // namespace redlockd
