-- A script whose helper was left out (the control of check_globals.sh: it must fail on this).
local t = redis.call('time')
if not fence_of(2) then return lost_data(t) end
return {1, t[1], t[2]}
