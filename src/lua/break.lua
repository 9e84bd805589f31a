-- break: BREAK's step on one master: ends every hold of a resource whatever its owner.
-- KEYS: lock key, fence key, wait marker. ARGV: the wake channel.
-- 1 if a hold was ended, 0 if there was none. An exclusive hold is the lock key itself; the
-- other kinds' keys (`K <suffix>`, DESIGN section 2) are to be deleted here as well.
-- Where a hold was ended the fence register is raised by one (never created: a master missing
-- it lost its data, and that must still show), so the tokens keep rising past the broken hold's,
-- and other daemons' waiters for the lock are woken as a release wakes them.
local ended = redis.call('del', KEYS[1])
if ended == 0 then return 0 end
if redis.call('exists', KEYS[2]) == 1 then redis.call('incr', KEYS[2]) end
if redis.call('exists', KEYS[3]) == 1 then redis.call('publish', ARGV[1], KEYS[1]) end
return 1
