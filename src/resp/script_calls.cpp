#include "redlockd/resp/script_calls.hpp"

#include "redlockd/resp/resp.hpp"
#include "redlockd/resp/scripts.hpp"

#include <algorithm>
#include <charconv>

namespace redlockd {
namespace {

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

std::pair<std::string_view, std::string_view> head(script s, script_by by) {
  return by == script_by::sha ? std::pair{std::string_view("EVALSHA"), script_sha(s)}
                              : std::pair{std::string_view("EVAL"), script_source(s)};
}

std::optional<std::uint64_t> counter(const redisReply& reply) {
  const std::string_view text = as_string(reply);
  std::uint64_t value = 0;
  if (!parse_counter(text.data(), text.size(), value))
    return std::nullopt;
  return value;
}

// TIME as the scripts append it: two decimal strings.
std::optional<node_time> time_at(const redisReply& reply, std::size_t first) {
  const auto seconds = counter(array_at(reply, first));
  const auto micros = counter(array_at(reply, first + 1));
  if (!seconds || !micros)
    return std::nullopt;
  return node_time{*seconds, *micros};
}

// acquire's four fields, then the rival ticket at `rival_at` if there is one: acquire_wait's
// fifth field, hand_over's sixth (its fifth is read by decode_hand_over).
acquire_reply decode_acquire(const redisReply& reply, std::size_t rival_at) {
  acquire_reply out;
  const std::size_t size = array_size(reply);
  if (size >= 3)
    out.status = as_integer(array_at(reply, 0));
  out.complete = size == 4 || size == rival_at + 1;
  if (!out.complete)
    return out;
  out.time = time_at(reply, 2);
  if (size == rival_at + 1)
    out.rival_ticket = counter(array_at(reply, rival_at)).value_or(0);
  if (out.status == 1)
    out.fence = counter(array_at(reply, 1));
  else if (out.status == 0)
    out.holder_pttl = as_integer(array_at(reply, 1)).value_or(0);
  return out;
}

// A permit's acquire: always six fields, acquire's four, the rival ticket and the slot.
acquire_reply decode_acquire_slot(const redisReply& reply) {
  acquire_reply out;
  if (array_size(reply) != 6)
    return out;
  out.status = as_integer(array_at(reply, 0));
  out.complete = true;
  out.time = time_at(reply, 2);
  out.rival_ticket = counter(array_at(reply, 4)).value_or(0);
  if (out.status == 1) {
    out.fence = counter(array_at(reply, 1));
    if (const auto slot = as_integer(array_at(reply, 5)); slot && *slot >= 0)
      out.slot = static_cast<std::uint32_t>(*slot);
  } else if (out.status == 0) {
    out.holder_pttl = as_integer(array_at(reply, 1)).value_or(0);
  } else if (out.status == 2) {
    out.permits_in_force = counter(array_at(reply, 1)).value_or(0);
  }
  return out;
}

hand_over_reply decode_hand_over(const redisReply& reply) {
  hand_over_reply out{decode_acquire(reply, 5), {}};
  out.grant.complete = out.grant.complete && array_size(reply) == 6;
  if (out.grant.complete)
    out.release.result = as_integer(array_at(reply, 4));
  return out;
}

extend_reply decode_extend(const redisReply& reply) {
  extend_reply out;
  const std::size_t size = array_size(reply);
  if (size >= 3)
    out.result = as_integer(array_at(reply, 0));
  out.complete = size == 3;
  if (out.complete)
    out.time = time_at(reply, 1);
  return out;
}

register_reply decode_registers(const redisReply& reply) {
  register_reply out;
  if (array_size(reply) != 2)
    return out;
  const auto fence = counter(array_at(reply, 0));
  const auto max_ttl = counter(array_at(reply, 1));
  if (fence && max_ttl)
    out = {true, *fence, !is_nil(array_at(reply, 0)), *max_ttl};
  return out;
}

list_step_reply decode_list_step(const redisReply& reply) {
  list_step_reply out;
  const std::size_t size = array_size(reply);
  if (size == 0 || (size - 1) % 4 != 0)
    return out;
  for (std::size_t i = 1; i + 3 < size; i += 4)
    out.holds.push_back(
        {std::string(as_string(array_at(reply, i))), as_integer(array_at(reply, i + 1)).value_or(0),
         std::string(as_string(array_at(reply, i + 2))),
         static_cast<std::uint64_t>(
             std::max<std::int64_t>(0, as_integer(array_at(reply, i + 3)).value_or(0)))});
  out.cursor = as_string(array_at(reply, 0));
  return out;
}

} // namespace

void append_acquire(std::string& out, script_by by, std::string_view key, const register_keys& keys,
                    std::string_view owner, std::uint64_t ttl_ms, std::uint64_t proposal) {
  const auto [verb, body] = head(script::acquire, by);
  // (The longest-TTL record's key, keys.max_ttl, the script makes from the fence key's name.)
  append_command(out, {verb, body, "2", key, keys.fence, owner, decimal(ttl_ms).view(),
                       decimal(proposal).view()});
}

void append_acquire_wait(std::string& out, script_by by, std::string_view key,
                         const register_keys& keys, std::string_view owner, std::uint64_t ttl_ms,
                         std::uint64_t proposal, const wait_mark& mark) {
  const auto [verb, body] = head(script::acquire_wait, by);
  // A wait of 0 ms left still marks for 1 ms (PX 0 is an error).
  append_command(out, {verb, body, "4", key, keys.fence, keys.max_ttl, mark.marker, owner,
                       decimal(ttl_ms).view(), decimal(proposal).view(),
                       decimal(std::max<std::uint64_t>(mark.wait_ms, 1)).view(), mark.daemon_id,
                       decimal(mark.ticket).view(), decimal(mark.slack_ms).view(),
                       decimal(mark.next_wait_ms).view()});
}

std::string release_wake(const register_keys& keys, std::string_view daemon_id, bool wakes,
                         std::uint64_t slack_ms) {
  std::string wake;
  if (wakes)
    wake.append(daemon_id)
        .append(" ")
        .append(decimal(slack_ms).view())
        .append(" ")
        .append(keys.wake);
  return wake;
}

void append_release(std::string& out, script_by by, std::string_view key, std::string_view owner,
                    std::string_view marker, std::string_view wake) {
  const auto [verb, body] = head(script::release, by);
  append_command(out, {verb, body, "2", key, marker, owner, wake});
}

void append_unmark(std::string& out, script_by by, std::string_view marker, std::string_view key,
                   std::string_view daemon_id, std::string_view wake_channel) {
  const auto [verb, body] = head(script::unmark, by);
  append_command(out, {verb, body, "2", marker, key, daemon_id, wake_channel});
}

void append_wake_yielded(std::string& out, script_by by, std::string_view marker,
                         std::string_view key, std::string_view daemon_id, std::uint64_t ticket,
                         std::string_view wake_channel) {
  const auto [verb, body] = head(script::wake_yielded, by);
  append_command(out,
                 {verb, body, "2", marker, key, daemon_id, decimal(ticket).view(), wake_channel});
}

void append_extend(std::string& out, script_by by, std::string_view key, const register_keys& keys,
                   std::string_view owner, std::uint64_t ttl_ms) {
  const auto [verb, body] = head(script::extend, by);
  append_command(out, {verb, body, "2", key, keys.max_ttl, owner, decimal(ttl_ms).view()});
}

void append_fence_bump(std::string& out, script_by by, const register_keys& keys,
                       std::uint64_t proposal) {
  const auto [verb, body] = head(script::fence_bump, by);
  append_command(out, {verb, body, "1", keys.fence, decimal(proposal).view()});
}

void append_hand_over(std::string& out, script_by by, std::string_view key,
                      const register_keys& keys, std::string_view owner, std::uint64_t ttl_ms,
                      std::uint64_t proposal, const wait_mark& mark,
                      std::string_view releasing_owner) {
  const auto [verb, body] = head(script::hand_over, by);
  append_command(out, {verb, body, "4", key, keys.fence, keys.max_ttl, mark.marker, owner,
                       decimal(ttl_ms).view(), decimal(proposal).view(),
                       decimal(std::max<std::uint64_t>(mark.wait_ms, 1)).view(), mark.daemon_id,
                       decimal(mark.ticket).view(), decimal(mark.slack_ms).view(), releasing_owner,
                       keys.wake, decimal(mark.next_wait_ms).view()});
}

void append_quarantine_mark(std::string& out, const register_keys& keys, std::string_view mark,
                            std::uint64_t mark_ms, bool again) {
  append_command(out, {"EVAL", script_source(script::seed), "3", keys.fence, keys.max_ttl, mark,
                       "0", "0", again ? "remark" : "mark",
                       decimal(std::max<std::uint64_t>(mark_ms, 1)).view()});
}

void append_seed(std::string& out, const register_keys& keys, std::string_view mark,
                 std::uint64_t fence, std::uint64_t max_ttl_ms) {
  append_command(out, {"EVAL", script_source(script::seed), "3", keys.fence, keys.max_ttl, mark,
                       decimal(fence).view(), decimal(max_ttl_ms).view(), "seed", "0"});
}

void append_register_read(std::string& out, const register_keys& keys) {
  append_command(out, {"MGET", keys.fence, keys.max_ttl});
}

void append_status_read(std::string& out, script_by by, std::string_view key) {
  const auto [verb, body] = head(script::status_read, by);
  append_command(out, {verb, body, "1", key});
}

void append_break(std::string& out, script_by by, std::string_view key, const register_keys& keys,
                  std::string_view marker) {
  const auto [verb, body] = head(script::break_hold, by);
  append_command(out, {verb, body, "3", key, keys.fence, marker, keys.wake});
}

void append_list_step(std::string& out, script_by by, std::string_view cursor,
                      std::string_view pattern, std::uint32_t count, const register_keys& keys) {
  const auto [verb, body] = head(script::list_step, by);
  append_command(out, {verb, body, "0", cursor, pattern, decimal(count).view(), keys.fence});
}

script_reply decode_script_reply(request_kind kind, const redisReply& reply) {
  if (is_error(reply))
    return error_reply{as_string(reply)};
  switch (kind) {
  case request_kind::acquire:
    return decode_acquire(reply, 4);
  case request_kind::acquire_slot:
    return decode_acquire_slot(reply);
  case request_kind::hand_over:
    return decode_hand_over(reply);
  case request_kind::release:
  case request_kind::break_hold:
  case request_kind::cleanup:
  case request_kind::unmark:
  case request_kind::wake_yielded:
    return release_reply{as_integer(reply)};
  case request_kind::extend:
    return decode_extend(reply);
  case request_kind::fence_bump: {
    // The previous counter is a bulk string. Anything else (-2: the register is gone) is no
    // previous value at all; read as text, -2 would be "" and count as a counter of 0 (a yes).
    if (const auto integer = as_integer(reply))
      return fence_bump_reply{std::nullopt, *integer == -2};
    return fence_bump_reply{counter(reply), false};
  }
  case request_kind::fleet_read:
    return decode_registers(reply);
  case request_kind::seed:
  case request_kind::quarantine_mark:
    return seed_reply{as_integer(reply)};
  case request_kind::status: {
    if (array_size(reply) != 5)
      return pttl_reply{as_integer(reply), {}};
    const auto count = [&](std::size_t i) {
      return static_cast<std::uint64_t>(
          std::max<std::int64_t>(0, as_integer(array_at(reply, i)).value_or(0)));
    };
    return pttl_reply{as_integer(array_at(reply, 0)), std::string(as_string(array_at(reply, 1))),
                      count(2), count(3), count(4)};
  }
  case request_kind::list_step:
    return decode_list_step(reply);
  default:
    return error_reply{"unexpected reply"};
  }
}

} // namespace redlockd
