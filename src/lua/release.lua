--#include marks
-- release: UNLOCK, and the releases nobody waits for (failed attempts, KEEP ends).
-- KEYS: lock key, wait marker. ARGV: owner, wake channel, the releasing daemon's id, '1' when
-- this releases a lock that was granted ('0': an attempt that never was), slack ms.
-- 1 if deleted, 0 if the key holds another owner, -1 if it is gone (the daemon tells a lost key
-- from a lock taken over by someone else). When it deleted a granted lock and another daemon's
-- head waits for it here, that head is woken (wake in lib/marks.lua: the lock key is published on
-- the wake channel, every daemon's head tries again at once). With no marker, or only the
-- releasing daemon's own entry (its waiters learn of its releases without the masters), nothing
-- is published; nor for an attempt that was never granted: waking anyone for it would only
-- start more such attempts.
local v = redis.call('get', KEYS[1])
if v ~= ARGV[1] then
  if v then return 0 end
  return -1
end
redis.call('del', KEYS[1])
if ARGV[4] == '1' then
  local m = redis.call('get', KEYS[2])
  if m then
    marks()
    wake(KEYS[2], m, ARGV[3], ARGV[2], ARGV[5])
  end
end
return 1
