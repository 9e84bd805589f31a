-- status: STATUS's read on one master. KEYS: lock key.
-- {PTTL (-2 no key, -1 no expiry, else ms left), the hold's label ('' if none)}: what follows
-- the owner and a space in the value. The owner never leaves the master. (GET by pcall: a key
-- of another type is held with no label; TYPE would need one more command in the ACL.)
local p = redis.call('pttl', KEYS[1])
local label = ''
if p ~= -2 then
  local v = redis.pcall('get', KEYS[1])
  if type(v) == 'string' then label = string.sub(v, 42) end
end
return {p, label}
