--#include holds
--#include permit
-- permit_release: ends a permit (UNLOCK of a permit owner; KEEP ends). KEYS: semaphore key.
-- ARGV: owner. 1 released, 0 the slot holds another owner, -1 gone.
-- With ARGV[2] = n: the cleanup of a failed attempt whose slot on this master is unknown:
-- deletes that attempt's holds on any slot; answers how many.
if ARGV[2] then return permit_release_attempt(KEYS[1], ARGV[1], ARGV[2]) end
return permit_release(KEYS[1], ARGV[1])
