// The engine's pure parts, each alone: votes and verdicts, the deadline heap, WAIT queues, KEEP
// locks and their renewal rule, leases and lock-delay, the phase moves of an operation.
#include "redlockd/lock/deadline_queue.hpp"
#include "redlockd/lock/decisions.hpp"
#include "redlockd/lock/keep_locks.hpp"
#include "redlockd/lock/leases.hpp"
#include "redlockd/lock/operation.hpp"
#include "redlockd/lock/wait_queues.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <vector>

using namespace redlockd;
using namespace std::chrono_literals;

namespace {

vote_tally tally_of(std::initializer_list<vote> votes) {
  vote_tally tally(votes.size());
  std::size_t node = 0;
  for (const vote v : votes)
    tally.record(node++, v);
  return tally;
}

constexpr vote Y = vote::yes;
constexpr vote N = vote::no;
constexpr vote F = vote::failed;

} // namespace

TEST_CASE("an acquire vote: granted with validity, refused with a retry hint", "[decisions]") {
  fence_register fences;
  fence_round round(10);
  std::uint64_t retry_ms = 0;
  acquire_reply granted{true, 1, 7, 0, std::nullopt};
  CHECK(count_acquire(granted, fences, round, retry_ms, 900).cast == vote::yes);
  CHECK(fences.high_water() >= 7);
  // Granted too late to leave any validity: no grant.
  CHECK(count_acquire(granted, fences, round, retry_ms, 0).cast == vote::failed);
  // A previous counter at or above the proposal: yes, but the round conflicts.
  acquire_reply ahead{true, 1, 12, 0, std::nullopt};
  CHECK(count_acquire(ahead, fences, round, retry_ms, 900).cast == vote::yes);
  CHECK(round.conflict());

  acquire_reply refused{true, 0, std::nullopt, 300, std::nullopt};
  CHECK(count_acquire(refused, fences, round, retry_ms, 900).cast == vote::no);
  CHECK(retry_ms == 300);
  refused.holder_pttl = 500; // the smallest hint wins
  count_acquire(refused, fences, round, retry_ms, 900);
  CHECK(retry_ms == 300);

  acquire_reply bad{true, 1, std::nullopt, 0, std::nullopt};
  const acquire_vote counted = count_acquire(bad, fences, round, retry_ms, 900);
  CHECK(counted.cast == vote::failed);
  CHECK(counted.bad_fence);
  CHECK(count_acquire(acquire_reply{}, fences, round, retry_ms, 900).cast == vote::failed);

  // Another daemon's head waits on that master with ticket 40: this daemon's next proposals
  // (and so its next waiters' tickets) come after it.
  acquire_reply rival{true, 0, std::nullopt, 300, std::nullopt, 40};
  CHECK(count_acquire(rival, fences, round, retry_ms, 900).cast == vote::no);
  CHECK(fences.propose() == 41);
}

TEST_CASE("the ticket a grant keeps for the next waiter comes after every head marked there",
          "[decisions]") {
  // As kept_ticket in lua/lib/marks.lua computes it on each master.
  CHECK(kept_entry_ticket(50, 0) == 50);  // nobody else marked: the grant's proposal
  CHECK(kept_entry_ticket(50, 49) == 50); // every head marked there has an earlier ticket
  CHECK(kept_entry_ticket(50, 50) == 51); // a head with the proposal itself: after it
  CHECK(kept_entry_ticket(50, 70) == 71); // one after the latest head marked
}

TEST_CASE("release and extend votes tell a gone key from another owner", "[decisions]") {
  bool gone = false;
  CHECK(count_release({1}, gone) == vote::yes);
  CHECK_FALSE(gone);
  CHECK(count_release({-1}, gone) == vote::no);
  CHECK(gone);
  CHECK(count_release({0}, gone) == vote::no);
  CHECK_FALSE(gone);
  CHECK(count_release({std::nullopt}, gone) == vote::failed);

  CHECK(count_extend({true, 1, std::nullopt}, 500, gone) == vote::yes);
  CHECK(count_extend({true, 1, std::nullopt}, 0, gone) == vote::failed);
  CHECK(count_extend({true, -1, std::nullopt}, 500, gone) == vote::no);
  CHECK(gone);
  CHECK(count_extend({false, 1, std::nullopt}, 500, gone) == vote::failed);
}

