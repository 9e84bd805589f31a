--#include holds
--#include readers
--#include shared
-- shared_extend: EXTEND of a shared hold and its KEEP renewals; never re-creates it (R4).
-- KEYS: lock key, max-TTL key. ARGV: owner, ttl ms. {1 set, -1 gone; TIME}; an extension raises
-- the longest-TTL record (R5).
local t = redis.call('time')
local n = shared_extend(KEYS[1], ARGV[1], ARGV[2], now_ms(t))
if n == 1 then raise(2, 2) end
return {n, t[1], t[2]}
