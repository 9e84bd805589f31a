--#include holds
--#include permit
-- permit_extend: EXTEND of a permit and its KEEP renewals; never re-creates it (R4).
-- KEYS: the semaphore's count key 'S permits', max-TTL key. ARGV: owner, ttl ms.
-- {1 set, 0 another owner, -1 gone; TIME}; an extension raises the longest-TTL record (R5).
local t = redis.call('time')
local n = permit_extend(string.sub(KEYS[1], 1, -9), ARGV[1], ARGV[2])
if n == 1 then raise(2, 2) end
return {n, t[1], t[2]}
