-- fence_bump: a LOCK's second round when a granting master had seen its proposal or more.
-- KEYS: fence key. ARGV: proposed token. Stores max(counter, token), returns the previous counter.
return raise(1, 1)
