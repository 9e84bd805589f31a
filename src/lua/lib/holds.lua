-- What the lock family's scripts share: who a value belongs to, and raising a TTL that others
-- may rely on. (The master's time in ms, now_ms, is in prelude.lua.)

-- A hold's value is its owner (40 hex), followed by ' ' and its label when the LOCK gave one.
local function value_of(owner, label)
  if label == '' then return owner end
  return owner .. ' ' .. label
end
local function holds(value, owner) return value and string.sub(value, 1, 40) == owner end

-- Raises `key`'s TTL to at least `ttl` ms, never lowers it: several holders rely on it (R2).
local function raise_ttl(key, ttl)
  if redis.call('pttl', key) < tonumber(ttl) then redis.call('pexpire', key, ttl) end
end
