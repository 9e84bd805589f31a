#include "redlockd/resp/scripts.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace redlockd {
namespace {

// Compares decimal counters without leading zeros exactly, as strings: Lua numbers are doubles
// and would round counters above 2^53.
#define REDLOCKD_LUA_LESS "local function less(a, b) return #a < #b or (#a == #b and a < b) end\n"

// Raises the max-register KEYS[k] to ARGV[a]; a missing register is created.
#define REDLOCKD_LUA_RAISE                                                                         \
  "local function raise(k, a)\n"                                                                   \
  "  local c = redis.call('get', KEYS[k])\n"                                                       \
  "  if not c or less(c, ARGV[a]) then redis.call('set', KEYS[k], ARGV[a]) end\n"                  \
  "  return c or '0'\n"                                                                            \
  "end\n"

// acquire's grant: SET NX PX and, when it took, the fence and longest-TTL registers raised in
// the same step; answers {1, previous counter, TIME}. Falls through on a refusal.
#define REDLOCKD_LUA_GRANT                                                                         \
  "local t = redis.call('time')\n"                                                                 \
  "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then\n"                             \
  "  local c = raise(2, 3)\n"                                                                      \
  "  raise(3, 2)\n"                                                                                \
  "  return {1, c, t[1], t[2]}\n"                                                                  \
  "end\n"

// KEYS: lock key, fence key, max-TTL key. ARGV: owner, ttl ms, proposed token.
// Granted: {1, previous counter, TIME}. Refused: {0, remaining TTL of the holder in ms, TIME}.
// TIME (seconds, microseconds) lets the daemon see a master's clock jump at every vote. A grant
// also raises the master's record of the longest TTL, in the same step: every master that holds
// a lock knows how long a restarted master must sit out for it.
constexpr std::string_view acquire_source = REDLOCKD_LUA_LESS REDLOCKD_LUA_RAISE REDLOCKD_LUA_GRANT
    "return {0, redis.call('pttl', KEYS[1]), t[1], t[2]}\n";

// KEYS: lock key, wait marker. ARGV: owner, wake channel, the releasing daemon's id. 1 if
// deleted, 0 if the key holds another owner, -1 if it is gone (the daemon tells a lost key from a
// lock taken over by someone else). When the lock is free on this master and another daemon
// marked that it waits for it, the lock key is published on the wake channel: the waiters on
// every daemon try again at once. With no marker, or only the releasing daemon's own (its
// waiters learn of its releases without the masters), nothing is published. A master whose ACL
// forbids PUBLISH still releases (pcall): waiters then fall back to their timed retry.
constexpr std::string_view release_source =
    "local v = redis.call('get', KEYS[1])\n"
    "local r = -1\n"
    "if v == ARGV[1] then r = redis.call('del', KEYS[1]) elseif v then return 0 end\n"
    "local m = redis.call('get', KEYS[2])\n"
    "if m and m ~= ARGV[3] then redis.pcall('publish', ARGV[2], KEYS[1]) end\n"
    "return r\n";

// KEYS: lock key, max-TTL key. ARGV: owner, ttl ms. {1 if the TTL was set, 0 if another owner
// holds the key, -1 if it is gone, TIME}. An extension raises the longest-TTL record as a grant
// does.
constexpr std::string_view extend_source = REDLOCKD_LUA_LESS REDLOCKD_LUA_RAISE
    "local t = redis.call('time')\n"
    "local v = redis.call('get', KEYS[1])\n"
    "local n = -1\n"
    "if v == ARGV[1] then n = redis.call('pexpire', KEYS[1], ARGV[2]) elseif v then n = 0 end\n"
    "if n == 1 then raise(2, 2) end\n"
    "return {n, t[1], t[2]}\n";

// KEYS: fence key. ARGV: proposed token. Stores max(counter, token), returns the previous counter.
constexpr std::string_view fence_bump_source =
    REDLOCKD_LUA_LESS REDLOCKD_LUA_RAISE "return raise(1, 1)\n";

// KEYS: fence key, max-TTL key. ARGV: the fleet's fence, the fleet's longest TTL. Re-seeds a
// master that lost its data with what a majority of the others hold, before it votes again.
constexpr std::string_view seed_source = REDLOCKD_LUA_LESS REDLOCKD_LUA_RAISE "raise(1, 1)\n"
                                                                              "raise(2, 2)\n"
                                                                              "return 1\n";

// KEYS: lock key, fence key, max-TTL key. ARGV: owner, ttl ms, proposed token, releasing owner.
// An UNLOCK that hands its lock to a waiter, in one step: where the key still holds the
// releasing owner it gets the new owner and TTL; where it is absent it is set as acquire sets
// it; elsewhere the new owner is refused. Answers as acquire does, with a fifth field as release
// answers for the releasing owner: 1 its key was replaced, 0 another owner holds it, -1 gone.
constexpr std::string_view hand_over_source =
    REDLOCKD_LUA_LESS REDLOCKD_LUA_RAISE "local t = redis.call('time')\n"
                                         "local v = redis.call('get', KEYS[1])\n"
                                         "local r = -1\n"
                                         "if v == ARGV[4] then\n"
                                         "  r = 1\n"
                                         "  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
                                         "elseif v then\n"
                                         "  r = 0\n"
                                         "end\n"
                                         "if r == 1 or redis.call('set', KEYS[1], ARGV[1], 'NX', "
                                         "'PX', ARGV[2]) then\n"
                                         "  local c = raise(2, 3)\n"
                                         "  raise(3, 2)\n"
                                         "  return {1, c, t[1], t[2], r}\n"
                                         "end\n"
                                         "return {0, redis.call('pttl', KEYS[1]), t[1], t[2], r}\n";

// KEYS: lock key, fence key, max-TTL key, wait marker. ARGV: owner, ttl ms, proposed token, ms
// the waiter still waits, the waiting daemon's id. acquire for a LOCK ... WAIT: a refusal also
// marks, for as long as the waiter waits (the longest of every daemon's waiters), who waits for
// this lock: the daemon's id, or '*' once waiters of two daemons marked it. A release through
// any other daemon then publishes a wake-up (release above). Answers as acquire does.
constexpr std::string_view acquire_wait_source =
    REDLOCKD_LUA_LESS REDLOCKD_LUA_RAISE REDLOCKD_LUA_GRANT
    "local m = redis.call('get', KEYS[4])\n"
    "if m and m ~= ARGV[5] then m = '*' else m = ARGV[5] end\n"
    "local p = math.max(redis.call('pttl', KEYS[4]), "
    "tonumber(ARGV[4]))\n"
    "redis.call('set', KEYS[4], m, 'PX', p)\n"
    "return {0, redis.call('pttl', KEYS[1]), t[1], t[2]}\n";

#undef REDLOCKD_LUA_GRANT
#undef REDLOCKD_LUA_RAISE
#undef REDLOCKD_LUA_LESS

// SHA-1 (FIPS 180-1), only to name the scripts the way Redis does.
std::string sha1_hex(std::string_view text) {
  std::uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
  std::string data(text);
  const std::uint64_t bit_length = static_cast<std::uint64_t>(text.size()) * 8;
  data.push_back(static_cast<char>(0x80));
  while (data.size() % 64 != 56)
    data.push_back('\0');
  for (int i = 7; i >= 0; --i)
    data.push_back(static_cast<char>((bit_length >> (i * 8)) & 0xff));
  auto rotl = [](std::uint32_t x, int n) { return (x << n) | (x >> (32 - n)); };
  for (std::size_t block = 0; block < data.size(); block += 64) {
    std::uint32_t w[80];
    for (int i = 0; i < 16; ++i) {
      const auto* p = reinterpret_cast<const unsigned char*>(data.data() + block + 4 * i);
      w[i] = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
             (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
    }
    for (int i = 16; i < 80; ++i)
      w[i] = rotl(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; ++i) {
      std::uint32_t f = 0, k = 0;
      if (i < 20) {
        f = (b & c) | (~b & d);
        k = 0x5A827999;
      } else if (i < 40) {
        f = b ^ c ^ d;
        k = 0x6ED9EBA1;
      } else if (i < 60) {
        f = (b & c) | (b & d) | (c & d);
        k = 0x8F1BBCDC;
      } else {
        f = b ^ c ^ d;
        k = 0xCA62C1D6;
      }
      const std::uint32_t t = rotl(a, 5) + f + e + k + w[i];
      e = d;
      d = c;
      c = rotl(b, 30);
      b = a;
      a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
  }
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (std::uint32_t word : h)
    for (int shift = 28; shift >= 0; shift -= 4)
      out.push_back(hex[(word >> shift) & 0xf]);
  return out;
}

constexpr std::string_view sources[script_count] = {
    acquire_source, release_source,   extend_source,      fence_bump_source,
    seed_source,    hand_over_source, acquire_wait_source};

} // namespace

std::string_view script_source(script s) {
  return sources[static_cast<std::size_t>(s)];
}

std::string_view script_sha(script s) {
  static const auto shas = [] {
    std::array<std::string, script_count> out;
    for (std::size_t i = 0; i < script_count; ++i)
      out[i] = sha1_hex(sources[i]);
    return out;
  }();
  return shas[static_cast<std::size_t>(s)];
}

} // namespace redlockd