TEST_CASE("verdicts follow quorum, refusals by a majority and validity", "[decisions]") {
  CHECK(judge_acquire(tally_of({Y, Y, Y, N, N}), false, 800).what == verdict::kind::granted);
  CHECK(judge_acquire(tally_of({Y, Y, Y, N, N}), false, 800).validity_ms == 800);
  CHECK(judge_acquire(tally_of({Y, Y, Y, N, N}), true, 800).what == verdict::kind::fence_again);
  CHECK(judge_acquire(tally_of({Y, Y, Y, N, N}), false, 0).what == verdict::kind::noquorum);
  CHECK(judge_acquire(tally_of({N, N, N, Y, Y}), false, 800).what == verdict::kind::busy);
  CHECK(judge_acquire(tally_of({Y, Y, F, F, N}), false, 800).what == verdict::kind::noquorum);

  CHECK(judge_fencing(tally_of({Y, Y, Y, N, N}), true, 800).what == verdict::kind::granted);
  CHECK(judge_fencing(tally_of({Y, Y, N, N, N}), true, 800).what == verdict::kind::fence_again);
  CHECK(judge_fencing(tally_of({Y, Y, N, N, N}), true, 0).what == verdict::kind::noquorum);

  CHECK(judge_release(tally_of({Y, Y, Y, F, F})).what == verdict::kind::granted);
  CHECK(judge_release(tally_of({Y, Y, N, F, F})).what == verdict::kind::notheld);

  CHECK(judge_extend(tally_of({Y, Y, Y, F, F}), 100).what == verdict::kind::granted);
  CHECK(judge_extend(tally_of({N, N, N, Y, Y}), 100).what == verdict::kind::notheld);
  CHECK(judge_extend(tally_of({Y, Y, F, F, F}), 100).what == verdict::kind::noquorum);
}

TEST_CASE("the deadline heap fires in order, skips stale entries and re-arms", "[deadlines]") {
  deadline_queue queue;
  const auto t = clock_type::time_point{} + 1h;
  CHECK(queue.add({t + 30ms, 1, 0, timer_kind::round}));      // first: arm
  CHECK(queue.add({t + 10ms, 2, 1, timer_kind::renew}));      // earlier: arm again
  CHECK_FALSE(queue.add({t + 20ms, 3, 2, timer_kind::node})); // later: the timer is set
  std::vector<std::uint64_t> fired;
  const auto stale = [](const deadline& d) { return d.stamp == 3; };
  const auto next =
      queue.run_due(t + 25ms, stale, [&](const deadline& d) { fired.push_back(d.stamp); });
  CHECK(fired == std::vector<std::uint64_t>{2});
  REQUIRE(next);
  CHECK(*next == t + 30ms);
  CHECK_FALSE(queue.add({t + 40ms, 4, 0, timer_kind::round})); // armed at +30 ms
  queue.run_due(t + 50ms, stale, [&](const deadline& d) { fired.push_back(d.stamp); });
  CHECK(fired == std::vector<std::uint64_t>{2, 1, 4});
  CHECK_FALSE(queue.next(stale));
}

TEST_CASE("WAIT queues are first come first served and report a new head", "[wait_queues]") {
  wait_queues queues;
  CHECK(queues.join("a", {1, 10}));
  CHECK_FALSE(queues.join("a", {2, 11}));
  CHECK_FALSE(queues.join("a", {3, 12}));
  CHECK(queues.join("b", {4, 13}));
  CHECK(queues.total() == 4);
  CHECK(queues.waiting_on("a") == 3);
  CHECK_FALSE(queues.leave("a", {2, 11})); // not the head
  CHECK(queues.leave("a", {1, 10}));       // the head, and 3 still waits
  CHECK(queues.head("a")->slot == 3);
  CHECK_FALSE(queues.leave("a", {3, 12})); // the last one: nobody to wake
  CHECK_FALSE(queues.head("a"));
  CHECK(queues.total() == 1);
}

