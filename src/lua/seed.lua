-- seed: the quarantine of a master that may have lost data, in steps on it.
-- KEYS: fence key, max-TTL key, this daemon's quarantine mark. ARGV: the fleet's fence, the
-- fleet's longest TTL, the step ('mark', 'remark' or 'seed'), the mark's life in ms.
-- 'mark', when the quarantine starts (until its first answer): sets the mark and answers 1 if it
-- was there already, 0 if not (first set, or the master lost its data since).
-- 'remark', at each reconnection once the mark was set: answers 1 and sets it again if it is
-- still there; if it is gone (the master lost its data since), answers 0 and leaves it 'lost',
-- so that an answer lost with the connection is not lost with it: the next 'remark' answers 0
-- again and the seed refuses, until the new quarantine's 'mark'. (A 'mark' here re-created a
-- vanished mark, and after a lost answer the next one found it there: nothing seemed lost.)
-- 'seed', when the quarantine is over: re-seeds the master with what a majority of the others
-- hold and takes the mark out (1), unless the mark is gone or 'lost' (0): the master lost its
-- data again during the quarantine (a FLUSHALL leaves no other trace once a fence key was
-- re-created), so the quarantine must start over. The fence key itself is never touched before
-- the seed: a missing fence key is how other daemons see the loss.
local had = redis.call('get', KEYS[3])
if ARGV[3] == 'mark' then
  redis.call('set', KEYS[3], '1', 'PX', ARGV[4])
  if had then return 1 end
  return 0
end
if ARGV[3] == 'remark' then
  if had == '1' then
    redis.call('set', KEYS[3], '1', 'PX', ARGV[4])
    return 1
  end
  redis.call('set', KEYS[3], 'lost', 'PX', ARGV[4])
  return 0
end
if had ~= '1' then return 0 end
raise(1, 1)
raise(2, 2)
redis.call('del', KEYS[3])
return 1
