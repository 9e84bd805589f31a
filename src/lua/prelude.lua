-- The helpers every script of redlockd starts with: the build puts this file before each
-- script's own text (cmake/embed_lua.cmake), so the text a master runs is prelude + the
-- libraries the script names with '--#include <name>' (src/lua/lib) + the script.

-- Compares decimal counters without leading zeros exactly, as strings: Lua numbers are doubles
-- and would round counters above 2^53.
local function less(a, b) return #a < #b or (#a == #b and a < b) end

-- Raises the max-register KEYS[k] to ARGV[a]; a missing register is created. Returns the value
-- it held before ('0' if none).
local function raise(k, a)
  local c = redis.call('get', KEYS[k])
  if not c or less(c, ARGV[a]) then redis.call('set', KEYS[k], ARGV[a]) end
  return c or '0'
end

-- The fence register, or nil where this master lost its data: every master a daemon lets vote
-- holds one (seeded before it votes: src/lua/seed.lua), and only a FLUSHALL or a restart
-- without its data takes it away. A grant there must refuse and say so ({-2, ...}): it would
-- re-create the register and hide the loss while locks the master lost are still valid.
local function fence_of(k) return redis.call('get', KEYS[k]) end

-- The answer of a grant on a master that lost its data: {-2, 0, TIME}.
local function lost_data(t) return {-2, 0, t[1], t[2]} end

-- acquire's grant (KEYS: lock key, fence key, max-TTL key; ARGV: owner, ttl ms, proposed token):
-- SET NX PX (SET PX when `replace`: the key is a releasing owner's, handed over) and, when it
-- took, the fence and longest-TTL registers raised in the same step.
-- Returns {1, previous counter, TIME}, lost_data(t) without a fence register, or nil on a
-- refusal. `t` is the master's TIME.
local function grant(t, replace)
  local c = fence_of(2)
  if not c then return lost_data(t) end
  local set
  if replace then
    set = redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  else
    set = redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
  end
  if set then
    if less(c, ARGV[3]) then redis.call('set', KEYS[2], ARGV[3]) end
    raise(3, 2)
    return {1, c, t[1], t[2]}
  end
end
