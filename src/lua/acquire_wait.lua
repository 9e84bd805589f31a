-- acquire_wait: the attempt of a LOCK ... WAIT. acquire, and a refusal also marks, for as long as
-- the waiter waits (the longest of every daemon's waiters), who waits for this lock: the
-- daemon's id, or '*' once waiters of two daemons marked it. A release through any other daemon
-- then publishes a wake-up (release.lua).
-- KEYS: lock key, fence key, max-TTL key, wait marker. ARGV: owner, ttl ms, proposed token, ms
-- the waiter still waits, the waiting daemon's id. Answers as acquire does.
local t = redis.call('time')
local granted = grant(t)
if granted then return granted end
local m = redis.call('get', KEYS[4])
if m and m ~= ARGV[5] then m = '*' else m = ARGV[5] end
local p = math.max(redis.call('pttl', KEYS[4]), tonumber(ARGV[4]))
redis.call('set', KEYS[4], m, 'PX', p)
return {0, redis.call('pttl', KEYS[1]), t[1], t[2]}
