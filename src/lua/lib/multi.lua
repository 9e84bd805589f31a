-- Several resources at once (MLOCK): the plain lock key of each member holds the owner, set all
-- or nothing on each master in one step, so there is no hold-and-wait and no deadlock whatever
-- order clients name the resources in. A member conflicts with any exclusive hold of it (a
-- plain LOCK, another set, a standard Redlock client) and with live readers (the key is then
-- their guard, lib/readers.lua).

-- Sets every key of `keys` to `value` for ttl ms, or none. Refused: false and the longest time
-- a held member has left (0 when unknown).
local function multi_acquire(keys, value, ttl)
  local held, longest = false, 0
  for _, key in ipairs(keys) do
    local left = redis.call('pttl', key) -- an exclusive holder's or the readers' guard's
    if left ~= -2 then
      held = true
      if left > longest then longest = left end
    end
  end
  if held then return false, longest end
  for _, key in ipairs(keys) do redis.call('set', key, value, 'PX', ttl) end
  return true
end

-- Deletes the members `owner` holds. 1 if it held all of them, 0 if another owner holds one,
-- -1 if one is gone (and none held by another); and the keys it deleted.
local function multi_release(keys, owner)
  local result, deleted = 1, {}
  for _, key in ipairs(keys) do
    local v = redis.call('get', key)
    if holds(v, owner) then
      redis.call('del', key)
      deleted[#deleted + 1] = key
    elseif v and v ~= 'redlockd:readers' then -- (the readers' guard: the member is gone)
      result = 0
    elseif result == 1 then
      result = -1
    end
  end
  return result, deleted
end

-- Sets every member's TTL to ttl where `owner` still holds it; never re-creates one (R4).
-- Returns 1 if it held all, 0 if another owner holds one, -1 if one is gone; and how many
-- members it extended.
local function multi_extend(keys, owner, ttl)
  local result, extended = 1, 0
  for _, key in ipairs(keys) do
    local v = redis.call('get', key)
    if holds(v, owner) then
      redis.call('pexpire', key, ttl)
      extended = extended + 1
    elseif v and v ~= 'redlockd:readers' then -- (the readers' guard: the member is gone)
      result = 0
    elseif result == 1 then
      result = -1
    end
  end
  return result, extended
end
