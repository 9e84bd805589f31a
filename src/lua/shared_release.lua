--#include marks
--#include holds
--#include readers
--#include shared
-- shared_release: ends a shared hold (UNLOCK of a shared owner, and the releases nobody waits
-- for). KEYS: lock key, wait marker. ARGV: as release.lua's (owner, and for a hold that was
-- granted the releasing daemon's wake, '' otherwise).
-- 1 if it was held, -1 if it is gone. When the last live reader of a granted hold leaves and
-- another daemon's head waits for the lock (a writer), that head is woken as release.lua wakes;
-- so it is when the reader that lived longest leaves and the others end more than the slack
-- sooner: a writer the readers refused sleeps on the longest one's time (simulator seed
-- 130230: 300 ms on a free lock).
-- (The mark is read first; without one, nobody waits: no more. shared_release reads the score.)
local m = (ARGV[2] or '') ~= '' and redis.call('get', KEYS[2])
local now = now_ms(redis.call('time'))
local result, removed, score = shared_release(KEYS[1], ARGV[1], now)
if removed and m then
  local slack = tonumber(string.match(ARGV[2], '^%S+ (%d+) '))
  if not live_readers(KEYS[1], now) or
      tonumber(score) > now + readers_pttl(KEYS[1], now) + slack then
    marks()
    wake_released(KEYS[2], m)
  end
end
return result
