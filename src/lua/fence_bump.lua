-- fence_bump: a LOCK's second round when a granting master had seen its proposal or more.
-- KEYS: fence key. ARGV: proposed token. Stores max(counter, token), returns the previous
-- counter; -2 where the register is gone (the master lost its data: it is not re-created, so
-- that the loss still shows).
local c = fence_of(1)
if not c then return -2 end
if less(c, ARGV[1]) then redis.call('set', KEYS[1], ARGV[1]) end
return c
