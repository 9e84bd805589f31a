--#include marks
--#include holds
--#include permit
-- permit_release: ends a permit (UNLOCK of a permit owner; KEEP ends; a failed attempt).
-- KEYS: the semaphore's count key 'S permits', its wait marker. ARGV: as release.lua's (owner,
-- and for a permit that was granted the releasing daemon's wake, '' otherwise), then n for the
-- cleanup of an attempt whose slot on this master is unknown ('' otherwise).
-- 1 released, 0 the slot holds another owner, -1 gone; the attempt's cleanup deletes that
-- attempt's holds on any slot and answers how many. A granted permit's release (or that of an
-- attempt that held a majority: a wake in ARGV[2]) wakes another daemon's head waiting for the
-- semaphore, as release.lua wakes (a slot is free now).
local semaphore = string.sub(KEYS[1], 1, -9)
local attempt = ARGV[3] and ARGV[3] ~= ''
local released
if attempt then
  released = permit_release_attempt(semaphore, ARGV[1], ARGV[3])
else
  released = permit_release(semaphore, ARGV[1])
end
if (released == 1 or (attempt and released > 0)) and (ARGV[2] or '') ~= '' then
  local m = redis.call('get', KEYS[2])
  if m then
    marks()
    wake_released(KEYS[2], m)
  end
end
return released
