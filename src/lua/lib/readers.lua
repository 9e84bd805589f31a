-- Shared (read) holds of a lock key K: the sorted set 'K readers', one member per reader owner,
-- scored by the master time (ms) at which that hold expires; 'K labels' maps a reader's owner to
-- its label. Both keys live as long as their longest member (R2). A member is removed by its
-- owner (R3) or purged once its time has passed; it is never re-created by an extension (R4).
-- (live_readers and readers_pttl, which the exclusive grant needs too, are in prelude.lua.)

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
