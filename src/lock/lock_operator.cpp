#include "redlockd/lock/lock_operator.hpp"

#include "redlockd/lock/redlock.hpp"
#include "redlockd/lock/status_query.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

namespace redlockd {

std::string list_pattern(std::string_view key_prefix, std::string_view prefix) {
  std::string out;
  for (const std::string_view part : {key_prefix, prefix})
    for (char c : part) {
      if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\')
        out.push_back('\\');
      out.push_back(c);
    }
  out.push_back('*');
  return out;
}

break_verdict decide_break(std::span<const std::optional<std::int64_t>> answers) {
  break_verdict v;
  v.needed = quorum(answers.size());
  for (const auto& answer : answers) {
    if (!answer)
      continue;
    ++v.answered;
    if (*answer == 1)
      ++v.ended_on;
  }
  if (v.ended_on > 0)
    v.outcome = break_verdict::kind::ended;
  else if (v.answered >= v.needed)
    v.outcome = break_verdict::kind::not_held;
  return v;
}

listing merge_listings(std::span<const node_listing> nodes, std::string_view key_prefix,
                       std::uint32_t count, std::chrono::microseconds elapsed,
                       double clock_drift_factor) {
  listing out;
  out.needed = quorum(nodes.size());
  // Per key, each master's holds in node order (a map: the keys come out sorted).
  std::map<std::string_view, std::vector<const listed_hold*>> by_key;
  for (std::size_t node = 0; node < nodes.size(); ++node) {
    if (!nodes[node].answered)
      continue;
    ++out.answered;
    out.truncated = out.truncated || !nodes[node].complete;
    for (const listed_hold& hold : nodes[node].holds) {
      auto& seen = by_key[hold.key];
      seen.resize(nodes.size(), nullptr);
      seen[node] = &hold;
    }
  }
  out.quorum = out.answered >= out.needed;
  if (!out.quorum)
    return out;
  std::vector<std::optional<std::int64_t>> pttls(nodes.size());
  std::vector<std::uint64_t> holders(nodes.size());
  for (const auto& [key, seen] : by_key) {
    const auto held_on = std::count_if(seen.begin(), seen.end(), [](auto* h) { return h; });
    if (static_cast<std::size_t>(held_on) < out.needed || !key.starts_with(key_prefix))
      continue;
    if (out.locks.size() == count) {
      out.truncated = true;
      break;
    }
    listed_lock lock;
    std::string_view resource = key.substr(key_prefix.size());
    lock.kind = "exclusive";
    // The other kinds' holds are side keys named after the resource (a space never is in one).
    for (const auto& [suffix, kind] : {std::pair{std::string_view(" readers"), "shared"},
                                       std::pair{std::string_view(" permits"), "permit"}})
      if (resource.ends_with(suffix)) {
        resource.remove_suffix(suffix.size());
        lock.kind = kind;
      }
    lock.resource = resource;
    for (std::size_t node = 0; node < nodes.size(); ++node) {
      holders[node] = seen[node] != nullptr ? seen[node]->holders : 0;
      if (seen[node] != nullptr)
        pttls[node] = seen[node]->pttl_ms;
      else if (nodes[node].answered && nodes[node].complete)
        pttls[node] = -2;
      else
        pttls[node] = std::nullopt;
      if (seen[node] != nullptr && !seen[node]->label.empty())
        lock.labels.push_back(seen[node]->label);
    }
    std::sort(lock.labels.begin(), lock.labels.end());
    lock.labels.erase(std::unique(lock.labels.begin(), lock.labels.end()), lock.labels.end());
    const status_verdict verdict = decide_status(pttls);
    lock.holders = std::max<std::uint64_t>(1, status_count(pttls, holders));
    lock.ttl_ms = static_cast<std::uint64_t>(
        std::max<std::int64_t>(0, validity_ms(verdict.pttl_ms, elapsed, clock_drift_factor)));
    out.locks.push_back(std::move(lock));
  }
  return out;
}

std::string format_listing(const listing& result) {
  nlohmann::json locks = nlohmann::json::array();
  for (const listed_lock& lock : result.locks)
    locks.push_back({{"resource", lock.resource},
                     {"kind", lock.kind},
                     {"ttl_ms", lock.ttl_ms},
                     {"holders", lock.holders},
                     {"labels", lock.labels}});
  const nlohmann::json body = {{"locks", std::move(locks)}, {"truncated", result.truncated}};
  return "OK " + body.dump() + "\n";
}

lock_operator::lock_operator(const config& cfg, node_io& io, eligible_function eligible,
                             arm_function arm, broken_function broken,
                             std::shared_ptr<spdlog::logger> log, now_function now)
    : cfg_(cfg), io_(io), eligible_(std::move(eligible)), arm_(std::move(arm)),
      broken_(std::move(broken)), log_(std::move(log)), now_(std::move(now)), keys_(cfg.fence_key) {
}

std::uint32_t lock_operator::start(job_kind kind, std::shared_ptr<reply_sink> sink,
                                   std::uint64_t seq, std::chrono::milliseconds budget) {
  std::uint32_t slot = 0;
  if (free_.empty()) {
    jobs_.emplace_back();
    slot = static_cast<std::uint32_t>(jobs_.size() - 1);
  } else {
    slot = free_.back();
    free_.pop_back();
  }
  job& j = jobs_[slot];
  j.active = true;
  j.kind = kind;
  j.started = now_();
  j.deadline = j.started + budget;
  j.waiting = 0;
  j.ended.fill(std::nullopt);
  for (node_listing& listing : j.listings)
    listing = {};
  j.steps.fill(0);
  j.sink = std::move(sink);
  j.seq = seq;
  return slot;
}

void lock_operator::list(const list_request& req, std::shared_ptr<reply_sink> sink,
                         std::uint64_t seq) {
  const std::uint32_t slot = start(job_kind::list, std::move(sink), seq, list_time_budget);
  job& j = jobs_[slot];
  j.pattern = list_pattern(cfg_.key_prefix, req.prefix);
  j.count = std::min(req.count, list_count_max);
  for (std::size_t node = 0; node < cfg_.nodes.size(); ++node)
    if (eligible_(node)) {
      ++j.waiting;
      send_list_step(slot, node, "0");
    }
  if (j.waiting == 0)
    finish(slot);
  else
    rearm();
}

void lock_operator::break_hold(const break_request& req, std::string_view peer,
                               std::shared_ptr<reply_sink> sink, std::uint64_t seq) {
  const std::uint32_t slot = start(job_kind::break_hold, std::move(sink), seq,
                                   std::chrono::milliseconds(cfg_.node_timeout_ms));
  job& j = jobs_[slot];
  j.key.assign(cfg_.key_prefix).append(req.resource);
  j.peer.assign(peer);
  command_.clear();
  // By source: a BREAK is rare, and a NOSCRIPT must not lose it.
  append_break(command_, script_by::source, j.key, keys_, wait_marker(marker_, keys_, j.key));
  for (std::size_t node = 0; node < cfg_.nodes.size(); ++node)
    if (eligible_(node)) {
      ++j.waiting;
      io_.send(node, request_tag{request_kind::break_hold, slot, j.generation}, command_);
    }
  if (j.waiting == 0)
    finish(slot);
  else
    rearm();
}

void lock_operator::send_list_step(std::uint32_t slot, std::size_t node, std::string_view cursor) {
  job& j = jobs_[slot];
  ++j.steps[node];
  command_.clear();
  append_list_step(command_, script_by::source, cursor, j.pattern, list_scan_count, keys_);
  io_.send(node, request_tag{request_kind::list_step, slot, j.generation}, command_);
}

lock_operator::job* lock_operator::current(const request_tag& tag) {
  if (tag.op >= jobs_.size() || !jobs_[tag.op].active || jobs_[tag.op].generation != tag.generation)
    return nullptr;
  return &jobs_[tag.op];
}

void lock_operator::on_reply(std::size_t node, const request_tag& tag, const script_reply& reply) {
  job* j = current(tag);
  if (j == nullptr)
    return;
  if (const auto* error = std::get_if<error_reply>(&reply)) {
    log_->warn("node {} answered {} with an error: {}", cfg_.nodes[node].to_string(),
               tag.kind == request_kind::list_step ? "LIST" : "BREAK", error->text);
    node_done(tag.op);
    return;
  }
  if (const auto* ended = std::get_if<release_reply>(&reply)) {
    j->ended[node] = ended->result;
    node_done(tag.op);
    return;
  }
  const auto* step = std::get_if<list_step_reply>(&reply);
  if (step == nullptr || step->cursor.empty()) {
    node_done(tag.op);
    return;
  }
  node_listing& listing = j->listings[node];
  listing.answered = true;
  listing.holds.insert(listing.holds.end(), step->holds.begin(), step->holds.end());
  if (step->cursor == "0") {
    listing.complete = true;
    node_done(tag.op);
  } else if (j->steps[node] >= list_steps_max) {
    node_done(tag.op); // capped: this master's listing stays incomplete
  } else {
    send_list_step(tag.op, node, step->cursor);
  }
}

void lock_operator::on_failure(std::size_t, const request_tag& tag) {
  if (current(tag) != nullptr)
    node_done(tag.op);
}

void lock_operator::node_done(std::uint32_t slot) {
  if (--jobs_[slot].waiting == 0)
    finish(slot);
}

std::string lock_operator::finish_break(job& j) {
  const std::size_t nodes = cfg_.nodes.size();
  const break_verdict v =
      decide_break(std::span<const std::optional<std::int64_t>>(j.ended.data(), nodes));
  const std::string_view resource = std::string_view(j.key).substr(cfg_.key_prefix.size());
  switch (v.outcome) {
  case break_verdict::kind::ended:
    log_->warn("BREAK '{}' from {}: holds ended on {} of {} masters ({} answered)", resource,
               j.peer, v.ended_on, nodes, v.answered);
    broken_(j.key);
    return format_ok();
  case break_verdict::kind::not_held:
    log_->warn("BREAK '{}' from {}: not held ({} of {} masters answered)", resource, j.peer,
               v.answered, nodes);
    return format_notheld();
  case break_verdict::kind::noquorum:
    break;
  }
  log_->warn("BREAK '{}' from {}: no quorum ({} of {} masters answered, none held it)", resource,
             j.peer, v.answered, nodes);
  return format_noquorum(v.answered, v.needed);
}

void lock_operator::finish(std::uint32_t slot) {
  job& j = jobs_[slot];
  std::string line;
  if (j.kind == job_kind::break_hold) {
    line = finish_break(j);
  } else {
    const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(now_() - j.started);
    const listing result =
        merge_listings(std::span<const node_listing>(j.listings.data(), cfg_.nodes.size()),
                       cfg_.key_prefix, j.count, elapsed, cfg_.clock_drift_factor);
    line = result.quorum ? format_listing(result) : format_noquorum(result.answered, result.needed);
  }
  std::shared_ptr<reply_sink> sink = std::move(j.sink);
  const std::uint64_t seq = j.seq;
  j.active = false;
  j.generation = next_generation(j.generation);
  for (node_listing& listing : j.listings)
    listing = {};
  free_.push_back(slot);
  if (sink)
    sink->deliver(seq, std::move(line));
}

void lock_operator::on_timer() {
  const auto now = now_();
  for (std::uint32_t slot = 0; slot < jobs_.size(); ++slot)
    if (jobs_[slot].active && jobs_[slot].deadline <= now)
      finish(slot); // masters that did not finish in time count as silent (or incomplete)
  rearm();
}

void lock_operator::rearm() {
  std::optional<clock_type::time_point> earliest;
  for (const job& j : jobs_)
    if (j.active && (!earliest || j.deadline < *earliest))
      earliest = j.deadline;
  if (earliest)
    arm_(*earliest);
}

} // namespace redlockd
