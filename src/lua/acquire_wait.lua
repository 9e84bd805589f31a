--#include marks
-- acquire_wait: the attempt of a LOCK ... WAIT (the head waiter of this daemon's queue).
-- KEYS: lock key, fence key, max-TTL key, wait marker. ARGV: owner, ttl ms, proposed token, ms
-- the waiter still waits, the daemon's id, the waiter's ticket, slack ms, the ms the next
-- waiter behind it still waits.
-- acquire, unless another daemon's head waiter with an earlier ticket waits here (wait_turn in
-- lib/marks.lua); a refusal marks that this daemon waits, so that a release through any other
-- daemon publishes a wake-up (release.lua). Answers as acquire does, with a fifth field: the
-- largest ticket of another daemon waiting here ('0' if none).
return wait_turn(redis.call('time'), false, 8)
