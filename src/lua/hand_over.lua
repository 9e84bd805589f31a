--#include marks
-- hand_over: an UNLOCK that hands its lock to this daemon's head waiter, in one step: release's
-- step for the releasing owner, then acquire_wait's for the waiter.
-- KEYS: lock key, fence key, max-TTL key, wait marker. ARGV: acquire_wait's (owner, ttl ms,
-- proposed token, ms the waiter still waits, the daemon's id, the waiter's ticket, slack ms),
-- then the releasing owner and the wake channel.
-- Answers as acquire_wait does, with release's answer for the releasing owner as the fifth field
-- (1 its key was deleted, 0 another owner holds it, -1 gone) and the largest ticket of another
-- daemon waiting here as the sixth. Where another daemon's head with an earlier ticket waits,
-- the waiter is refused: the lock is released plainly and that head is woken (wake). Where the
-- lock key is gone and so is the fence key, the master lost its data: nothing is granted (-1 as
-- the first field) and the fence key is not created, so the loss still shows (the daemon judges
-- the -1 as an UNLOCK's, and a fence key missing at its next connection).
local t = redis.call('time')
local v = redis.call('get', KEYS[1])
local r = -1
if v == ARGV[8] then
  r = 1
elseif v then
  r = 0
elseif not redis.call('get', KEYS[2]) then
  return {-1, 0, t[1], t[2], r, '0'}
end
local answer = wait_turn(t, r == 1)
answer[6] = answer[5]
answer[5] = r
if answer[1] == 0 and r == 1 then
  -- it yields to another daemon's older head (marks() was made by wait_turn)
  wake(KEYS[4], redis.call('get', KEYS[4]), ARGV[5], ARGV[9], ARGV[7])
end
return answer
