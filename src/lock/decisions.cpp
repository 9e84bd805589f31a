#include "redlockd/lock/decisions.hpp"

#include <algorithm>
#include <variant>

namespace redlockd {

acquire_vote count_acquire(const acquire_reply& reply, fence_register& fences, fence_round& round,
                           std::uint64_t& retry_ms, std::int64_t validity_ms) {
  if (!reply.complete)
    return {};
  // Another daemon's head waits there with this ticket: this daemon's next waiters get tickets
  // after it (their proposals are above everything observed), so that it is not overtaken again.
  fences.observe(reply.rival_ticket);
  if (reply.status == 1) {
    if (!reply.fence)
      return {vote::failed, true};
    fences.observe(*reply.fence);
    round.accept(*reply.fence);
    return {validity_ms > 0 ? vote::yes : vote::failed};
  }
  if (reply.status == 0) {
    if (reply.holder_pttl > 0) {
      const auto ms = static_cast<std::uint64_t>(reply.holder_pttl);
      retry_ms = retry_ms == 0 ? ms : std::min(retry_ms, ms);
    }
    return {vote::no};
  }
  // Another n is in force there (a permit's attempt): refused, nothing set. Whether that n is
  // the semaphore's is decided when the round ends (another_n_in_force).
  if (reply.status == 2)
    return {vote::no};
  return {};
}

std::uint64_t kept_entry_ticket(std::uint64_t proposal, std::uint64_t rival) {
  return rival < proposal ? proposal : rival + 1;
}

vote count_fence_bump(const fence_bump_reply& reply, fence_register& fences, fence_round& round) {
  if (!reply.previous)
    return vote::failed;
  fences.observe(*reply.previous);
  return round.accept(*reply.previous) ? vote::yes : vote::no;
}

vote count_release(const release_reply& reply, bool& gone) {
  if (!reply.result)
    return vote::failed;
  gone = *reply.result == -1;
  return *reply.result == 1 ? vote::yes : vote::no;
}

vote count_extend(const extend_reply& reply, std::int64_t validity_ms, bool& gone) {
  if (!reply.complete || !reply.result)
    return vote::failed;
  gone = *reply.result == -1; // judged against the nodes that granted the lock
  if (*reply.result != 1)
    return vote::no;
  return validity_ms > 0 ? vote::yes : vote::failed;
}

std::optional<std::int64_t> late_result(const script_reply& reply) {
  if (const auto* r = std::get_if<release_reply>(&reply))
    return r->result;
  if (const auto* r = std::get_if<acquire_reply>(&reply))
    return r->status; // {result, ..., TIME}
  if (const auto* r = std::get_if<extend_reply>(&reply))
    return r->result;
  if (const auto* r = std::get_if<hand_over_reply>(&reply))
    return r->release.result; // the UNLOCK's: its waiter gets the grant as an acquire_reply
  return std::nullopt;
}

vote_tally same_slot_view(const vote_tally& raw, std::span<const std::int16_t> slots,
                          std::uint32_t& winner) {
  std::size_t best = 0;
  std::int16_t best_slot = -1;
  for (std::size_t node = 0; node < raw.nodes(); ++node) {
    if (raw.of(node) != vote::yes || slots[node] < 0)
      continue;
    std::size_t count = 0;
    for (std::size_t other = 0; other < raw.nodes(); ++other)
      count += raw.of(other) == vote::yes && slots[other] == slots[node] ? 1 : 0;
    if (count > best || (count == best && slots[node] < best_slot)) {
      best = count;
      best_slot = slots[node];
    }
  }
  winner = best_slot < 0 ? 0 : static_cast<std::uint32_t>(best_slot);
  vote_tally view;
  view.reset(raw.nodes(), raw.needed());
  for (std::size_t node = 0; node < raw.nodes(); ++node) {
    vote v = raw.of(node);
    if (v == vote::pending)
      continue;
    if (v == vote::yes && slots[node] != best_slot)
      v = vote::no;
    view.record(node, v);
  }
  return view;
}

std::size_t most_on_one_slot(std::uint32_t took, std::span<const std::int16_t> slots) {
  std::size_t best = 0;
  for (std::size_t node = 0; node < slots.size(); ++node) {
    if ((took >> node & 1u) == 0 || slots[node] < 0)
      continue;
    std::size_t count = 0;
    for (std::size_t other = 0; other < slots.size(); ++other)
      count += (took >> other & 1u) != 0 && slots[other] == slots[node] ? 1 : 0;
    best = std::max(best, count);
  }
  return best;
}

bool retry_after_split(std::size_t held, std::size_t nodes, unsigned retried) {
  return held > 0 && held < quorum(nodes) && retried < max_split_retries;
}

bool another_n_in_force(std::size_t refused, std::size_t nodes) {
  return refused > nodes - quorum(nodes);
}

verdict judge_acquire(const vote_tally& tally, bool fence_conflict, std::int64_t validity_ms) {
  if (tally.state() == vote_tally::outcome::reached) {
    // A granting master had seen this token or a larger one: another daemon handed out tokens,
    // or this one restarted. Propose above everything seen, in a round of its own.
    if (fence_conflict)
      return {verdict::kind::fence_again};
    if (validity_ms > 0)
      return {verdict::kind::granted, validity_ms};
  }
  return {tally.refused_by_majority() ? verdict::kind::busy : verdict::kind::noquorum};
}

verdict judge_fencing(const vote_tally& tally, bool fence_conflict, std::int64_t validity_ms) {
  if (tally.state() == vote_tally::outcome::reached) {
    if (validity_ms > 0)
      return {verdict::kind::granted, validity_ms};
  } else if (fence_conflict && validity_ms > 0) {
    return {verdict::kind::fence_again};
  }
  return {verdict::kind::noquorum};
}

verdict judge_release(const vote_tally& tally) {
  return {tally.state() == vote_tally::outcome::reached ? verdict::kind::granted
                                                        : verdict::kind::notheld};
}

verdict judge_extend(const vote_tally& tally, std::int64_t validity_ms) {
  if (tally.state() == vote_tally::outcome::reached && validity_ms > 0)
    return {verdict::kind::granted, validity_ms};
  return {tally.refused_by_majority() ? verdict::kind::notheld : verdict::kind::noquorum};
}

} // namespace redlockd
