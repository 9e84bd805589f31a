--#include marks
-- unmark: every waiter of a daemon for a lock left without it (its WAIT ran out, its client
-- went): that daemon's entry leaves the lock's wait marker, so that it holds nobody back, and
-- so does the write intent its writers left ('K write-intent', acquire_wait.lua) while it is
-- theirs: readers would otherwise wait on a writer that is gone until the intent expires.
-- Other daemons' heads the intent refused sleep on its time left, and those that yielded their
-- turn to this daemon's entry (a later ticket) sleep on that entry's: with the wake channel given, they are
-- woken as by a release (the message is the lock key). (A permit's head that yielded slept
-- the longest permit's time past a free slot: simulator seed 72699.)
-- KEYS: wait marker, lock key. ARGV: the daemon's id, the wake channel (optional).
-- 1 if there was a marker, 0 if not.
local intent = KEYS[2] .. ' write-intent'
local dropped = redis.call('get', intent) == ARGV[1]
if dropped then redis.call('del', intent) end
local m = redis.call('get', KEYS[1])
if not m then return 0 end
marks()
local now = now_ms(redis.call('time'))
local others, last, mine = scan(m, now, ARGV[1])
put(KEYS[1], others, last, now)
if ARGV[2] and others ~= '' and
    (dropped or (type(mine) == 'string' and yielded_to(others, mine, ARGV[1]))) then
  redis.pcall('publish', ARGV[2], KEYS[2])
end
return 1
