--#include holds
--#include multi
-- multi_acquire: an MLOCK's attempt on one master (lib/multi.lua), all members or none.
-- KEYS: fence key, max-TTL key, the member lock keys. ARGV: owner, ttl ms, proposed token, label
-- ('' none). Granted: {1, previous counter, TIME}. Refused: {0, the longest time a held member
-- has left, TIME}. Without a fence register: {-2, 0, TIME}.
local t = redis.call('time')
local granted, hint = grant_by(t, function()
  return multi_acquire({unpack(KEYS, 3)}, value_of(ARGV[1], ARGV[4]), ARGV[2], now_ms(t))
end, 1, 2)
if granted then return granted end
return {0, hint, t[1], t[2]}
