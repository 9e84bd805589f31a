#include "redlockd/lock/status_query.hpp"

#include "redlockd/lock/redlock.hpp"
#include "redlockd/resp/resp.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>

namespace redlockd {

status_verdict decide_status(std::span<const std::optional<std::int64_t>> answers) {
  const std::size_t n = answers.size();
  status_verdict verdict;
  verdict.needed = quorum(n);
  const std::size_t held_needed = n - verdict.needed + 1; // more than N-Q: a LOCK would be BUSY
  std::vector<std::uint64_t> held;
  std::size_t free = 0;
  for (const auto& answer : answers) {
    if (!answer)
      continue;
    if (*answer == -2)
      ++free;
    else if (*answer == -1)
      held.push_back(0); // no expiry: not a key redlockd made; held, with no time known
    else if (*answer >= 0)
      held.push_back(static_cast<std::uint64_t>(*answer));
  }
  if (held.size() >= held_needed) {
    std::nth_element(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(held_needed - 1),
                     held.end(), std::greater<>());
    verdict.outcome = status_verdict::kind::held;
    verdict.pttl_ms = held[held_needed - 1];
    verdict.agreeing = held.size();
  } else if (free >= verdict.needed) {
    verdict.outcome = status_verdict::kind::free;
    verdict.agreeing = free;
  } else {
    verdict.outcome = status_verdict::kind::noquorum;
    verdict.agreeing = std::max(held.size(), free);
  }
  return verdict;
}

std::uint64_t status_count(std::span<const std::optional<std::int64_t>> answers,
                           std::span<const std::uint64_t> counts) {
  const std::size_t held_needed = answers.size() - quorum(answers.size()) + 1;
  std::vector<std::uint64_t> seen;
  for (std::size_t i = 0; i < answers.size(); ++i)
    if (answers[i])
      seen.push_back(counts[i]);
  if (seen.size() < held_needed)
    return 0;
  std::nth_element(seen.begin(), seen.begin() + static_cast<std::ptrdiff_t>(held_needed - 1),
                   seen.end(), std::greater<>());
  return seen[held_needed - 1];
}

std::string_view status_label(std::span<const std::optional<std::int64_t>> answers,
                              std::span<const std::string> labels) {
  std::string_view best;
  std::size_t best_count = 0;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    if (!answers[i] || *answers[i] == -2 || labels[i].empty())
      continue;
    std::size_t count = 0;
    for (std::size_t j = 0; j < answers.size(); ++j)
      count += answers[j] && *answers[j] != -2 && labels[j] == labels[i] ? 1 : 0;
    if (count > best_count || (count == best_count && labels[i] < best)) {
      best = labels[i];
      best_count = count;
    }
  }
  return best;
}

status_reader::status_reader(const config& cfg, node_io& io, eligible_function eligible,
                             arm_function arm, std::shared_ptr<spdlog::logger> log,
                             now_function now)
    : cfg_(cfg), io_(io), eligible_(std::move(eligible)), arm_(std::move(arm)),
      log_(std::move(log)), now_(std::move(now)) {}

void status_reader::query(const status_request& req, std::shared_ptr<reply_sink> sink,
                          std::uint64_t seq) {
  std::uint32_t slot = 0;
  if (free_.empty()) {
    slots_.emplace_back();
    slot = static_cast<std::uint32_t>(slots_.size() - 1);
  } else {
    slot = free_.back();
    free_.pop_back();
  }
  query_state& q = slots_[slot];
  q.active = true;
  q.started = now_();
  q.answers.fill(std::nullopt);
  for (std::string& label : q.labels)
    label.clear();
  q.readers.fill(0);
  q.permits_used.fill(0);
  q.permits.fill(0);
  q.waiting = 0;
  q.sink = std::move(sink);
  q.seq = seq;
  ++in_flight_;
  std::string key = cfg_.key_prefix;
  key.append(req.resource);
  command_.clear();
  // By source: STATUS must not be lost to a NOSCRIPT (Redis keeps the script cached anyway).
  append_status_read(command_, script_by::source, key);
  const std::size_t nodes = cfg_.nodes.size();
  std::vector<std::size_t> asked;
  for (std::size_t node = 0; node < nodes; ++node)
    if (eligible_(node))
      asked.push_back(node);
  q.waiting = asked.size();
  if (asked.empty()) {
    finish(slot);
    return;
  }
  const auto when = q.started + std::chrono::milliseconds(cfg_.node_timeout_ms);
  deadlines_.emplace_back(when, std::pair{slot, q.generation});
  if (deadlines_.size() == 1)
    arm_(when);
  for (std::size_t node : asked)
    io_.send(node, request_tag{request_kind::status, slot, q.generation}, command_);
}

