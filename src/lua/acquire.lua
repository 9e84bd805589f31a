-- acquire: LOCK's attempt on one master.
-- KEYS: lock key, fence key, max-TTL key. ARGV: the value (owner, or owner ' ' label), ttl ms,
-- proposed token.
-- Granted: {1, previous counter, TIME}. Refused: {0, remaining TTL of the holder in ms (or of
-- the shared holders that keep it), TIME}.
-- Without a fence register (the master lost its data): {-2, 0, TIME}, nothing granted.
-- TIME (seconds, microseconds) lets the daemon see a master's clock jump at every vote. A grant
-- also raises the master's record of the longest TTL, in the same step: every master that holds
-- a lock knows how long a restarted master must sit out for it.
local t = redis.call('time')
local granted, hint = grant(t)
if granted then return granted end
return {0, hint, t[1], t[2]}