TEST_CASE("KEEP locks count per connection and renew, retry or are lost", "[keep_locks]") {
  keep_locks keeps;
  const reply_sink* client = reinterpret_cast<const reply_sink*>(0x10);
  CHECK(keeps.reserve(client, 2));
  CHECK(keeps.reserve(client, 2));
  CHECK_FALSE(keeps.reserve(client, 2));
  keeps.unreserve(client);
  CHECK(keeps.reserve(client, 2));

  const auto t = clock_type::time_point{} + 1h;
  const owner_id owner{};
  const std::uint32_t index = keeps.add("lock:r", owner, 3000, t + 2900ms, 0b111, 42, nullptr, 1);
  CHECK(keeps.size() == 1);
  CHECK(keeps.index_of("lock:r", owner) == index);
  const std::uint32_t generation = keeps.at(index).generation;
  const keep_lock k = keeps.at(index);
  keeps.drop(index);
  CHECK_FALSE(keeps.live(index, generation));
  CHECK(keeps.size() == 0);

  // Renewed: the next renewal a third of the TTL after this round's start.
  CHECK(judge_renewal(k, 2900, false, t, t + 5ms, 50).what == renewal_step::kind::renewed);
  CHECK(judge_renewal(k, 2900, false, t, t + 5ms, 50).next == t + 1000ms);
  CHECK(judge_renewal(k, 0, true, t, t + 5ms, 50).what == renewal_step::kind::lost);
  // No quorum: retry after TTL/10 while a third of the TTL would still be left ...
  const renewal_step retry = judge_renewal(k, 0, false, t, t + 5ms, 50);
  CHECK(retry.what == renewal_step::kind::retry);
  CHECK(retry.next == t + 305ms);
  // ... and give up while it is: 1,600 + 300 retry + 50 node timeout + 1,000 reserve >= 2,900.
  CHECK(judge_renewal(k, 0, false, t, t + 1500ms, 50).what == renewal_step::kind::retry);
  CHECK(judge_renewal(k, 0, false, t, t + 1600ms, 50).what == renewal_step::kind::lost);
}

TEST_CASE("a lease that ran out unreleased starts lock-delay", "[leases]") {
  auto now = clock_type::time_point{} + 1h;
  const lease_table::now_function clock = [&] { return now; };
  lease_table leases(1000, clock);
  const owner_id owner{};
  leases.grant("lock:r", {owner, now + 500ms, now + 450ms, 0b11111});
  CHECK(leases.find("lock:r", owner) != nullptr);
  CHECK_FALSE(leases.delayed_until("lock:r")); // still running
  now += 600ms;
  CHECK(leases.delayed_until("lock:r") == now - 100ms + 1000ms);
  CHECK(leases.find("lock:r", owner) == nullptr);
  leases.grant("lock:s", {owner, now + 500ms, now + 450ms, 1});
  leases.release("lock:s", owner); // released: no delay
  now += 600ms;
  CHECK_FALSE(leases.delayed_until("lock:s"));
  leases.delay("lock:t");
  CHECK(leases.delayed_until("lock:t") == now + 1000ms);

  lease_table no_delay(0, clock);
  no_delay.delay("lock:t");
  CHECK_FALSE(no_delay.delayed_until("lock:t"));
}

TEST_CASE("an operation moves only along its legal phases", "[operation]") {
  CHECK(legal_move(op_phase::idle, op_phase::waiting));
  CHECK_FALSE(legal_move(op_phase::idle, op_phase::voting));
  CHECK(legal_move(op_phase::waiting, op_phase::voting));
  CHECK(legal_move(op_phase::voting, op_phase::fencing));
  CHECK(legal_move(op_phase::voting, op_phase::draining));
  CHECK_FALSE(legal_move(op_phase::fencing, op_phase::draining));
  CHECK_FALSE(legal_move(op_phase::waiting, op_phase::draining));
  CHECK(legal_move(op_phase::draining, op_phase::idle));
  CHECK_FALSE(legal_move(op_phase::draining, op_phase::voting));
  CHECK_FALSE(legal_move(op_phase::voting, op_phase::voting));
}

