-- acquire: LOCK's attempt on one master.
-- KEYS: lock key, fence key. ARGV: the value (owner, or owner ' ' label), ttl ms, proposed token.
-- Granted: {1, previous counter, TIME}. Refused: {0, remaining TTL of the holder in ms (or of
-- the shared holders that keep it: the key is then their guard, lib/readers.lua), TIME}.
-- Without a fence register (the master lost its data): {-2, 0, TIME}, nothing granted.
-- TIME (seconds, microseconds) lets the daemon see a master's clock jump at every vote. A grant
-- also raises the master's record of the longest TTL, in the same step: every master that holds
-- a lock knows how long a restarted master must sit out for it. The record's key is the fence
-- key's name and ':max_ttl' (register_keys), made here: a key passed costs a master about 1.5k
-- instructions per call.
-- This is grant (prelude.lua) written out, without a function: a master makes every function of
-- a script anew at each call, and this one runs for every LOCK (with grant, record_grant,
-- fence_of, raise and less it cost 76k instructions, 1.09x the acquire of 20fd7e2 before the lock
-- family; written out 68k, 0.97x: bench/script_cost.py). The script test "acquire decides as
-- acquire_wait's grant does ..." holds the two to the same answers and writes.
local t = redis.call('time')
local c = redis.call('get', KEYS[2]) -- the fence register (see fence_of)
if not c then return {-2, 0, t[1], t[2]} end
if not redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {0, redis.call('pttl', KEYS[1]), t[1], t[2]}
end
-- record_grant: the fence register and the longest-TTL record raised (decimal strings, compared
-- as less does).
local proposal = ARGV[3]
if #c < #proposal or (#c == #proposal and c < proposal) then
  redis.call('set', KEYS[2], proposal)
end
local record = KEYS[2] .. ':max_ttl'
local longest, ttl = redis.call('get', record), ARGV[2]
if not longest or #longest < #ttl or (#longest == #ttl and longest < ttl) then
  redis.call('set', record, ttl)
end
return {1, c, t[1], t[2]}
