-- The helpers every script of redlockd starts with: the build puts this file before each
-- script's own text (cmake/embed_lua.cmake), so the text a master runs is prelude + script.

-- Compares decimal counters without leading zeros exactly, as strings: Lua numbers are doubles
-- and would round counters above 2^53.
local function less(a, b) return #a < #b or (#a == #b and a < b) end

-- Raises the max-register KEYS[k] to ARGV[a]; a missing register is created. Returns the value
-- it held before ('0' if none).
local function raise(k, a)
  local c = redis.call('get', KEYS[k])
  if not c or less(c, ARGV[a]) then redis.call('set', KEYS[k], ARGV[a]) end
  return c or '0'
end

-- acquire's grant (KEYS: lock key, fence key, max-TTL key; ARGV: owner, ttl ms, proposed token):
-- SET NX PX and, when it took, the fence and longest-TTL registers raised in the same step.
-- Returns {1, previous counter, TIME}, or nil on a refusal. `t` is the master's TIME.
local function grant(t)
  if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    local c = raise(2, 3)
    raise(3, 2)
    return {1, c, t[1], t[2]}
  end
end

-- Wait markers: KEYS[4] of acquire_wait and hand_over, KEYS[2] of release and KEYS[1] of unmark
-- is a lock's marker, a string of one entry per daemon whose head waiter waits for the lock,
-- '<daemon id> <ticket> <until>;' (a string, not a hash: the ACL the README lists has GET and
-- SET). The ticket orders the daemons' heads: the smaller first, the smaller daemon id on a tie.
-- Until is this master's TIME in ms at which the entry stops counting: a daemon that went away
-- holds nobody back for long.

-- This master's TIME (redis.call('time')) in ms.
local function ms(t) return t[1] * 1000 + math.floor(t[2] / 1000) end

-- The entries of marker text `m` (nil: no marker) still live at `now`: {id, ticket, until}.
local function parse(m, now)
  local list = {}
  if m then
    for id, ticket, untl in string.gmatch(m, '(%x+) (%d+) (%d+);') do
      untl = tonumber(untl)
      if untl > now then list[#list + 1] = {id, ticket, untl} end
    end
  end
  return list
end

-- Whether the head with ticket a of daemon x comes before the one with ticket b of daemon y.
local function before(a, x, b, y)
  if a == b then return x < y end
  return less(a, b)
end

-- Writes `list` back to marker `key` without daemon `id`'s entry, and with {id, ticket, untl}
-- when a ticket is given. The key lives as long as its last entry and goes with it.
local function store(key, list, now, id, ticket, untl)
  local out, last = {}, 0
  for _, e in ipairs(list) do
    if e[1] ~= id then
      out[#out + 1] = e[1] .. ' ' .. e[2] .. ' ' .. string.format('%d', e[3]) .. ';'
      last = math.max(last, e[3])
    end
  end
  if ticket then
    out[#out + 1] = id .. ' ' .. ticket .. ' ' .. string.format('%d', untl) .. ';'
    last = math.max(last, untl)
  end
  if #out == 0 then
    redis.call('del', key)
  else
    redis.call('set', key, table.concat(out), 'PX', string.format('%d', last - now))
  end
end

-- A granted lock was deleted here (KEYS[1]; its marker `marker`): when another daemon's head
-- waits for it, its entry counts for at most `slack` ms more (time to try once woken) and the
-- lock key is published on the wake channel. A master whose ACL forbids PUBLISH still releases
-- (pcall): waiters then fall back to their timed retry.
local function wake(marker, id, channel, slack)
  local m = redis.call('get', marker)
  if not m then return end
  local now = ms(redis.call('time'))
  local list, others, limit = parse(m, now), false, now + tonumber(slack)
  for _, e in ipairs(list) do
    if e[1] ~= id then
      others = true
      if e[3] > limit then e[3] = limit end
    end
  end
  if not others then return end
  store(marker, list, now)
  redis.pcall('publish', channel, KEYS[1])
end

-- acquire_wait's step (KEYS: lock key, fence key, max-TTL key, wait marker; ARGV: owner, ttl ms,
-- proposed token, ms the waiter still waits, daemon id, ticket, slack ms; `t` is TIME). Grants
-- as acquire does unless another daemon's head with an earlier ticket waits here; the grant
-- takes the daemon's entry out. A refusal marks the entry until about the waiter's next try (the
-- holder's remaining TTL, or the earlier head's entry, plus 1 % and the slack; never past the
-- waiter's wait). Returns acquire's answer with a fifth field, the largest ticket of another
-- daemon waiting here ('0' if none): the daemon's next tickets come after it.
local function wait_turn(t)
  local now = ms(t)
  local list = parse(redis.call('get', KEYS[4]), now)
  local first, largest, mine = nil, '0', false
  for _, e in ipairs(list) do
    if e[1] == ARGV[5] then
      mine = true
    else
      if less(largest, e[2]) then largest = e[2] end
      if before(e[2], e[1], ARGV[6], ARGV[5]) and
          (not first or before(e[2], e[1], first[2], first[1])) then
        first = e
      end
    end
  end
  if not first then
    local granted = grant(t)
    if granted then
      if mine then store(KEYS[4], list, now, ARGV[5]) end
      granted[5] = largest
      return granted
    end
  end
  local hint = redis.call('pttl', KEYS[1])
  if hint <= 0 and first then hint = first[3] - now end
  local stay = tonumber(ARGV[7])
  if hint > 0 then stay = hint + math.floor(hint / 100) + stay end
  store(KEYS[4], list, now, ARGV[5], ARGV[6], now + math.min(stay, tonumber(ARGV[4])))
  return {0, hint, t[1], t[2], largest}
end
