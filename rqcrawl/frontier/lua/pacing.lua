-- a key's pace: "ready fetch backoff base delay why" (messages.HostPace; the delay in force
-- and why are what the last save computed, for `status`: an older version wrote the first
-- four only)
local function parse_host(raw)
  local h = {ready = 0, fetch = 0, backoff = 0, base = -1}
  if raw then
    local r, f, b, base = string.match(raw, '^(%S+) (%S+) (%S+) (%S+)')
    if r then
      h.ready, h.fetch, h.backoff, h.base = tonumber(r), tonumber(f), tonumber(b), tonumber(base)
    end
  end
  return h
end
-- (parsed once a run, and again from what each save wrote: callers change the table they
-- get, then save it)
local function load_host(key)
  if PACED[key] == nil then PACED[key] = parse_host(redis.call('HGET', hosts, key) or false) end
  return PACED[key]
end
local function base_of(h)
  return h.base >= 0 and h.base or PACE.delay
end
-- The delay in force and why (the one formula of it: `status` shows what save_host stored):
-- the base ('setting', or a larger 'crawl-delay'), or, when more, the back-off or factor x
-- the smoothed fetch time ('delay_factor'), capped.
local function in_force(h)
  local base, factored = base_of(h), PACE.factor * h.fetch
  local adaptive = math.min(math.max(h.backoff, factored), PACE.cap)
  if adaptive > base then
    return adaptive, h.backoff >= factored and 'back-off' or 'delay_factor'
  end
  return base, base > PACE.delay and 'crawl-delay' or 'setting'
end
local function save_host(key, h)
  local delay, why = in_force(h)
  local saved = at(h.ready) .. ' '
    .. string.format('%.6f %.6f %.6f %.6f ', h.fetch, h.backoff, h.base, delay) .. why
  redis.call('HSET', hosts, key, saved)
  PACED[key] = parse_host(saved)
end
local function live(key)
  LIVE[key] = LIVE[key] or redis.call('ZCOUNT', lprefix .. key, now, '+inf')
  return LIVE[key]
end
local function take_slot(key, holder, expiry)
  local added = redis.call('ZADD', lprefix .. key, expiry, holder) == 1
  if added and LIVE[key] and tonumber(expiry) >= T then
    LIVE[key] = LIVE[key] + 1  -- (a new holder: one more live)
  else
    LIVE[key] = nil
  end
end
local function drop_slot(key, holder)
  redis.call('ZREM', lprefix .. key, holder)
  LIVE[key] = nil
end
-- `key`'s score in `ready` (false: not there)
local function turn_of(key)
  if TURNS[key] == nil then TURNS[key] = tonumber(redis.call('ZSCORE', ready, key)) or false end
  return TURNS[key]
end
-- Put `key` in `ready` at `when` (stored as `at` writes it)
local function set_turn(key, when)
  redis.call('ZADD', ready, at(when), key)
  TURNS[key] = on_us(when)
end
local function drop_turn(key)
  if TURNS[key] ~= false then redis.call('ZREM', ready, key) end
  TURNS[key] = false
end
-- the first URL waiting in `key`'s queue and its score ({} if none); the second is read
-- with it, the head once the first is taken
local function head_of(key)
  if HEADS[key] == nil then
    local two = redis.call('ZRANGE', qprefix .. key, '0', '1', 'WITHSCORES')
    HEADS[key], NEXTS[key] = {two[1], two[2]}, {two[3], two[4]}
  end
  return HEADS[key]
end
local function enqueue(key, score, url)
  redis.call('ZADD', qprefix .. key, score, url)
  HEADS[key], NEXTS[key] = nil, nil
end
local function dequeue(key, url)
  redis.call('ZREM', qprefix .. key, url)
  if HEADS[key] and HEADS[key][1] == url and NEXTS[key] then
    HEADS[key], NEXTS[key] = NEXTS[key], nil
  else
    HEADS[key], NEXTS[key] = nil, nil
  end
