--#include holds
--#include multi
-- multi_extend: MEXTEND and the KEEP renewals of a set; never re-creates a member (R4).
-- KEYS: max-TTL key, the member lock keys. ARGV: owner, ttl ms. {1 every member set, 0 another
-- owner holds one, -1 one is gone; TIME}; extending any member raises the longest-TTL record
-- (R5).
local t = redis.call('time')
local n, extended = multi_extend({unpack(KEYS, 2)}, ARGV[1], ARGV[2])
if extended > 0 then raise(1, 2) end
return {n, t[1], t[2]}
