--#include readers
-- status: STATUS's read on one master. KEYS: lock key K.
-- {PTTL of what refuses an exclusive LOCK (-2 nothing, -1 no expiry, else ms left: the
-- exclusive holder's key's, or its live shared holders'), the hold's label ('' if none: what follows the
-- owner and a space in the value; of shared holders, the longest-lived one's), live shared holders, permits in use of the semaphore K, its
-- n (0: none)}. The owners never leave the master. (GET by pcall: a key of another type is
-- held with no label; TYPE would need one more command in the ACL.)
local key = KEYS[1]
local now = now_ms(redis.call('time'))
local p = redis.call('pttl', key)
local label = ''
if p ~= -2 then
  local v = redis.pcall('get', key)
  if is_readers_guard(v) then
    p = -2 -- the readers' guard: the readers below say who holds it
  elseif type(v) == 'string' then
    label = string.sub(v, 42)
  end
end
local readers = 0
if redis.call('pttl', key .. ' readers') ~= -2 then
  readers = redis.call('zcount', key .. ' readers', now, '+inf')
  if p == -2 and readers > 0 then
    p = readers_pttl(key, now)
    -- the label of the reader that holds longest, if it gave one
    local top = redis.call('zrevrange', key .. ' readers', 0, 0)[1]
    if top and redis.call('pttl', key .. ' labels') ~= -2 then
      label = redis.call('hget', key .. ' labels', top) or ''
    end
  end
end
local used, n = 0, 0
local stored = redis.pcall('get', key .. ' permits')
if type(stored) == 'string' then
  n = tonumber(stored) or 0
  for i = 0, n - 1 do
    if redis.call('pttl', key .. ' permit:' .. i) ~= -2 then used = used + 1 end
  end
end
return {p, label, readers, used, n}
