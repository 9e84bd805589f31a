--#include marks
--#include holds
--#include multi
-- multi_acquire: an MLOCK's attempt on one master (lib/multi.lua), all members or none.
-- KEYS: fence key, max-TTL key, the member lock keys. ARGV: owner, ttl ms, proposed token, then
-- for a WAIT's attempt acquire_wait's five more (ms the waiter still waits, the daemon's id, its
-- ticket, slack ms, the ms the next waiter still waits), then the label ('' none), and for a
-- WAIT's attempt the wait marks' prefix (a member's mark is the prefix and its key).
-- Granted: {1, previous counter, TIME}. Refused: {0, the longest time a held member has left,
-- TIME}. Without a fence register: {-2, 0, TIME}. A WAIT's attempt takes its turn among the
-- daemons' waiters on every member's mark and answers with a fifth field (wait_turn_many in
-- lib/marks.lua).
local waiting = ARGV[10] ~= nil
local label = ARGV[waiting and 9 or 4]
local members = {unpack(KEYS, 3)}
local function try(t)
  return grant_by(t, function()
    return multi_acquire(members, value_of(ARGV[1], label), ARGV[2])
  end, 1, 2)
end
local t = redis.call('time')
if waiting then
  local marks_of_members = {}
  for i, key in ipairs(members) do marks_of_members[i] = ARGV[10] .. key end
  return wait_turn_many(t, 1, marks_of_members, try)
end
local granted, hint = try(t)
if granted then return granted end
return {0, hint, t[1], t[2]}