void status_reader::on_reply(std::size_t node, const request_tag& tag, const script_reply& reply) {
  const pttl_reply* answer = nullptr;
  if (const auto* error = std::get_if<error_reply>(&reply)) {
    const bool first = (warned_ & (std::uint32_t{1} << node)) == 0;
    warned_ |= std::uint32_t{1} << node;
    log_->log(first ? spdlog::level::warn : spdlog::level::debug,
              "node {} answered STATUS's read with an error: {}", cfg_.nodes[node].to_string(),
              error->text);
  } else {
    answer = std::get_if<pttl_reply>(&reply);
  }
  if (tag.op < slots_.size() && slots_[tag.op].active &&
      slots_[tag.op].generation == tag.generation)
    answer_one(tag.op, node, answer);
}

void status_reader::on_failure(std::size_t node, const request_tag& tag) {
  if (tag.op < slots_.size() && slots_[tag.op].active &&
      slots_[tag.op].generation == tag.generation)
    answer_one(tag.op, node, nullptr);
}

void status_reader::answer_one(std::uint32_t slot, std::size_t node, const pttl_reply* answer) {
  query_state& q = slots_[slot];
  q.answers[node] = answer != nullptr ? answer->ms : std::nullopt;
  q.labels[node].assign(answer != nullptr ? std::string_view(answer->label) : "");
  q.readers[node] = answer != nullptr ? answer->readers : 0;
  q.permits_used[node] = answer != nullptr ? answer->permits_used : 0;
  q.permits[node] = answer != nullptr ? answer->permits : 0;
  if (--q.waiting == 0)
    finish(slot);
}

void status_reader::finish(std::uint32_t slot) {
  query_state& q = slots_[slot];
  const std::size_t nodes = cfg_.nodes.size();
  const std::span<const std::optional<std::int64_t>> answers(q.answers.data(), nodes);
  const auto verdict = decide_status(answers);
  status_counts counts;
  counts.readers = status_count(answers, {q.readers.data(), nodes});
  counts.permits_used = status_count(answers, {q.permits_used.data(), nodes});
  counts.permits = *std::max_element(q.permits.begin(), q.permits.begin() + nodes);
  std::string line;
  switch (verdict.outcome) {
  case status_verdict::kind::free:
    line = format_status_free(counts);
    break;
  case status_verdict::kind::held: {
    // Counted from the moment the PTTLs were asked for, with the same allowance for clock drift
    // as a LOCK's validity: a lower bound, never more.
    const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(now_() - q.started);
    const std::int64_t left = validity_ms(verdict.pttl_ms, elapsed, cfg_.clock_drift_factor);
    line = format_status_held(static_cast<std::uint64_t>(std::max<std::int64_t>(0, left)),
                              status_label(answers, {q.labels.data(), nodes}), counts);
    break;
  }
  case status_verdict::kind::noquorum:
    line = format_noquorum(verdict.agreeing, verdict.needed);
    break;
  }
  std::shared_ptr<reply_sink> sink = std::move(q.sink);
  const std::uint64_t seq = q.seq;
  q.active = false;
  ++q.generation;
  if (q.generation == 0)
    q.generation = 1;
  free_.push_back(slot);
  --in_flight_;
  if (sink)
    sink->deliver(seq, std::move(line));
}

void status_reader::on_timer() {
  const auto now = now_();
  while (!deadlines_.empty() && deadlines_.front().first <= now) {
    const auto [slot, generation] = deadlines_.front().second;
    deadlines_.pop_front();
    query_state& q = slots_[slot];
    if (q.active && q.generation == generation)
      finish(slot); // masters that did not answer in time count as silent
  }
  // Skip deadlines of queries already answered, so they do not wake the loop.
  while (!deadlines_.empty()) {
    const auto [slot, generation] = deadlines_.front().second;
    if (slots_[slot].active && slots_[slot].generation == generation)
      break;
    deadlines_.pop_front();
  }
  if (!deadlines_.empty())
    arm_(deadlines_.front().first);
}

} // namespace redlockd
