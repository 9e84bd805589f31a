-- hand_over: an UNLOCK that hands its lock to a waiter, in one step: release's step for the
-- releasing owner, then acquire's for the new one.
-- KEYS: lock key, fence key, max-TTL key. ARGV: owner, ttl ms, proposed token, releasing owner.
-- Answers as acquire does, with a fifth field as release answers for the releasing owner: 1 its
-- key was deleted (and the new owner's set in its place), 0 another owner holds it, -1 gone.
-- Where the lock key is gone and so is the fence key, the master lost its data: nothing is
-- granted (-1 as the first field) and the fence key is not created, so the loss still shows
-- (the daemon judges the -1 as an UNLOCK's, and a fence key missing at its next connection).
local t = redis.call('time')
local v = redis.call('get', KEYS[1])
local r = -1
if v == ARGV[4] then
  r = 1
  redis.call('del', KEYS[1])
elseif v then
  r = 0
elseif not redis.call('get', KEYS[2]) then
  return {-1, 0, t[1], t[2], r}
end
local granted = grant(t)
if granted then
  granted[5] = r
  return granted
end
return {0, redis.call('pttl', KEYS[1]), t[1], t[2], r}
