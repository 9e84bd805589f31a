--#include marks
--#include holds
--#include multi
-- multi_release: MUNLOCK, and the releases nobody waits for of a set. KEYS: the member lock keys.
-- ARGV: as release.lua's (owner, and for a set that was granted the releasing daemon's wake, ''
-- otherwise), then the wait markers' prefix (a member's marker is the prefix and its key).
-- 1 held every member, 0 another owner holds one, -1 one is gone. Each member of a granted set
-- it deleted wakes another daemon's head waiting for that lock, as release.lua wakes.
local result, deleted = multi_release(KEYS, ARGV[1])
if (ARGV[2] or '') ~= '' then
  for _, key in ipairs(deleted) do
    local mark = ARGV[3] .. key
    local m = redis.call('get', mark)
    if m then
      marks()
      wake_released(mark, m, key)
    end
  end
end
return result
