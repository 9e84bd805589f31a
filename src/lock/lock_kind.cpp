#include "redlockd/lock/lock_kind.hpp"

#include <array>

namespace redlockd {
namespace {

constexpr std::array<lock_kind_traits, lock_kind_count> kinds = {{
    {lock_kind::exclusive, "exclusive", script::acquire, script::release, script::extend,
     vote_rule::any_grant, false},
    {lock_kind::shared, "shared", script::shared_acquire, script::shared_release,
     script::shared_extend, vote_rule::any_grant, true},
    {lock_kind::permit, "permit", script::permit_acquire, script::permit_release,
     script::permit_extend, vote_rule::same_slot, true},
    {lock_kind::multi, "multi", script::multi_acquire, script::multi_release, script::multi_extend,
     vote_rule::any_grant, false},
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
