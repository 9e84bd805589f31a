--#include holds
--#include readers
--#include shared
-- shared_acquire: a LOCK ... SHARED's attempt on one master (lib/shared.lua).
-- KEYS: lock key, fence key, max-TTL key. ARGV: owner, ttl ms, proposed token, label ('' none).
-- Granted: {1, previous counter, TIME}, with the fence and longest-TTL registers raised in the
-- same step (R5). Refused: {0, ms the exclusive holder or the waiting writer's mark has left,
-- TIME}.
local t = redis.call('time')
if not fence_of(2) then return lost_data(t) end -- the master lost its data (prelude.lua)
local ok, left = shared_acquire(KEYS[1], ARGV[1], ARGV[2], ARGV[4], now_ms(t))
if not ok then return {0, left, t[1], t[2]} end
local c = raise(2, 3)
raise(3, 2)
return {1, c, t[1], t[2]}
