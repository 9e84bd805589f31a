--#include marks
-- unmark: every waiter of a daemon for a lock left without it (its WAIT ran out, its client
-- went): that daemon's entry leaves the lock's wait marker, so that it holds nobody back, and
-- so does the write intent its writers left ('K write-intent', acquire_wait.lua) while it is
-- theirs: readers would otherwise wait on a writer that is gone until the intent expires.
-- KEYS: wait marker, lock key. ARGV: the daemon's id. 1 if there was a marker, 0 if not.
local intent = KEYS[2] .. ' write-intent'
if redis.call('get', intent) == ARGV[1] then redis.call('del', intent) end
local m = redis.call('get', KEYS[1])
if not m then return 0 end
marks()
local now = ms(redis.call('time'))
local others, last = scan(m, now, ARGV[1])
put(KEYS[1], others, last, now)
return 1