TEST_CASE("a permit attempt held a majority only where one slot did (seed 108)",
          "[decisions][kinds]") {
  std::array<std::int16_t, 5> slots{1, 0, 1, 2, 0};
  CHECK(most_on_one_slot(0b11111, slots) == 2); // five grants, no slot on three
  CHECK(most_on_one_slot(0b00101, slots) == 2);
  slots[3] = 1;
  CHECK(most_on_one_slot(0b01101, slots) == 3);
  CHECK(most_on_one_slot(0, slots) == 0);
}

TEST_CASE("another n refuses a permit only where no majority could grant without it (seed "
          "101914)",
          "[decisions][kinds]") {
  CHECK_FALSE(another_n_in_force(0, 5));
  CHECK_FALSE(another_n_in_force(2, 5)); // a minority: a late attempt's n, for its TTL
  CHECK(another_n_in_force(3, 5));
  CHECK(another_n_in_force(5, 5));
  CHECK_FALSE(another_n_in_force(1, 3));
  CHECK(another_n_in_force(2, 3));
  CHECK(another_n_in_force(2, 4)); // of four: the other two are no majority
  CHECK(another_n_in_force(1, 1));
}

TEST_CASE("a permit's round decides by slot: a majority must give the same one",
          "[decisions][kinds]") {
  vote_tally raw(5);
  std::array<std::int16_t, max_nodes> slots{};
  slots.fill(-1);
  const auto grant = [&](std::size_t node, std::int16_t slot) {
    raw.record(node, vote::yes);
    slots[node] = slot;
  };
  std::uint32_t winner = 99;
  grant(0, 1);
  grant(1, 0);
  grant(2, 1);
  // Three grants, but of two slots: not yet a majority of one.
  vote_tally view = same_slot_view(raw, slots, winner);
  CHECK(view.state() == vote_tally::outcome::pending);
  CHECK(winner == 1);
  CHECK(view.yes() == 2);
  CHECK(view.mask_of(vote::no) == 0b010); // master 1 holds another slot: not this hold
  grant(3, 0);
  view = same_slot_view(raw, slots, winner);
  CHECK(winner == 0); // a tie: the smallest slot
  CHECK(view.state() == vote_tally::outcome::pending);
  grant(4, 1);
  view = same_slot_view(raw, slots, winner);
  CHECK(winner == 1);
  CHECK(view.state() == vote_tally::outcome::reached);
  CHECK(view.yes_mask() == 0b10101);
  // A 2-2-1 split never reaches a majority: failed like a split Redlock vote.
  vote_tally split(5);
  slots.fill(-1);
  const std::int16_t split_slots[] = {0, 0, 1, 1};
  for (std::size_t node = 0; node < 4; ++node) {
    split.record(node, vote::yes);
    slots[node] = split_slots[node];
  }
  split.record(4, vote::no);
  CHECK(same_slot_view(split, slots, winner).state() == vote_tally::outcome::impossible);
}

TEST_CASE("lock-delay of a set delays each of its resources, and a set waits for any of them",
          "[leases][kinds]") {
  auto now = clock_type::time_point{} + 1h;
  const lease_table::now_function clock = [&] { return now; };
  lease_table leases(1000, clock);
  leases.delay("lock:a\nlock:b");
  CHECK(leases.delayed_until("lock:a") == now + 1000ms);
  CHECK(leases.delayed_until("lock:b") == now + 1000ms);
  CHECK_FALSE(leases.delayed_until("lock:c"));
  now += 500ms;
  leases.delay("lock:c");
  CHECK(leases.delayed_until("lock:c\nlock:d") == now + 1000ms); // the latest of its members
  now += 1100ms;
  CHECK_FALSE(leases.delayed_until("lock:a\nlock:b"));
}
