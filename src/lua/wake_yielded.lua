--#include marks
-- wake_yielded: a WAIT's head of a kind that others may join (a reader, a permit) was granted,
-- and other daemons' heads that yielded their turn to it (a later ticket) sleep until about
-- its entry's end, though they could go in beside it now: they are woken as by a release (the
-- message is the lock key). The daemon sends it once a majority granted, and only where a
-- granting master reported another daemon's head: a wake from each master's grant woke heads
-- whose attempts then failed on the other masters and woke back (the simulator's work checker).
-- KEYS: wait marker, lock key. ARGV: the daemon's id, the granted head's ticket, the wake
-- channel. 1 if it published, 0 if not.
local m = redis.call('get', KEYS[1])
if not m then return 0 end
marks()
local others = scan(m, now_ms(redis.call('time')), ARGV[1])
if others == '' or not yielded_to(others, ARGV[2], ARGV[1]) then return 0 end
redis.pcall('publish', ARGV[3], KEYS[2])
return 1
