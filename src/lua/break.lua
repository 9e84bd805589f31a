-- break: BREAK's step on one master: ends every hold of a resource whatever its owner.
-- KEYS: lock key, fence key, wait marker. ARGV: the wake channel.
-- 1 if a hold was ended, 0 if there was none. An exclusive hold is the lock key itself; the
-- other kinds' keys (`K <suffix>`, DESIGN section 2) are to be deleted here as well.
-- Where a hold was ended the fence register is raised by one (never created: a master missing
-- it lost its data, and that must still show), so the tokens keep rising past the broken hold's,
-- and other daemons' waiters for the lock are woken as a release wakes them (pcall: without
-- the channel in the ACL they wake on their timers). Only GET, SET, DEL and PUBLISH: the ACL
-- docs/security.md lists.
if redis.call('del', KEYS[1]) == 0 then return 0 end
local c = redis.call('get', KEYS[2])
if c then
  -- c + 1 on the decimal string: exact beyond 2^53, where Lua's numbers are not.
  local i = #c
  while i > 0 and string.sub(c, i, i) == '9' do i = i - 1 end
  if i == 0 then
    c = '1' .. string.rep('0', #c)
  else
    c = string.sub(c, 1, i - 1) .. string.char(string.byte(c, i) + 1) .. string.rep('0', #c - i)
  end
  redis.call('set', KEYS[2], c)
end
if redis.call('get', KEYS[3]) then redis.pcall('publish', ARGV[1], KEYS[1]) end
return 1
