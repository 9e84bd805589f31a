--#include marks
--#include holds
--#include permit
-- permit_acquire: a LOCK ... PERMITS n's attempt on one master (lib/permit.lua).
-- KEYS: the semaphore's count key 'S permits' (the semaphore's name in the daemon and on the
-- wake channel), fence key, max-TTL key, and for a WAIT's attempt the wait mark.
-- ARGV: owner (slot 000), ttl ms, proposed token, then for a WAIT's attempt acquire_wait's five
-- more (ms the waiter still waits, the daemon's id, its ticket, slack ms, the ms the next waiter
-- still waits), then n, the slot to try first ('-1': a check only, below), the label ('' none).
-- Always six fields: {status, counter or hint, TIME, the largest ticket of another daemon
-- waiting here ('0' for a plain attempt), the slot}. Granted: status 1, the counter before this
-- grant, the slot taken. All n held: status 0 and the shortest TTL among the slots (a WAIT's
-- attempt takes its turn among the daemons' waiters as acquire_wait does). Another n is in
-- force: status 2 and that n. Without a fence register: status -2.
local waiting = #KEYS == 4
local x = waiting and 9 or 4
local n, first, label = ARGV[x], ARGV[x + 1], ARGV[x + 2]
local semaphore = string.sub(KEYS[1], 1, -9) -- 'S permits' without ' permits'
local t = redis.call('time')
local stored = redis.call('get', KEYS[1])
if stored and stored ~= n then return {2, stored, t[1], t[2], '0', -1} end
-- The first slot '-1': a check only (a try-lock behind the daemon's waiters of another n): the
-- n in force was not another, and nothing is taken.
if first == '-1' then
  if not redis.call('get', KEYS[2]) then return {-2, 0, t[1], t[2], '0', -1} end -- lost its data
  return {0, 0, t[1], t[2], '0', -1}
end
local slot = -1
local function try(t)
  return grant_by(t, function()
    local taken, shortest = permit_acquire(semaphore, ARGV[1], ARGV[2], label, n, first)
    if not taken then return false, shortest end
    slot = taken
    return true
  end, 2, 3)
end
local answer
if waiting then
  -- For a head that yields its turn: how long all n slots stay held here, the shortest slot's
  -- time (below 1: a slot is free, and only the older head's turn keeps it out: it looks again
  -- after the slack). Not the count key's time, which lasts as long as the longest permit: on it
  -- a head slept past a free slot (simulator seed 120224).
  local function slots_left()
    local shortest = -1
    for i = 0, tonumber(n) - 1 do
      local left = redis.call('pttl', slot_key(semaphore, i))
      if left == -2 then return 0 end
      if shortest < 0 or (left >= 0 and left < shortest) then shortest = left end
    end
    return shortest
  end
  answer = wait_turn(t, false, 8, try, false, slots_left, true)
else
  local hint
  answer, hint = try(t)
  answer = answer or {0, hint, t[1], t[2]}
  answer[5] = '0'
end
answer[6] = slot
return answer
