--#include marks
-- hand_over: an UNLOCK that hands its lock to this daemon's head waiter, in one step: release's
-- step for the releasing owner, then acquire_wait's for the waiter.
-- KEYS: lock key, fence key, max-TTL key, wait marker. ARGV: acquire_wait's first seven (owner,
-- ttl ms, proposed token, ms the waiter still waits, the daemon's id, the waiter's ticket, slack
-- ms), the releasing owner, the wake channel, then acquire_wait's eighth (the ms the next waiter
-- behind this one still waits).
-- Answers as acquire_wait does, with release's answer for the releasing owner as the fifth field
-- (1 its key was deleted, 0 another owner holds it, -1 gone) and the largest ticket of another
-- daemon waiting here as the sixth. Where another daemon's head with an earlier ticket waits,
-- the waiter is refused: the lock is released plainly and that head is woken (wake). Where the
-- fence register is gone, the master lost its data: nothing is granted (-2 as the first field),
-- the register is not re-created, so the loss still shows (the daemon quarantines the master),
-- and the releasing owner's key, if there, goes as an UNLOCK's would.
local t = redis.call('time')
local v = redis.call('get', KEYS[1])
local r = -1
-- The owner is the value's first 40 bytes: a LABEL follows it (' ' and the label).
if v and string.sub(v, 1, 40) == ARGV[8] then
  r = 1
elseif v and v ~= 'redlockd:readers' then -- (the readers' guard: the owner's key is gone)
  r = 0
end
if not fence_of(2) then
  if r == 1 then redis.call('del', KEYS[1]) end
  return {-2, 0, t[1], t[2], r, '0'}
end
-- (m: the mark's text now; alone: it is this daemon's entry only, and marks() was not made)
local answer, m, alone = wait_turn(t, r == 1, 10)
answer[6] = answer[5]
answer[5] = r
if m and not alone then -- (marks() was made by wait_turn)
  if answer[1] == 0 and r ~= 0 then
    -- the lock is free here and the waiter yields to another daemon's older head: wake it
    wake(KEYS[4], m, ARGV[5], ARGV[9], ARGV[7])
  elseif answer[1] == 1 and not only_mine(m, ARGV[5]) then
    -- Other daemons' heads sleep until about the releasing holder's end: where the new holder's
    -- TTL ends well before, they are woken (refused again, they sleep the new holder's TTL), or
    -- they would sleep on past a free lock.
    local ttl = tonumber(ARGV[2])
    local now = now_ms(t)
    if sleeps_past(m, ARGV[5], now, now + ttl + math.floor(ttl / 100) + tonumber(ARGV[7])) then
      wake(KEYS[4], m, ARGV[5], ARGV[9], ARGV[7])
    end
  end
end
return answer
