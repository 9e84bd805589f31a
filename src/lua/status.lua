-- status: STATUS's read on one master. KEYS: lock key.
-- {PTTL (-2 no key, -1 no expiry, else ms left), the hold's label ('' if none)}: what follows
-- the owner and a space in the value. The owner never leaves the master.
local p = redis.call('pttl', KEYS[1])
local label = ''
if p ~= -2 and redis.call('type', KEYS[1])['ok'] == 'string' then
  label = string.sub(redis.call('get', KEYS[1]) or '', 42)
end
return {p, label}
