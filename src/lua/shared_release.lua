--#include holds
--#include readers
--#include shared
-- shared_release: ends a shared hold (UNLOCK of a shared owner, and the releases nobody waits
-- for). KEYS: lock key. ARGV: owner. 1 if it was held, -1 if it is gone.
return shared_release(KEYS[1], ARGV[1])