end
-- A request of key `k` (state `h`) that takes no slot just ended: the key's next request
-- waits the delay in force from now.
local function wait_from_now(k, h)
  h.ready = math.max(h.ready, T + in_force(h))
  save_host(k, h)
  if turn_of(k) then set_turn(k, h.ready) end
end

-- Put `key` in `ready` (at its next start), in `blocked`, or in neither (no free slot).
local function schedule(key)
  local head = head_of(key)
  if #head == 0 then
    drop_turn(key)
    redis.call('SREM', blocked, key)
    redis.call('SREM', qkeys, key)
    return
  end
  if live(key) >= PACE.conc then
    drop_turn(key)
    return
  end
  local s = tonumber(head[2])
  if s >= 0 and not allows(split_score(s)) then
    drop_turn(key)
    redis.call('SADD', blocked, key)
    return
  end
  redis.call('SREM', blocked, key)
  set_turn(key, load_host(key).ready)
end
local function schedule_touched()
  for key in pairs(touched) do
    if not turn_of(key) then schedule(key) end
  end
  touched = {}
end
local function unblock()
  for _, key in ipairs(redis.call('SMEMBERS', blocked)) do schedule(key) end
end

-- New URLs waiting in `key`'s queue at depth `d` (pending, held): `scored` holds their
-- scores and URLs, score first; one write of each kind for them all.
local function hold_all(key, scored, d)
  for i = 1, #scored, 1000 do  -- unpack's stack is bounded
    redis.call('ZADD', qprefix .. key, unpack(scored, i, math.min(i + 999, #scored)))
  end
  HEADS[key], NEXTS[key] = nil, nil
  redis.call('SADD', qkeys, key)
  redis.call('HINCRBY', counters, 'held', int(#scored / 2))
  pend(d, #scored / 2)
  touched[key] = true
end
-- Wait in `key`'s queue at depth `d` and priority `p` (a new URL: pending, held).
local function hold(key, url, d, p)
  hold_all(key, {score_of(d, p), url}, d)
end
-- An in-flight URL back at the head of its key's queue (its turn came: parked, recovered).
local function requeue(key, url)
  enqueue(key, -1, url)
  redis.call('SADD', qkeys, key)
  touched[key] = true
end

-- End a request of `url` (a slot of `key`): dur its seconds (-1: none was made), answer
-- 'push' (429/503 or a Retry-After), 'ok' (a success) or '-', base the key's base delay as
-- now known (-1: unchanged), not_before a time before which the key takes no request.
-- A push doubles the back-off (at least BACKOFF_MIN and the Retry-After, at most the cap),
-- a success halves it until it is below the base. Returns when the key may go next.
local function free_slot(key, url, dur, answer, retry_after, base, not_before)
  drop_slot(key, url)
  local h = load_host(key)
  if base >= 0 then h.base = base end
  if dur >= 0 then h.fetch = h.fetch == 0 and dur or (1 - SMOOTHING) * h.fetch + SMOOTHING * dur end
  local floor = math.max(base_of(h), BACKOFF_MIN)
  if PACE.adaptive == 1 and answer == 'push' then
    h.backoff = math.min(PACE.cap, math.max(2 * math.max(h.backoff, floor), retry_after))
  elseif answer == 'ok' and h.backoff > 0 then
    h.backoff = h.backoff / 2
    if h.backoff < floor then h.backoff = 0 end
  end
  if dur >= 0 then h.ready = math.max(h.ready, T + in_force(h)) end
  h.ready = math.max(h.ready, not_before)
  save_host(key, h)
  touched[key] = true
  return h.ready
end
local function free_slot_of(url, slot)
  if slot == '' then return 0 end
  local key, dur, answer, retry_after, base, not_before =
    string.match(slot, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
  return free_slot(key, url, tonumber(dur), answer, tonumber(retry_after), tonumber(base),
                   tonumber(not_before))
end

-- The keys due by `horizon` to release first, for `room` URLs: in their turns' order, or,
-- when more are due than there is room, those whose first URL is the shallowest, then of the
-- highest priority (its score), among the first due.
local function first_due(horizon, room)
  local due = redis.call('ZRANGEBYSCORE', ready, '-inf', horizon, 'LIMIT', '0', int(2 * room + 64))
  if #due <= room then return due end
  local heads = {}
  for _, key in ipairs(due) do
    local head = head_of(key)
    heads[key] = head[2] and tonumber(head[2]) or math.huge
  end
  table.sort(due, function(a, b) return heads[a] < heads[b] end)
  return due
end
-- Release the first URL of each due key while `room` allows, into `inflight` (a slot of its
-- key taken until its job claims it, or `grace` runs out), appending url, entry to `out`;
-- none while paused, or while the records stream is at its bound (a follower drains it; the
-- URLs in flight still end and are recorded).
local function release(room, out)
  if room <= 0 or paused() then return end
  local horizon = T + PACE.lead
  local due = first_due(horizon, room)
  if #due == 0 or stream_full() then return end
  local taken = 0
  for _, key in ipairs(due) do
    repeat  -- the key's URLs while it has slots free now (host_concurrency, no delay)
      if taken >= room then return end
      local head = head_of(key)
      local first = math.max(T, turn_of(key) or T)
      local start, turn = on_us(first), at(first)
      local entry = nil
      if #head > 0 and live(key) < PACE.conc then
        local url, s = head[1], tonumber(head[2])
        if s < 0 then
          dequeue(key, url)
          entry = redis.call('HGET', inflight, url)
          if entry then
            local d, _, rest = string.match(entry, '^(%S+) (%S+) (.*)$')
            entry = d .. ' ' .. turn .. ' ' .. rest
          end
        else
          local d, p = split_score(s)
          if allows(d) then
            dequeue(key, url)
            redis.call('HINCRBY', counters, 'held', '-1')
            if redis.call('HEXISTS', inflight, url) == 1 then
              pend(d, -1)  -- (in flight already: this copy goes)
            else
              entry = d .. ' ' .. turn .. ' 0 0 ' .. p
            end
          end
        end
        if entry then
          redis.call('HSET', inflight, url, entry)
          take_slot(key, url, T + PACE.grace)
          out[#out + 1] = url
          out[#out + 1] = entry
          taken = taken + 1
        end
      end
      schedule(key)
      -- a key with slots left goes again one delay after this start (its `ready` moves only
      -- when a request ends: a URL that robots.txt refuses costs its host no turn)
      local again = turn_of(key)
      if entry and again then
        again = math.max(again, start + in_force(load_host(key)))
        set_turn(key, again)
      end
    until not (entry and again and again <= horizon)
  end
end
local function room()
  return tonumber(window) - (redis.call('HLEN', inflight) - later_count())
end
-- The end of a script that held `n` URLs past the Bloom filter (revisits, requisites): count
-- them in the counters' `field`, schedule the keys they touched and release what is due.
-- Returns {n, released url, entry...}.
local function held_then_released(n, field)
  if n > 0 then redis.call('HINCRBY', counters, field, int(n)) end
  schedule_touched()
  local out = {n}
  release(room(), out)
  return out
end

-- Parked URLs whose time came go back to their key's queue (or to held, as new, in a
-- paused crawl: it then settles with nothing in flight).
local function take_due(limit)
  if later_count() == 0 then return end
  for _, url in ipairs(redis.call('ZRANGEBYSCORE', later, '-inf', now, 'LIMIT', '0', int(limit))) do
    redis.call('ZREM', later, url)
    LATER_N = nil
    local key = redis.call('HGET', parked, url)
    redis.call('HDEL', parked, url)
    local entry = redis.call('HGET', inflight, url)
    if key and entry then
      if paused() then
        local d, p = string.match(entry, '^(%S+) %S+ %S+ %S+ (%S+)$')
        d = tonumber(redis.call('HGET', lowered, url) or d)
        redis.call('HDEL', inflight, url)
        redis.call('HDEL', lowered, url)
        pend(d, -1)
        hold(key, url, d, p or 0)
        redis.call('HINCRBY', counters, 'put_back', '1')
      else
        requeue(key, url)
      end
    end
  end
end
