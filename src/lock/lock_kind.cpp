#include "redlockd/lock/lock_kind.hpp"

#include "redlockd/resp/resp.hpp"

#include <algorithm>
#include <array>
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

// ---------------------------------------------------------------------------------------------
// Exclusive: the v1 lock (acquire.lua, acquire_wait.lua, release.lua, extend.lua).

void exclusive_acquire(std::string& out, script_by by, const hold_target& hold,
                       const register_keys& keys, const acquire_call& call, std::string& scratch) {
  const std::string_view value = hold_value(scratch, call.owner, call.label);
  if (call.mark != nullptr)
    append_acquire_wait(out, by, hold.name, keys, value, call.ttl_ms, call.proposal, *call.mark);
  else
    append_acquire(out, by, hold.name, keys, value, call.ttl_ms, call.proposal);
}

void exclusive_release(std::string& out, script_by by, const hold_target& hold,
                       const register_keys& keys, const release_call& call, std::string& scratch) {
  append_release(out, by, hold.name, call.owner, wait_marker(scratch, keys, hold.name), call.wake);
}

void exclusive_extend(std::string& out, script_by by, const hold_target& hold,
                      const register_keys& keys, std::string_view owner, std::uint64_t ttl_ms) {
  append_extend(out, by, hold.name, keys, owner, ttl_ms);
}

// ---------------------------------------------------------------------------------------------
// Shared and permits: KEYS name, fence, max-TTL [, wait mark]; ARGV owner, ttl, proposal [, the
// wait's five], then the kind's own (shared: label; permit: n, first slot, label).

void append_marked_acquire(std::string& out, script s, script_by by, const hold_target& hold,
                           const register_keys& keys, const acquire_call& call,
                           std::initializer_list<std::string_view> own, std::string& scratch) {
  const auto [verb, body] = head(s, by);
  const decimal ttl(call.ttl_ms);
  const decimal proposal(call.proposal);
  std::array<std::string_view, 20> args{};
  std::size_t n = 0;
  const auto add = [&](std::string_view arg) { args[n++] = arg; };
  add(verb);
  add(body);
  add(call.mark != nullptr ? "4" : "3");
  add(hold.name);
  add(keys.fence);
  add(keys.max_ttl);
  if (call.mark != nullptr)
    add(wait_marker(scratch, keys, hold.name));
  add(call.owner);
  add(ttl.view());
  add(proposal.view());
  // The wait's five: a wait of 0 ms left still marks for 1 ms (PX 0 is an error).
  const decimal wait(call.mark != nullptr ? std::max<std::uint64_t>(call.mark->wait_ms, 1) : 0);
  const decimal ticket(call.mark != nullptr ? call.mark->ticket : 0);
  const decimal slack(call.mark != nullptr ? call.mark->slack_ms : 0);
  const decimal next_wait(call.mark != nullptr ? call.mark->next_wait_ms : 0);
  if (call.mark != nullptr) {
    add(wait.view());
    add(call.mark->daemon_id);
    add(ticket.view());
    add(slack.view());
    add(next_wait.view());
  }
  for (std::string_view arg : own)
    add(arg);
  append_command(out, std::span<const std::string_view>(args.data(), n));
}

void shared_acquire(std::string& out, script_by by, const hold_target& hold,
                    const register_keys& keys, const acquire_call& call, std::string& scratch) {
  append_marked_acquire(out, script::shared_acquire, by, hold, keys, call, {call.label}, scratch);
}

void permit_acquire(std::string& out, script_by by, const hold_target& hold,
                    const register_keys& keys, const acquire_call& call, std::string& scratch) {
  const decimal n(hold.permits);
  const decimal first(call.first_slot);
  append_marked_acquire(
      out, script::permit_acquire, by, hold, keys, call,
      {n.view(), call.check_only ? std::string_view("-1") : first.view(), call.label}, scratch);
}

