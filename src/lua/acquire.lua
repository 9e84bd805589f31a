-- acquire: LOCK's attempt on one master.
-- KEYS: lock key, fence key, max-TTL key. ARGV: the value (owner, or owner ' ' label), ttl ms,
-- proposed token.
-- Granted: {1, previous counter, TIME}. Refused: {0, remaining TTL of the holder in ms (or of
-- the shared holders that keep it), TIME}.
-- Without a fence register (the master lost its data): {-2, 0, TIME}, nothing granted.
-- TIME (seconds, microseconds) lets the daemon see a master's clock jump at every vote. A grant
-- also raises the master's record of the longest TTL, in the same step: every master that holds
-- a lock knows how long a restarted master must sit out for it.
-- This is grant (prelude.lua) written out, without a function: a master makes every function of
-- a script anew at each call, and this one runs for every LOCK (with grant, record_grant,
-- fence_of, raise and less it cost 76k instructions, 1.09x the acquire of 20fd7e2 before the lock
-- family; written out 68k, 0.97x: bench/script_cost.py). The script test "acquire decides as
-- acquire_wait's grant does ..." holds the two to the same answers and writes.
local t = redis.call('time')
local c = redis.call('get', KEYS[2]) -- the fence register (see fence_of)
if not c then return {-2, 0, t[1], t[2]} end
local key = KEYS[1]
local readers = key .. ' readers' -- live readers refuse it (as in grant)
if redis.call('pttl', readers) ~= -2 then
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  local top = redis.call('zrevrange', readers, 0, 0, 'withscores')
  if top[2] and tonumber(top[2]) >= now then return {0, tonumber(top[2]) - now, t[1], t[2]} end
end
if not redis.call('set', key, ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0, redis.call('pttl', key), t[1], t[2]}
end
-- record_grant: the fence register and the longest-TTL record raised (decimal strings, compared
-- as less does).
local proposal = ARGV[3]
if #c < #proposal or (#c == #proposal and c < proposal) then
  redis.call('set', KEYS[2], proposal)
end
local longest, ttl = redis.call('get', KEYS[3]), ARGV[2]
if not longest or #longest < #ttl or (#longest == #ttl and longest < ttl) then
  redis.call('set', KEYS[3], ttl)
end
return {1, c, t[1], t[2]}
