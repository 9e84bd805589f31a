-- Shared (read) holds of a lock key K: the sorted set 'K readers', one member per reader owner,
-- scored by the master time (ms) at which that hold expires; 'K labels' maps a reader's owner to
-- its label. Both keys live as long as their longest member (R2). A member is removed by its
-- owner (R3) or purged once its time has passed; it is never re-created by an extension (R4).
-- While K has a live reader, K itself holds the readers' guard (guard_readers) until the last
-- of them ends, so that an exclusive SET NX of K, a LOCK's or a standard Redlock client's, is
-- refused by K alone: the exclusive grant, every LOCK's step, reads no reader set.
-- (live_readers and readers_pttl are in prelude.lua.)

-- Whether value `v` of a lock key is the readers' guard, not an exclusive holder's owner.
local function is_readers_guard(v) return v == 'redlockd:readers' end

-- Makes lock key K the readers' guard until the time of its reader that ends last (PXAT that
-- master time: no later reader is live past it, and the master's clock decides both), or takes
-- the guard out when no reader is live. It never touches K while K is an exclusive holder's:
-- that cannot be beside a live reader, but a reader's release after its time may find one.
-- Every script that adds, moves or removes a reader calls it, in the same step.
local function guard_readers(key, now)
  local v = redis.pcall('get', key) -- (a key of another type is not the guard either)
  if v and not is_readers_guard(v) then return end
  local top = redis.call('zrevrange', key .. ' readers', 0, 0, 'withscores')
  if top[2] and tonumber(top[2]) >= now then
    redis.call('set', key, 'redlockd:readers', 'PXAT', top[2])
  elseif v then
    redis.call('del', key)
  end
end

-- Drops the members whose time has passed, and their labels.
local function purge_readers(key, now)
  local set = key .. ' readers'
  local gone = redis.call('zrangebyscore', set, '-inf', '(' .. now)
  if #gone == 0 then return end
  redis.call('zremrangebyscore', set, '-inf', '(' .. now)
  if redis.call('pttl', key .. ' labels') ~= -2 then
    for i = 1, #gone, 1000 do -- unpack has a limit: in batches
      redis.call('hdel', key .. ' labels', unpack(gone, i, math.min(i + 999, #gone)))
    end
  end
end