// release.lua's layout: KEYS name, wait mark; ARGV owner, release_wake.
void append_marked_release(std::string& out, script s, script_by by, const hold_target& hold,
                           const register_keys& keys, const release_call& call,
                           std::string_view extra, std::string& scratch) {
  const auto [verb, body] = head(s, by);
  append_command(out, {verb, body, "2", hold.name, wait_marker(scratch, keys, hold.name),
                       call.owner, call.wake, extra});
}

void shared_release(std::string& out, script_by by, const hold_target& hold,
                    const register_keys& keys, const release_call& call, std::string& scratch) {
  append_marked_release(out, script::shared_release, by, hold, keys, call, "", scratch);
}

void permit_release(std::string& out, script_by by, const hold_target& hold,
                    const register_keys& keys, const release_call& call, std::string& scratch) {
  const decimal n(hold.permits);
  append_marked_release(out, script::permit_release, by, hold, keys, call,
                        call.attempt ? n.view() : std::string_view(), scratch);
}

void append_plain_extend(std::string& out, script s, script_by by, const hold_target& hold,
                         const register_keys& keys, std::string_view owner, std::uint64_t ttl_ms) {
  const auto [verb, body] = head(s, by);
  append_command(out, {verb, body, "2", hold.name, keys.max_ttl, owner, decimal(ttl_ms).view()});
}

void shared_extend(std::string& out, script_by by, const hold_target& hold,
                   const register_keys& keys, std::string_view owner, std::uint64_t ttl_ms) {
  append_plain_extend(out, script::shared_extend, by, hold, keys, owner, ttl_ms);
}

void permit_extend(std::string& out, script_by by, const hold_target& hold,
                   const register_keys& keys, std::string_view owner, std::uint64_t ttl_ms) {
  append_plain_extend(out, script::permit_extend, by, hold, keys, owner, ttl_ms);
}

// ---------------------------------------------------------------------------------------------
// Sets: the member keys are KEYS after the registers (acquire, extend) or alone (release).

void multi_acquire(std::string& out, script_by by, const hold_target& hold,
                   const register_keys& keys, const acquire_call& call, std::string&) {
  const auto [verb, body] = head(script::multi_acquire, by);
  const std::vector<std::string_view> members = members_of(hold.name);
  const decimal count(members.size() + 2);
  const decimal ttl(call.ttl_ms);
  const decimal proposal(call.proposal);
  std::vector<std::string_view> args{verb, body, count.view(), keys.fence, keys.max_ttl};
  args.insert(args.end(), members.begin(), members.end());
  args.insert(args.end(), {call.owner, ttl.view(), proposal.view()});
  if (call.mark == nullptr) {
    args.push_back(call.label);
    append_command(out, args);
    return;
  }
  // A WAIT's attempt: the wait's five (a wait of 0 ms left still marks for 1 ms), the label,
  // then the prefix of the members' wait marks.
  const decimal wait(std::max<std::uint64_t>(call.mark->wait_ms, 1));
  const decimal ticket(call.mark->ticket);
  const decimal slack(call.mark->slack_ms);
  const decimal next_wait(call.mark->next_wait_ms);
  args.insert(args.end(), {wait.view(), call.mark->daemon_id, ticket.view(), slack.view(),
                           next_wait.view(), call.label, keys.waiting});
  append_command(out, args);
}

void multi_release(std::string& out, script_by by, const hold_target& hold,
                   const register_keys& keys, const release_call& call, std::string&) {
  const auto [verb, body] = head(script::multi_release, by);
  const std::vector<std::string_view> members = members_of(hold.name);
  const decimal count(members.size());
  std::vector<std::string_view> args{verb, body, count.view()};
  args.insert(args.end(), members.begin(), members.end());
  args.insert(args.end(), {call.owner, call.wake, keys.waiting});
  append_command(out, args);
}

