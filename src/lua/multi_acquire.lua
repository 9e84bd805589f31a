--#include holds
--#include readers
--#include multi
-- multi_acquire: an MLOCK's attempt on one master (lib/multi.lua), all members or none.
-- KEYS: fence key, max-TTL key, the member lock keys. ARGV: owner, ttl ms, proposed token, label
-- ('' none). Granted: {1, previous counter, TIME}. Refused: {0, the longest time a held member
-- has left, TIME}.
local t = redis.call('time')
if not fence_of(1) then return lost_data(t) end -- the master lost its data (prelude.lua)
local members = {unpack(KEYS, 3)}
local ok, left = multi_acquire(members, value_of(ARGV[1], ARGV[4]), ARGV[2], now_ms(t))
if not ok then return {0, left, t[1], t[2]} end
local c = raise(1, 3)
raise(2, 2)
return {1, c, t[1], t[2]}
