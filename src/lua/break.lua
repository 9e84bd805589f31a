-- break: BREAK's step on one master: ends every hold of a resource whatever its owner.
-- KEYS: lock key, fence key, wait marker. ARGV: the wake channel.
-- 1 if a hold was ended, 0 if there was none. The holds of resource K are the lock key K (an
-- exclusive lock, a set's member, or the readers' guard), its live shared holders ('K readers',
-- with 'K labels' and a writer's 'K write-intent'), and the permits of the semaphore K
-- ('K permit:<i>', counted in 'K permits').
-- Where a hold was ended the fence register is raised by one (never created: a master missing
-- it lost its data, and that must still show), so the tokens keep rising past the broken hold's,
-- and other daemons' waiters are woken as a release wakes them (pcall: without the channel in
-- the ACL they wake on their timers). Only GET, SET, DEL, PUBLISH and, where shared holders
-- exist, ZCOUNT: the ACL docs/security.md lists.
local key = KEYS[1]
local now = now_ms(redis.call('time'))
local lock_ended = redis.call('del', key) == 1
local readers_ended = live_readers(key, now)
redis.call('del', key .. ' readers', key .. ' labels', key .. ' write-intent')
local permits_ended = false
local n = redis.call('get', key .. ' permits')
if n then
  for i = 0, tonumber(n) - 1 do
    if redis.call('del', key .. ' permit:' .. i) == 1 then permits_ended = true end
  end
  redis.call('del', key .. ' permits')
end
if not (lock_ended or readers_ended or permits_ended) then return 0 end
local c = redis.call('get', KEYS[2])
if c then redis.call('set', KEYS[2], plus_one(c)) end
if (lock_ended or readers_ended) and redis.call('get', KEYS[3]) then
  redis.pcall('publish', ARGV[1], key)
end
if permits_ended and redis.call('get', KEYS[3] .. ' permits') then
  redis.pcall('publish', ARGV[1], key .. ' permits')
end
return 1
