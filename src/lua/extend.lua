-- extend: EXTEND and KEEP renewals. Never re-creates a key that is gone.
-- KEYS: lock key, max-TTL key. ARGV: owner, ttl ms.
-- {1 if the TTL was set, 0 if another owner holds the key, -1 if it is gone, TIME}. An extension
-- raises the longest-TTL record as a grant does.
local t = redis.call('time')
local v = redis.call('get', KEYS[1])
local n = -1
-- The owner is the value's first 40 bytes: a LABEL follows it (' ' and the label).
-- Readers' guard (lib/readers.lua): the owner's key is gone, as key-loss detection must hear.
if v and string.sub(v, 1, 40) == ARGV[1] then
  n = redis.call('pexpire', KEYS[1], ARGV[2])
elseif v and v ~= 'redlockd:readers' then
  n = 0
end
if n == 1 then raise(2, 2) end
return {n, t[1], t[2]}
