--#include marks
--#include holds
--#include multi
-- multi_release: MUNLOCK, and the releases nobody waits for of a set. KEYS: the member lock keys.
-- ARGV: owner, wake channel, the releasing daemon's id, '1' for a set that was granted, slack
-- ms, the wait markers' prefix (a member's marker is the prefix and its key).
-- 1 held every member, 0 another owner holds one, -1 one is gone. Each member of a granted set
-- it deleted wakes another daemon's head waiting for that lock, as release.lua wakes.
local result, deleted = multi_release(KEYS, ARGV[1])
if ARGV[4] == '1' then
  for _, key in ipairs(deleted) do
    local mark = ARGV[6] .. key
    local m = redis.call('get', mark)
    if m then
      marks()
      wake(mark, m, ARGV[3], ARGV[2], ARGV[5], key)
    end
  end
end
return result
