--#include marks
-- release: UNLOCK, and the releases nobody waits for (failed attempts, KEEP ends).
-- KEYS: lock key, wait marker. ARGV: owner; for a lock that was granted, the wake of the
-- releasing daemon, '<daemon id> <slack ms> <wake channel>' ('' for an attempt that never was).
-- 1 if deleted, 0 if the key holds another owner, -1 if it is gone (the daemon tells a lost key
-- from a lock taken over by someone else). When it deleted a granted lock and another daemon's
-- head waits for it here, that head is woken (wake in lib/marks.lua: the lock key is published on
-- the wake channel, every daemon's head tries again at once). With no marker, or only the
-- releasing daemon's own entry (its waiters learn of its releases without the masters), nothing
-- is published; nor for an attempt that was never granted: waking anyone for it would only
-- start more such attempts.
-- The owner is the value's first 40 bytes: a LABEL follows it (' ' and the label).
-- Every UNLOCK runs it, so what it needs without a wait mark comes before the helpers: a master
-- makes them (about 8k instructions, bench/script_cost.py) only when it reaches them.
local v = redis.call('get', KEYS[1])
if not v or (v ~= ARGV[1] and string.sub(v, 1, 40) ~= ARGV[1]) then
  -- (Readers' guard, lib/readers.lua: the owner's key is gone, as key-loss detection must hear.)
  if v and v ~= 'redlockd:readers' then return 0 end
  return -1
end
redis.call('del', KEYS[1])
if (ARGV[2] or '') == '' then return 1 end
local m = redis.call('get', KEYS[2])
if not m then return 1 end
--#helpers
marks()
wake_released(KEYS[2], m)
return 1
