-- A permit of the semaphore S with n permits: a hold of one of n slot mutexes 'S permit:<i>'
-- (i = 0 .. n-1), each a plain lock key, so that the exclusive lock's proof bounds every slot to
-- one holder and the semaphore to n (never a per-master count: a majority of masters each
-- admitting n does not bound the total). 'S permits' holds n as long as a permit may live: a
-- request naming another n is refused while it exists. A semaphore S and a lock S never share a
-- key.
--
-- A permit's owner says its slot: owner = '0000' .. kind .. slot (3 hex) .. 32 hex. The daemon
-- sends slot 000; the master writes the slot it chose into the owner it stores.

local function slot_key(key, i) return key .. ' permit:' .. i end
local function with_slot(owner, i)
  return string.sub(owner, 1, 5) .. string.format('%03x', i) .. string.sub(owner, 9)
end
local function slot_of(owner) return tonumber(string.sub(owner, 6, 8), 16) end
-- The owner without its slot: what one acquisition's holds on any slot have in common.
local function same_attempt(value, owner)
  return value and string.sub(value, 1, 5) == string.sub(owner, 1, 5) and
         string.sub(value, 9, 40) == string.sub(owner, 9, 40)
end

-- Takes the first free slot from `first` on (in turn, modulo n), for ttl ms. Returns the slot,
-- or nil and the smallest TTL among the slots (when all are held), or nil, nil and the n stored
-- when it differs from this request's.
local function permit_acquire(key, owner, ttl, label, n, first)
  local stored = redis.call('get', key .. ' permits')
  if stored and stored ~= n then return nil, nil, stored end
  local count = tonumber(n)
  local shortest = -1
  for j = 0, count - 1 do
    local i = (tonumber(first) + j) % count
    if redis.call('set', slot_key(key, i), value_of(with_slot(owner, i), label), 'NX', 'PX', ttl) then
      if stored then
        raise_ttl(key .. ' permits', ttl)
      else
        redis.call('set', key .. ' permits', n, 'PX', ttl)
      end
      return i
    end
    local left = redis.call('pttl', slot_key(key, i))
    if shortest < 0 or (left >= 0 and left < shortest) then shortest = left end
  end
  return nil, shortest
end

-- Ends the permit `owner` holds (its slot is in the owner): 1 released, 0 the slot holds
-- another owner, -1 gone.
local function permit_release(key, owner)
  local slot = slot_key(key, slot_of(owner))
  local v = redis.call('get', slot)
  if holds(v, owner) then redis.call('del', slot) return 1 end
  if v then return 0 end
  return -1
end

-- After a failed attempt whose slot on this master is unknown: deletes this attempt's hold on
-- any of the n slots (by identity, R3). Returns the number deleted.
local function permit_release_attempt(key, owner, n)
  local deleted = 0
  for i = 0, tonumber(n) - 1 do
    if same_attempt(redis.call('get', slot_key(key, i)), owner) then
      redis.call('del', slot_key(key, i))
      deleted = deleted + 1
    end
  end
  return deleted
end

-- Sets the permit's TTL to ttl: 1 set, 0 another owner holds the slot, -1 gone (never
-- re-created, R4). The count key lives at least as long.
local function permit_extend(key, owner, ttl)
  local slot = slot_key(key, slot_of(owner))
  local v = redis.call('get', slot)
  if not holds(v, owner) then
    if v then return 0 end
    return -1
  end
  redis.call('pexpire', slot, ttl)
  raise_ttl(key .. ' permits', ttl)
  return 1
end
