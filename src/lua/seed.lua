-- seed: the quarantine of a master that may have lost data, in two steps on it.
-- KEYS: fence key, max-TTL key, this daemon's quarantine mark. ARGV: the fleet's fence, the
-- fleet's longest TTL, the step ('mark' or 'seed'), the mark's life in ms.
-- 'mark', when the quarantine starts and at each reconnection during it: sets the mark and
-- answers 1 if it was there already, 0 if not (first set, or the master lost its data since).
-- 'seed', when the quarantine is over: re-seeds the master with what a majority of the others
-- hold and takes the mark out (1), unless the mark is gone (0): the master lost its data again
-- during the quarantine (a FLUSHALL leaves no other trace once a fence key was re-created), so
-- the quarantine must start over. The fence key itself is never touched before the seed: a
-- missing fence key is how other daemons see the loss.
if ARGV[3] == 'mark' then
  local had = redis.call('get', KEYS[3])
  redis.call('set', KEYS[3], '1', 'PX', ARGV[4])
  if had then return 1 end
  return 0
end
if not redis.call('get', KEYS[3]) then return 0 end
raise(1, 1)
raise(2, 2)
redis.call('del', KEYS[3])
return 1
