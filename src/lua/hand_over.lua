-- hand_over: an UNLOCK that hands its lock to a waiter, in one step.
-- KEYS: lock key, fence key, max-TTL key. ARGV: owner, ttl ms, proposed token, releasing owner.
-- Where the key still holds the releasing owner it gets the new owner and TTL; where it is absent
-- it is set as acquire sets it; elsewhere the new owner is refused. Answers as acquire does, with
-- a fifth field as release answers for the releasing owner: 1 its key was replaced, 0 another
-- owner holds it, -1 gone.
local t = redis.call('time')
local v = redis.call('get', KEYS[1])
local r = -1
if v == ARGV[4] then
  r = 1
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
elseif v then
  r = 0
end
if r == 1 or redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local c = raise(2, 3)
  raise(3, 2)
  return {1, c, t[1], t[2], r}
end
return {0, redis.call('pttl', KEYS[1]), t[1], t[2], r}
