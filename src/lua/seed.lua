-- seed: re-seeds a master that lost its data with what a majority of the others hold, before it
-- votes again. KEYS: fence key, max-TTL key. ARGV: the fleet's fence, the fleet's longest TTL.
raise(1, 1)
raise(2, 2)
return 1
