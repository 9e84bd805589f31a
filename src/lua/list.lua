-- list: one bounded step of LIST on one master: SCAN from a cursor, keeping the holds.
-- ARGV: cursor, MATCH pattern, COUNT, fence key. No KEYS: it reads keys it finds (a
-- non-cluster master, as redlockd needs). Uses SCAN, GET and PTTL, and ZCOUNT / ZREVRANGE / HGET
-- where shared holders are: an ACL user needs +scan.
-- {next cursor, then key, PTTL, label ('' if none), holders per hold}. A hold is:
-- - a string whose value is an owner (40 lowercase hex) alone or followed by ' ' and a label
--   (an exclusive lock or a set's member: 1 holder);
-- - 'K readers' with live members (shared holders of K: their number, the longest time left,
--   the label of the reader that holds longest);
-- - 'S permits' with live slots (a semaphore S: the slots held, the longest time left, the
--   first label found).
-- Skipped: the other side keys ('K labels', 'K write-intent', 'S permit:<i>', and K itself where
-- it is the readers' guard: its value is no owner), the fence key and its registers, wait marks,
-- and anything else that does not look like a hold. The owners never leave the master.
local scan = redis.call('scan', ARGV[1], 'match', ARGV[2], 'count', ARGV[3])
local out = {scan[1]}
local fence = ARGV[4]
local owner = '^' .. string.rep('[0-9a-f]', 40)
local now = now_ms(redis.call('time'))
local function add(key, pttl, label, holders)
  out[#out + 1] = key
  out[#out + 1] = pttl
  out[#out + 1] = label
  out[#out + 1] = holders
end
local function label_of(v)
  if type(v) == 'string' and string.find(v, owner) and (#v == 40 or string.sub(v, 41, 41) == ' ') then
    return string.sub(v, 42)
  end
end
for _, k in ipairs(scan[2]) do
  if k == fence or k == fence .. ':max_ttl' or string.sub(k, 1, #fence + 9) == fence .. ':waiting:' then
    -- the registers and the wait marks
  elseif string.sub(k, -8) == ' readers' then
    local n = redis.pcall('zcount', k, now, '+inf')
    if type(n) == 'number' and n > 0 then
      -- the time and the label of the reader that holds longest, as STATUS gives them
      local top = redis.call('zrevrange', k, 0, 0, 'withscores')
      local label = redis.pcall('hget', string.sub(k, 1, -9) .. ' labels', top[1])
      add(k, tonumber(top[2]) - now, type(label) == 'string' and label or '', n)
    end
  elseif string.sub(k, -8) == ' permits' then
    local base = string.sub(k, 1, -9)
    local n = tonumber(redis.pcall('get', k)) or 0
    local held, longest, label = 0, 0, ''
    for i = 0, n - 1 do
      local slot = base .. ' permit:' .. i
      local left = redis.call('pttl', slot)
      if left ~= -2 then
        held = held + 1
        if left > longest then longest = left end
        if label == '' then label = label_of(redis.pcall('get', slot)) or '' end
      end
    end
    if held > 0 then add(k, longest, label, held) end
  elseif not string.find(k, ' ', 1, true) then
    local label = label_of(redis.pcall('get', k)) -- an error (another type) is no hold
    if label then add(k, redis.call('pttl', k), label, 1) end
  end
end
return out
