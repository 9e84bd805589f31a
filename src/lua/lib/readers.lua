-- Shared (read) holds of a lock key K: the sorted set 'K readers', one member per reader owner,
-- scored by the master time (ms) at which that hold expires; 'K labels' maps a reader's owner to
-- its label. Both keys live as long as their longest member (R2). A member is removed by its
-- owner (R3) or purged once its time has passed; it is never re-created by an extension (R4).

-- Whether a live reader holds K at master time `now`. A reader due exactly now still counts, so
-- a writer never starts on the last millisecond of a reader.
local function live_readers(key, now)
  local set = key .. ' readers'
  return redis.call('exists', set) == 1 and redis.call('zcount', set, now, '+inf') > 0
end

-- The longest time a live reader of K has left, in ms (0 without one).
local function readers_pttl(key, now)
  local top = redis.call('zrevrange', key .. ' readers', 0, 0, 'withscores')
  if top[2] and tonumber(top[2]) >= now then return tonumber(top[2]) - now end
  return 0
end

-- Drops the members whose time has passed, and their labels.
local function purge_readers(key, now)
  local set = key .. ' readers'
  local gone = redis.call('zrangebyscore', set, '-inf', '(' .. now)
  if #gone == 0 then return end
  redis.call('zremrangebyscore', set, '-inf', '(' .. now)
  if redis.call('exists', key .. ' labels') == 1 then
    for i = 1, #gone, 1000 do -- unpack has a limit: in batches
      redis.call('hdel', key .. ' labels', unpack(gone, i, math.min(i + 999, #gone)))
    end
  end
end
