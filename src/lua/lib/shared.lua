-- A shared (read) hold: a member of 'K readers' (readers.lua), with K the readers' guard. It
-- conflicts only with an exclusive hold of K (the plain key K holding an owner, also an MLOCK
-- member's) and, for new readers, with a writer that waits ('K write-intent'), so that a stream
-- of readers cannot starve it.

-- Takes a shared hold for `owner` until now + ttl. Refused while K is held exclusively or a
-- writer waits: returns false and the ms that holder has left (-1: no TTL), or the ms until the
-- waiting writer can get in: when the readers now in are gone (0: at once), at the latest when
-- its intent ends. Not the intent's whole life: the writer's grant takes the intent out and
-- wakes nobody, so a reader asleep until then holds every head that yields to it back
-- (simulator seed 101660: 1.8 s on a free lock).
local function shared_acquire(key, owner, ttl, label, now)
  local v = redis.pcall('get', key) -- (a key of another type: an error, held by someone else)
  if v and not is_readers_guard(v) then return false, redis.call('pttl', key) end
  local intent = redis.call('pttl', key .. ' write-intent')
  if intent ~= -2 then return false, math.min(intent, readers_pttl(key, now)) end
  purge_readers(key, now)
  redis.call('zadd', key .. ' readers', now + tonumber(ttl), owner)
  raise_ttl(key .. ' readers', ttl)
  guard_readers(key, now)
  if label ~= '' then
    redis.call('hset', key .. ' labels', owner, label)
    raise_ttl(key .. ' labels', ttl)
  end
  return true
end

-- Whether `owner` is a live reader of K whose guard is not there: this master lost the guard
-- alone (an operator's DEL, an eviction), so an exclusive SET NX may have got in beside the
-- reader, or an exclusive holder was granted once the guard expired and a clock set back here
-- makes the reader's time look live again. Such a hold is gone: answered -1, the daemon judges
-- the loss as for a reader's own member lost (quarantined:keyloss), where a silent answer would
-- tell no daemon of it.
local function unguarded_reader(key, score, now)
  return score and tonumber(score) >= now and not is_readers_guard(redis.pcall('get', key))
end

-- Ends `owner`'s shared hold: 1 if it was there, -1 if it is gone (expired, never taken, or
-- unguarded); whether a hold was removed (an unguarded one is, and is answered -1); and its
-- time (score) before it was removed, nil if none. The
-- guard follows the readers left: a writer gets in when they are gone, not at the time of the
-- reader that left.
local function shared_release(key, owner, now)
  local score = redis.call('zscore', key .. ' readers', owner)
  local unguarded = unguarded_reader(key, score, now)
  local removed = redis.call('zrem', key .. ' readers', owner)
  redis.call('hdel', key .. ' labels', owner)
  if redis.call('zcard', key .. ' readers') == 0 then
    redis.call('del', key .. ' readers', key .. ' labels')
  end
  guard_readers(key, now)
  if removed == 1 and not unguarded then return 1, true, score end
  return -1, removed == 1, score
end

-- Moves `owner`'s expiry to now + ttl if its hold is still live; never re-creates it (R4).
-- 1 if set, -1 if gone. An unguarded one is not extended, but its guard is set again (as any
-- reader's step does): the daemon that hears -1 stops counting this master, the others do not,
-- and their writers must be refused here again (a review: the window stayed open until the
-- reader's time ran out).
local function shared_extend(key, owner, ttl, now)
  local score = redis.call('zscore', key .. ' readers', owner)
  if not score or tonumber(score) < now then return -1 end
  if unguarded_reader(key, score, now) then
    guard_readers(key, now)
    return -1
  end
  redis.call('zadd', key .. ' readers', 'XX', now + tonumber(ttl), owner)
  raise_ttl(key .. ' readers', ttl)
  guard_readers(key, now)
  if redis.call('hexists', key .. ' labels', owner) == 1 then raise_ttl(key .. ' labels', ttl) end
  return 1
end
