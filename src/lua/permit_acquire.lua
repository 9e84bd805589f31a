--#include holds
--#include permit
-- permit_acquire: a LOCK ... PERMITS n's attempt on one master (lib/permit.lua).
-- KEYS: semaphore key, fence key, max-TTL key. ARGV: owner (slot 000), ttl ms, proposed token,
-- n, the slot to try first, label ('' none).
-- Granted: {1, previous counter, TIME, slot}. All n held: {0, the shortest TTL among them,
-- TIME}. Another n is in force: {2, that n, TIME}.
local t = redis.call('time')
if not fence_of(2) then return lost_data(t) end -- the master lost its data (prelude.lua)
local slot, shortest, stored = permit_acquire(KEYS[1], ARGV[1], ARGV[2], ARGV[6], ARGV[4], ARGV[5])
if stored then return {2, stored, t[1], t[2]} end
if not slot then return {0, shortest, t[1], t[2]} end
local c = raise(2, 3)
raise(3, 2)
return {1, c, t[1], t[2], slot}
