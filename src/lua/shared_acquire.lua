--#include marks
--#include holds
--#include readers
--#include shared
-- shared_acquire: a LOCK ... SHARED's attempt on one master (lib/shared.lua).
-- KEYS: lock key, fence key, max-TTL key, and for a WAIT's attempt the wait mark.
-- ARGV: owner, ttl ms, proposed token, then for a WAIT's attempt acquire_wait's five more (ms
-- the waiter still waits, the daemon's id, its ticket, slack ms, the ms the next waiter still
-- waits), then the label ('' none).
-- Granted: {1, previous counter, TIME}, with the fence and longest-TTL registers raised in the
-- same step (R5). Refused: {0, ms the exclusive holder or the waiting writer's intent has left,
-- TIME}. Without a fence register: {-2, 0, TIME}. A WAIT's attempt takes its turn among the
-- daemons' waiters and answers with a fifth field as acquire_wait does (lib/marks.lua).
local waiting = #KEYS == 4
local label = ARGV[waiting and 9 or 4]
local function try(t)
  return grant_by(t, function()
    return shared_acquire(KEYS[1], ARGV[1], ARGV[2], label, now_ms(t))
  end, 2, 3)
end
local t = redis.call('time')
-- How long what keeps a reader out holds the lock here (below 1: nothing), for a head that
-- yields its turn: an exclusive holder's key (not the readers' guard), or a waiting writer's
-- intent. Where neither is, the reader could join the head it yields to (wait_turn's `beside`).
local function writers_left()
  local v = redis.pcall('get', KEYS[1])
  if v and not is_readers_guard(v) then return redis.call('pttl', KEYS[1]) end
  return redis.call('pttl', KEYS[1] .. ' write-intent')
end
if waiting then return wait_turn(t, false, 8, try, false, writers_left, true) end
local granted, hint = try(t)
if granted then return granted end
return {0, hint, t[1], t[2]}