void multi_extend(std::string& out, script_by by, const hold_target& hold,
                  const register_keys& keys, std::string_view owner, std::uint64_t ttl_ms) {
  const auto [verb, body] = head(script::multi_extend, by);
  const std::vector<std::string_view> members = members_of(hold.name);
  const decimal count(members.size() + 1);
  const decimal ttl(ttl_ms);
  std::vector<std::string_view> args{verb, body, count.view(), keys.max_ttl};
  args.insert(args.end(), members.begin(), members.end());
  args.insert(args.end(), {owner, ttl.view()});
  append_command(out, args);
}

constexpr std::array<lock_kind_traits, lock_kind_count> kinds = {{
    {lock_kind::exclusive, "exclusive", script::acquire, script::release, script::extend,
     vote_rule::any_grant, false, true, true, request_kind::acquire, exclusive_acquire,
     exclusive_release, exclusive_extend},
    {lock_kind::shared, "shared", script::shared_acquire, script::shared_release,
     script::shared_extend, vote_rule::any_grant, true, false, true, request_kind::acquire,
     shared_acquire, shared_release, shared_extend},
    {lock_kind::permit, "permit", script::permit_acquire, script::permit_release,
     script::permit_extend, vote_rule::same_slot, true, false, true, request_kind::acquire_slot,
     permit_acquire, permit_release, permit_extend},
    {lock_kind::multi, "multi", script::multi_acquire, script::multi_release, script::multi_extend,
     vote_rule::any_grant, false, false, true, request_kind::acquire, multi_acquire, multi_release,
     multi_extend},
}};

constexpr char hex[] = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

} // namespace

const lock_kind_traits& traits_of(lock_kind kind) {
  return kinds[static_cast<std::size_t>(kind)];
}

bool is_acquire_request(request_kind request) {
  return std::any_of(kinds.begin(), kinds.end(), [request](const lock_kind_traits& row) {
    return row.acquire_request == request;
  });
}

std::vector<std::string_view> members_of(std::string_view set_name) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= set_name.size()) {
    const std::size_t end = std::min(set_name.find(member_separator, start), set_name.size());
    out.push_back(set_name.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool holds_members(std::string_view set_name, const std::vector<std::string_view>& members) {
  const std::vector<std::string_view> has = members_of(set_name);
  return std::all_of(members.begin(), members.end(), [&](std::string_view member) {
    return std::find(has.begin(), has.end(), member) != has.end();
  });
}

std::string set_without(std::string_view set_name, const std::vector<std::string_view>& members) {
  std::string rest;
  for (const std::string_view member : members_of(set_name)) {
    if (std::find(members.begin(), members.end(), member) != members.end())
      continue;
    if (!rest.empty())
      rest.push_back(member_separator);
    rest.append(member);
  }
  return rest;
}

owner_id tag_owner(owner_id random, lock_kind kind, std::uint32_t slot) {
  if (kind == lock_kind::exclusive)
    return random;
  for (std::size_t i = 0; i < 4; ++i)
    random[i] = '0';
  random[4] = hex[static_cast<std::size_t>(kind)];
  random[5] = hex[(slot >> 8) & 0xf];
  random[6] = hex[(slot >> 4) & 0xf];
  random[7] = hex[slot & 0xf];
  return random;
}

bool is_tagged(std::string_view owner) {
  return owner.size() == 40 && owner.substr(0, 4) == "0000";
}

lock_kind kind_of_owner(std::string_view owner) {
  if (!is_tagged(owner))
    return lock_kind::exclusive;
  const int kind = hex_value(owner[4]);
  if (kind < 1 || kind >= static_cast<int>(lock_kind_count))
    return lock_kind::exclusive;
  return static_cast<lock_kind>(kind);
}

std::uint32_t slot_of_owner(std::string_view owner) {
  if (kind_of_owner(owner) != lock_kind::permit)
    return 0;
  std::uint32_t slot = 0;
  for (std::size_t i = 5; i < 8; ++i) {
    const int digit = hex_value(owner[i]);
    if (digit < 0)
      return 0;
    slot = slot * 16 + static_cast<std::uint32_t>(digit);
  }
  return slot;
}

} // namespace redlockd
