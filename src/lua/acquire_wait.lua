--#include marks
-- acquire_wait: the attempt of a LOCK ... WAIT (the head waiter of this daemon's queue).
-- KEYS: lock key, fence key, max-TTL key, wait marker. ARGV: owner, ttl ms, proposed token, ms
-- the waiter still waits, the daemon's id, the waiter's ticket, slack ms, the ms the next
-- waiter behind it still waits.
-- acquire, unless another daemon's head waiter with an earlier ticket waits here (wait_turn in
-- lib/marks.lua); a refusal marks that this daemon waits, so that a release through any other
-- daemon publishes a wake-up (release.lua). Answers as acquire does, with a fifth field: the
-- largest ticket of another daemon waiting here ('0' if none).
-- A writer that shared holders refuse leaves a write intent, 'K write-intent': new shared holds
-- are refused while it lives (lib/shared.lua), so a stream of readers cannot starve it. Like
-- the writer's mark entry, it lasts until about the writer's next try (the readers' time left,
-- plus 1 % and the slack, never past its wait), and each try renews it: an intent whose daemon
-- went away holds the readers back that long, not for the rest of its writer's wait (simulator
-- seed 9109146: a crashed daemon's intent kept another daemon's older reader head out for
-- 535 ms while the restarted daemon's writer yielded its turn to that reader). Its grant takes
-- the intent out; its value is the daemon's id, so that the daemon's unmark takes it out when
-- its writers all gave up (unmark.lua). While the intent is this daemon's, its head does not
-- yield its turn to another daemon's older head: that head may be a reader the intent refuses,
-- and each would wait for the other until the writer's WAIT ran out (simulator seeds 41560,
-- 30038). Another daemon's writer waits a turn.
-- (The intent is read once: absent, a grant has none to take out, a refusal none to outlast.)
local intent = KEYS[1] .. ' write-intent'
local intent_holder = redis.call('get', intent)
local function try(t)
  local granted, hint = grant(t)
  if granted then
    if granted[1] == 1 and intent_holder then redis.call('del', intent) end
  elseif live_readers(KEYS[1], now_ms(t)) then
    local left = math.max(hint or 0, 0) -- (the readers' time here)
    local life = math.min(left + math.floor(left / 100) + tonumber(ARGV[7]), tonumber(ARGV[4]))
    if not intent_holder or redis.call('pttl', intent) < life then
      redis.call('set', intent, ARGV[5], 'PX', life)
    end
  end
  return granted, hint
end
return wait_turn(redis.call('time'), false, 8, try, intent_holder == ARGV[5])
