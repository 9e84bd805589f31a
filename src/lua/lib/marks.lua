-- The wait-mark helpers, in the scripts that name them with '--#include marks'
-- (cmake/embed_lua.cmake); the others do not pay for them.
--
-- A lock's wait mark (KEYS[4] of acquire_wait and hand_over, KEYS[2] of release, KEYS[1] of
-- unmark) is a string of one entry per daemon whose head waiter waits for the lock,
-- '<daemon id> <ticket> <until>;' (a string, not a hash: the ACL the README lists has GET and
-- SET). The ticket orders the daemons' heads: the smaller first, the smaller daemon id on a tie.
-- Until is this master's TIME in ms at which the entry stops counting: a daemon that went away
-- holds nobody back for long. Numbers are written with Lua's '..' (%.14g): exact for ms times
-- and TTLs.
--
-- Lua makes every function of a script anew at each call, so the helpers below are made by
-- marks(), on first use: a call that finds no mark (the uncontended case) never makes them.
local only_mine, scan, put, wake, wake_released, sleeps_past, yielded_to, kept_ticket

local function marks()
  if scan then return end

  -- Whether the head with ticket a of daemon x comes before the one with ticket b of daemon y.
  local function before(a, x, b, y)
    if a == b then return x < y end
    return less(a, b)
  end

  -- Whether mark text `m` is one entry, daemon `id`'s (live or not): no other daemon waits.
  -- (The common case with one daemon: checked before a pass over the entries.)
  function only_mine(m, id)
    return string.find(m, ';', 1, true) == #m and string.sub(m, 1, #id + 1) == id .. ' '
  end

  -- One pass over mark text `m` at `now`, for daemon `id` whose head has `ticket`. Returns the
  -- other daemons' live entries (as mark text), the latest of their untils (0 if none), whether
  -- `id` has a live entry, the until of the first other head that comes before (ticket, id)
  -- (nil if none), and the largest ticket of the others ('0' if none). `id`'s entry, when
  -- live, is given by its ticket (true when it is the only entry).
  function scan(m, now, id, ticket)
    local others, last, mine, first, first_ticket, first_id, largest = '', 0, false, nil, nil, nil,
        '0'
    if only_mine(m, id) then return others, last, true, first, largest end
    for entry, i, k, u in string.gmatch(m, '((%x+) (%d+) (%d+);)') do
      u = tonumber(u)
      if u > now then
        if i == id then
          mine = k
        else
          others = others .. entry
          if u > last then last = u end
          if less(largest, k) then largest = k end
          if ticket and before(k, i, ticket, id) and
              (not first or before(k, i, first_ticket, first_id)) then
            first, first_ticket, first_id = u, k, i
          end
        end
      end
    end
    return others, last, mine, first, largest
  end

  -- Writes mark `key`: the entries `others` (the latest ending at `last`) and, if given, the
  -- entry `mine` ending at `untl`. The key lives as long as its last entry and goes with it.
  -- Returns the text written (nil: the key was deleted).
  function put(key, others, last, now, mine, untl)
    if mine then
      others = others .. mine
      if untl > last then last = untl end
    end
    if others == '' then
      redis.call('del', key)
      return nil
    end
    redis.call('set', key, others, 'PX', last - now)
    return others
  end

  -- A granted lock (KEYS[1], or `published`) was deleted here and its mark `mark` holds `m`:
  -- when another daemon's head waits for it, its entry counts for at most `slack` ms more (time
  -- to try once woken) and the lock's key is published on the wake channel. A master whose ACL forbids PUBLISH
  -- still releases (pcall): waiters then fall back to their timed retry.
  function wake(mark, m, id, channel, slack, published)
    if only_mine(m, id) then return end
    local now = now_ms(redis.call('time'))
    local limit, out, last, woken = now + tonumber(slack), '', 0, false
    for i, k, u in string.gmatch(m, '(%x+) (%d+) (%d+);') do
      u = tonumber(u)
      if u > now then
        if i ~= id then
          woken = true
          if u > limit then u = limit end
        end
        out = out .. i .. ' ' .. k .. ' ' .. u .. ';'
        if u > last then last = u end
      end
    end
    if not woken then return end
    redis.call('set', mark, out, 'PX', last - now)
    redis.pcall('publish', channel, published or KEYS[1])
  end

  -- wake for the releases (release.lua's layout): ARGV[2] is the releasing daemon's
  -- '<daemon id> <slack ms> <wake channel>'.
  function wake_released(mark, m, published)
    local id, slack, channel = string.match(ARGV[2], '^(%S+) (%d+) (.+)$')
    wake(mark, m, id, channel, slack, published)
  end

  -- The ticket of the entry a grant keeps for the daemon's next waiter: after every head now
  -- waiting (`largest`, the largest ticket of the others). The grant's proposal alone is not:
  -- it is above what this daemon has seen, and another daemon's head may hold a larger ticket;
  -- that head would yield to an entry whose waiter is not trying, and sleep while the oldest
  -- head did (simulator seed 70595: four daemons' heads asleep for 300 ms on a free lock).
  function kept_ticket(proposal, largest)
    if less(largest, proposal) then return proposal end
    return plus_one(largest) -- (in decimal text: tickets outgrow Lua's doubles)
  end

  -- Whether an entry of mark text `others` (other daemons' live entries) comes after the head
  -- with ticket k of daemon `id`: that head yielded its turn to it.
  function yielded_to(others, k, id)
    for i, j in string.gmatch(others, '(%x+) (%d+) %d+;') do
      if before(k, id, j, i) then return true end
    end
    return false
  end

  -- Whether another daemon than `id` has a live entry in mark text `m` lasting past `limit`:
  -- its head sleeps until about then (its entry's until is its next try plus 1 % and the slack).
  function sleeps_past(m, id, now, limit)
    for i, _, u in string.gmatch(m, '(%x+) (%d+) (%d+);') do
      u = tonumber(u)
      if i ~= id and u > now and u > limit then return true end
    end
    return false
  end
end

-- The hint of a head that yields to an older head whose entry ends in `left` ms: about that
-- head's next try, which its entry outlasts by the slack `slack` (and 1 %). Sleeping to the
-- entry's end adds one slack per head along a chain of yields (a reader slept 540 ms on a free
-- lock: simulator seed 30038). Within two slacks of the end, the end: the head does not try
-- again and again while the older head's try is under way. (A reader or a permit, which could
-- go in beside that head, looks once more meanwhile: wait_turn's `beside`.)
local function until_next_try(left, slack)
  if left > 2 * slack then return left - slack end
  return left
end

-- How long the holders that keep an exclusive waiter out hold lock KEYS[1] here, in ms: the
-- lock key's time, the exclusive holder's or the readers' guard's (below 1: none).
local function exclusive_holders_left() return redis.call('pttl', KEYS[1]) end

-- acquire_wait's step (KEYS: lock key, fence key, max-TTL key, wait mark; ARGV: owner, ttl ms,
-- proposed token, ms the waiter still waits, daemon id, ticket, slack ms, and at ARGV[`behind`]
-- the ms the daemon's next waiter for the lock still waits, '0' if none; `t` is TIME). `try` is
-- the kind's grant (grant in prelude.lua for the exclusive lock): a table, or nil and the ms the
-- holders keep the lock. Grants as `try` does unless another daemon's head with an earlier
-- ticket waits here; the grant takes the daemon's entry out, or, when a next waiter stays
-- queued, keeps one for it (its ticket after every head now waiting: kept_ticket) so that
-- a release of the lock through another daemon still wakes it. With `releasing`, the lock key is
-- a releasing owner's (a hand-over): a grant replaces it, a refusal deletes it. A refusal marks
-- the entry until about the waiter's next try (the holders' remaining time, or the earlier
-- head's entry, plus 1 % and the slack; never past the waiter's wait). Returns `try`'s answer
-- with a fifth field, the largest ticket of another daemon waiting here ('0' if none): the
-- daemon's next tickets come after it. With `first_in_line`, the waiter yields to nobody (a
-- writer whose intent holds the readers back: an older head may be one of them).
-- `holders_left(now)` is how long the holders that keep the kind's waiter out still hold the
-- lock here, in ms (below 1: none); the exclusive waiter's, exclusive_holders_left, when absent.
-- Returns, second, the text the wait mark holds after the step (nil: none), for a caller that
-- goes on with it (hand_over), so that it need not read the mark again, and third, true where
-- that text is this daemon's entry alone, written without making the helpers of marks().
-- With `beside` (kinds whose grant leaves room for more of the kind: readers, permits), a head
-- that yields only to an older head's turn looks again after the slack (below).
local function wait_turn(t, releasing, behind, try, first_in_line, holders_left, beside)
  try = try or grant
  holders_left = holders_left or exclusive_holders_left
  local next_wait = tonumber(ARGV[behind]) or 0 -- (absent: nobody behind)
  local m = redis.call('get', KEYS[4])
  local tried, hint = false, nil
  if not m and next_wait == 0 then -- nobody marked, nobody behind: the uncontended path
    local granted
    granted, hint = try(t, releasing)
    if granted then
      granted[5] = '0'
      return granted, nil
    end
    tried = true
  elseif not fence_of(2) then
    local lost = lost_data(t) -- (checked before the marks are touched: nothing to keep here)
    lost[5] = '0'
    return lost, m
  end
  if not tried and m and next_wait > 0 and string.find(m, ';', 1, true) == #m and
      string.sub(m, 1, #ARGV[5] + 1) == ARGV[5] .. ' ' then -- (only_mine, not made yet)
    -- Only this daemon's entry is marked (one daemon's hand-overs, the hot path): no older head
    -- to yield to, nobody to place the kept entry after. A grant writes the entry the full step
    -- would (the proposal as its ticket, as the daemon's copy has it; until about the new
    -- hold's end, capped by the next waiter's wait) without making the mark helpers or passing
    -- over the mark: about a tenth of a hand-over's cost on the master.
    local granted
    granted, hint = try(t, releasing)
    if granted then
      local ttl = tonumber(ARGV[2])
      local stay = math.min(ttl + math.floor(ttl / 100) + tonumber(ARGV[7]), next_wait)
      local untl = tostring(now_ms(t) + stay) -- (one number-to-text for the text and PXAT)
      m = ARGV[5] .. ' ' .. ARGV[3] .. ' ' .. untl .. ';'
      redis.call('set', KEYS[4], m, 'PXAT', untl)
      granted[5] = '0'
      return granted, m, true
    end
    tried = true
  end
  marks()
  local now = now_ms(t)
  local others, last, mine, first, largest = '', 0, false, nil, '0'
  if m then others, last, mine, first, largest = scan(m, now, ARGV[5], ARGV[6]) end
  if first_in_line then first = nil end
  if not first and not tried then
    local granted
    granted, hint = try(t, releasing)
    if granted then -- (a grant: the fence register was there, checked above)
      if next_wait > 0 then
        local ttl = tonumber(ARGV[2])
        local untl = now + math.min(ttl + math.floor(ttl / 100) + tonumber(ARGV[7]), next_wait)
        m = put(KEYS[4], others, last, now,
                ARGV[5] .. ' ' .. kept_ticket(ARGV[3], largest) .. ' ' .. untl .. ';', untl)
      elseif mine then
        m = put(KEYS[4], others, last, now)
      end
      granted[5] = largest
      return granted, m
    end
  end
  if releasing then
    redis.call('del', KEYS[1]) -- tried by a hand-over whose lock is free here now
    hint = -2
  end
  local stay = tonumber(ARGV[7])
  if not hint then
    -- Not tried: it yields to an older head. It tries again at whichever comes first: the end
    -- of the holders that keep it out, or about that head's next try. The head's entry can
    -- outlast the holders (it tried early through its own daemon, and its grant's kept entry
    -- came after this head): a writer slept on it 350 ms past the last reader (simulator seed
    -- 30023). The holders can outlast the head's try: readers the head joins, and new readers
    -- after it (no write intent stops them while the writer yields), kept a writer asleep to
    -- the end of its wait (160061).
    hint = holders_left(now)
    if first then
      local turn = until_next_try(first - now, stay)
      -- With `beside` (readers, permits) and nothing but that head's turn in the way, it could
      -- be granted beside that head once the head is in. That head's daemon wakes it once a
      -- majority granted (wake_yielded.lua; this script's grant wakes nobody: a grant on some
      -- masters only would start attempts that fail, again and again). Where that wake is lost,
      -- it looks again after the slack, not at the head's entry's end (seeds 10 --mix shared
      -- and --mix permit: 327 ms and more on a free lock, before the wake). Where that
      -- head's try is due or under way (its entry ends within the slack), half the slack: its
      -- round is decided by then, and the entry's end came a slack after that grant (simulator
      -- seed 56 --mix shared: a reader asleep 237 ms beside readers only).
      if beside and hint <= 0 then
        local most = stay
        if first - now <= stay then most = math.floor(stay / 2) end
        if turn > most then turn = most end
      end
      if hint <= 0 or turn < hint then hint = turn end
    end
  end
  hint = hint or 0
  if hint <= 0 and first then hint = until_next_try(first - now, stay) end
  if hint > 0 then stay = hint + math.floor(hint / 100) + stay end
  local untl = now + math.min(stay, tonumber(ARGV[4]))
  m = put(KEYS[4], others, last, now, ARGV[5] .. ' ' .. ARGV[6] .. ' ' .. untl .. ';', untl)
  return {0, hint, t[1], t[2], largest}, m
end

-- wait_turn for a set (MLOCK), whose waiter is marked on every member's wait mark, so that a
-- release of any member (a plain UNLOCK, another set's) wakes it: the same rules, over the
-- marks `marks` (one per member) at once. It yields while an older head of another daemon is
-- marked on any of them; a refusal marks each; a grant takes this daemon's entries out (or
-- keeps them for its next waiter). KEYS[f] is the fence register; ARGV as wait_turn's, the
-- next waiter's wait at ARGV[8].
local function wait_turn_many(t, f, marks_of_members, try)
  local next_wait = tonumber(ARGV[8]) or 0
  local texts, any = {}, false
  for i, mark in ipairs(marks_of_members) do
    texts[i] = redis.call('get', mark)
    any = any or texts[i] ~= nil
  end
  local tried, hint = false, nil
  if not any and next_wait == 0 then
    local granted
    granted, hint = try(t)
    if granted then
      granted[5] = '0'
      return granted
    end
    tried = true
  elseif not fence_of(f) then
    local lost = lost_data(t)
    lost[5] = '0'
    return lost
  end
  marks()
  local now = now_ms(t)
  local seen, first, largest = {}, nil, '0'
  for i, text in ipairs(texts) do
    local s = {others = '', last = 0, mine = false}
    if text then
      local older, top
      s.others, s.last, s.mine, older, top = scan(text, now, ARGV[5], ARGV[6])
      if older and (not first or older > first) then first = older end
      if less(largest, top) then largest = top end
    end
    seen[i] = s
  end
  if not first and not tried then
    local granted
    granted, hint = try(t)
    if granted then
      for i, mark in ipairs(marks_of_members) do
        local s = seen[i]
        if next_wait > 0 then
          local ttl = tonumber(ARGV[2])
          local untl = now + math.min(ttl + math.floor(ttl / 100) + tonumber(ARGV[7]), next_wait)
          put(mark, s.others, s.last, now,
              ARGV[5] .. ' ' .. kept_ticket(ARGV[3], largest) .. ' ' .. untl .. ';', untl)
        elseif s.mine then
          put(mark, s.others, s.last, now)
        end
      end
      granted[5] = largest
      return granted
    end
  end
  hint = hint or 0
  local stay = tonumber(ARGV[7])
  if hint <= 0 and first then hint = until_next_try(first - now, stay) end
  if hint > 0 then stay = hint + math.floor(hint / 100) + stay end
  local untl = now + math.min(stay, tonumber(ARGV[4]))
  for i, mark in ipairs(marks_of_members) do
    local s = seen[i]
    put(mark, s.others, s.last, now, ARGV[5] .. ' ' .. ARGV[6] .. ' ' .. untl .. ';', untl)
  end
  return {0, hint, t[1], t[2], largest}
end
