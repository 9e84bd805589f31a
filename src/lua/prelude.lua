-- The helpers every script of redlockd may use: the build puts this file before each script's
-- own text (cmake/embed_lua.cmake), so the text a master runs is prelude + the libraries the
-- script names with '--#include <name>' (src/lua/lib) + the script, less the helpers of the
-- first two that the script never calls (Lua would make them anew at every call).

-- Compares decimal counters without leading zeros exactly, as strings: Lua numbers are doubles
-- and would round counters above 2^53.
local function less(a, b) return #a < #b or (#a == #b and a < b) end

-- A decimal counter without leading zeros plus one, as a string (exact beyond 2^53).
local function plus_one(c)
  local i = #c
  while i > 0 and string.byte(c, i) == 57 do i = i - 1 end -- '9'
  if i == 0 then return '1' .. string.rep('0', #c) end
  return string.sub(c, 1, i - 1) .. string.char(string.byte(c, i) + 1) .. string.rep('0', #c - i)
end

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
-- Read once per call: a script that checks it before its grant, as hand_over does, pays one GET
-- (fence_k: the KEYS index read, fence_v: its value, false if absent). grant_by, which raises
-- it, keeps the copy current.
local fence_k, fence_v
local function fence_of(k)
  if fence_k ~= k then fence_k, fence_v = k, redis.call('get', KEYS[k]) or false end
  return fence_v or nil
end

-- The answer of a grant on a master that lost its data: {-2, 0, TIME}.
local function lost_data(t) return {-2, 0, t[1], t[2]} end

-- This master's TIME (redis.call('time')) in whole ms (exact: far below 2^53). Every deadline
-- of a shared hold is computed from it, never from a client's or a daemon's clock.
local function now_ms(t) return t[1] * 1000 + math.floor(t[2] / 1000) end

-- Shared (read) holds of lock key K are the members of the sorted set 'K readers', scored by the
-- master time (ms) at which each expires (src/lua/lib/readers.lua). Whether one is live at
-- `now`: a reader due exactly now still counts, so a writer never starts on its last ms.
local function live_readers(key, now)
  local set = key .. ' readers'
  return redis.call('pttl', set) ~= -2 and redis.call('zcount', set, now, '+inf') > 0
end

-- The longest time a live reader of K has left, in ms (0 without one).
local function readers_pttl(key, now)
  local top = redis.call('zrevrange', key .. ' readers', 0, 0, 'withscores')
  if top[2] and tonumber(top[2]) >= now then return tonumber(top[2]) - now end
  return 0
end

-- A grant's own bookkeeping, once the kind's step took the hold (R5): the fence register
-- KEYS[f], read before as `c`, is raised to the proposal (ARGV[3]) and the longest-TTL record
-- KEYS[m] to the TTL (ARGV[2]). Returns the grant's answer {1, previous counter, TIME}.
local function record_grant(t, c, f, m)
  if less(c, ARGV[3]) then
    redis.call('set', KEYS[f], ARGV[3])
    if fence_k == f then fence_v = ARGV[3] end
  end
  raise(m, 2)
  return {1, c, t[1], t[2]}
end

-- The grant of the kinds other than the exclusive lock, where the fence register KEYS[f] is:
-- `take()` is the kind's own step (true, or false and how long the holders keep it, in ms).
-- Returns record_grant's answer, lost_data(t) without a fence register, or nil and the
-- refusal's hint. `t` is the master's TIME.
local function grant_by(t, take, f, m)
  local c = fence_of(f)
  if not c then return lost_data(t) end
  local took, hint = take()
  if not took then return nil, hint end
  return record_grant(t, c, f, m)
end

-- The exclusive lock's grant (KEYS: lock key, fence key, max-TTL key; ARGV: the value (owner,
-- or owner ' ' label), ttl ms, proposed token): SET NX PX (SET PX when `replace`: the key is a
-- releasing owner's, handed over), refused while the key is held: by an exclusive holder, or by
-- live readers, whose guard it then is (lib/readers.lua). Answers as grant_by does. It is every
-- LOCK's step, so it is written out rather than made of grant_by and lost_data: a master makes
-- each function a script's text holds anew at every call, about 0.5k-1k instructions each
-- (bench/script_cost.py). acquire.lua, the try-lock's attempt, writes this step out once more
-- without any function; a change here goes there too (the script test "acquire decides as
-- acquire_wait's grant does" compares the two).
local function grant(t, replace)
  local c = fence_of(2)
  if not c then return {-2, 0, t[1], t[2]} end
  local set
  if replace then
    set = redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  else
    set = redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
  end
  if not set then return nil, redis.call('pttl', KEYS[1]) end
  return record_grant(t, c, 2, 3)
end
