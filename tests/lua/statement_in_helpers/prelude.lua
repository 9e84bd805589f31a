-- The control of the embedding's check (tests/CMakeLists.txt): a prelude part with a statement
-- at top level, which leaving the part out would drop unseen. The build must refuse it.

local unused_flag = true
redis.call('set', 'side-effect', '1')

local function used() return 1 end
