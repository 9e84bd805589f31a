--#include holds
--#include multi
-- multi_release: MUNLOCK, and the releases nobody waits for of a set. KEYS: the member lock keys.
-- ARGV: owner. 1 held every member, 0 another owner holds one, -1 one is gone.
return multi_release(KEYS, ARGV[1])
