-- list: one bounded step of LIST on one master: SCAN from a cursor, keeping the holds.
-- ARGV: cursor, MATCH pattern, COUNT, fence key. No KEYS: it reads keys it finds (a
-- non-cluster master, as redlockd needs). Uses SCAN, GET and PTTL: an ACL user needs +scan.
-- {next cursor, then key, PTTL, label ('' if none) per hold}. A hold is a string whose value is
-- an owner (40 lowercase hex) alone or followed by ' ' and a label. Skipped: keys with a space
-- (another kind's side keys, `K <suffix>`), the fence key and its registers, wait marks, and
-- anything else that does not look like a hold. The owners never leave the master.
local scan = redis.call('scan', ARGV[1], 'match', ARGV[2], 'count', ARGV[3])
local out = {scan[1]}
local fence = ARGV[4]
local owner = '^' .. string.rep('[0-9a-f]', 40)
for _, k in ipairs(scan[2]) do
  if not string.find(k, ' ', 1, true) and k ~= fence and k ~= fence .. ':max_ttl'
      and string.sub(k, 1, #fence + 9) ~= fence .. ':waiting:' then
    local v = redis.pcall('get', k) -- an error (another type) is no hold
    if type(v) == 'string' and string.find(v, owner) and (#v == 40 or string.sub(v, 41, 41) == ' ') then
      out[#out + 1] = k
      out[#out + 1] = redis.call('pttl', k)
      out[#out + 1] = string.sub(v, 42)
    end
  end
end
return out
