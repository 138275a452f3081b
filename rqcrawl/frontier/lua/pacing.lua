-- a key's pace
local function load_host(key)
  local h = {ready = 0, fetch = 0, backoff = 0, base = -1}
  local raw = redis.call('HGET', hosts, key)
  if raw then
    local r, f, b, base = string.match(raw, '^(%S+) (%S+) (%S+) (%S+)$')
    if r then
      h.ready, h.fetch, h.backoff, h.base = tonumber(r), tonumber(f), tonumber(b), tonumber(base)
    end
  end
  return h
end
local function save_host(key, h)
  redis.call('HSET', hosts, key, at(h.ready) .. ' ' .. string.format('%.6f %.6f %.6f',
             h.fetch, h.backoff, h.base))
end
local function base_of(h)
  return h.base >= 0 and h.base or PACE.delay
end
-- the delay in force: the base, or the back-off, or factor x the smoothed fetch time (capped)
local function in_force(h)
  return math.max(base_of(h), math.min(math.max(h.backoff, PACE.factor * h.fetch), PACE.cap))
end
local function live(key)
  return redis.call('ZCOUNT', lprefix .. key, T, '+inf')
end
-- A request of key `k` (state `h`) that takes no slot just ended: the key's next request
-- waits the delay in force from now.
local function wait_from_now(k, h)
  h.ready = math.max(h.ready, T + in_force(h))
  save_host(k, h)
  if redis.call('ZSCORE', ready, k) then redis.call('ZADD', ready, at(h.ready), k) end
end

-- Put `key` in `ready` (at its next start), in `blocked`, or in neither (no free slot).
local function schedule(key)
  local head = redis.call('ZRANGE', qprefix .. key, 0, 0, 'WITHSCORES')
  if #head == 0 then
    redis.call('ZREM', ready, key)
    redis.call('SREM', blocked, key)
    redis.call('SREM', qkeys, key)
    return
  end
  if live(key) >= PACE.conc then
    redis.call('ZREM', ready, key)
    return
  end
  local s = tonumber(head[2])
  if s >= 0 and split_score(s) > ALLOWED then
    redis.call('ZREM', ready, key)
    redis.call('SADD', blocked, key)
    return
  end
  redis.call('SREM', blocked, key)
  redis.call('ZADD', ready, at(load_host(key).ready), key)
end
local function schedule_touched()
  for key in pairs(touched) do
    if not redis.call('ZSCORE', ready, key) then schedule(key) end
  end
  touched = {}
end
local function unblock()
  for _, key in ipairs(redis.call('SMEMBERS', blocked)) do schedule(key) end
end

-- Wait in `key`'s queue at depth `d` and priority `p` (a new URL: pending, held).
local function hold(key, url, d, p)
  redis.call('ZADD', qprefix .. key, score_of(d, p), url)
  redis.call('SADD', qkeys, key)
  redis.call('HINCRBY', counters, 'held', 1)
  pend(d, 1)
  touched[key] = true
end
-- An in-flight URL back at the head of its key's queue (its turn came: parked, recovered).
local function requeue(key, url)
  redis.call('ZADD', qprefix .. key, -1, url)
  redis.call('SADD', qkeys, key)
  touched[key] = true
end

-- End a request of `url` (a slot of `key`): dur its seconds (-1: none was made), answer
-- 'push' (429/503 or a Retry-After), 'ok' (a success) or '-', base the key's base delay as
-- now known (-1: unchanged), not_before a time before which the key takes no request.
-- A push doubles the back-off (at least BACKOFF_MIN and the Retry-After, at most the cap),
-- a success halves it until it is below the base. Returns when the key may go next.
local function free_slot(key, url, dur, answer, retry_after, base, not_before)
  redis.call('ZREM', lprefix .. key, url)
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
  local due = redis.call('ZRANGEBYSCORE', ready, '-inf', horizon, 'LIMIT', 0, 2 * room + 64)
  if #due <= room then return due end
  local heads = {}
  for _, key in ipairs(due) do
    local head = redis.call('ZRANGE', qprefix .. key, 0, 0, 'WITHSCORES')
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
  if room <= 0 or redis.call('HEXISTS', counters, 'paused_at') == 1 then return end
  if stream_full() then return end
  local taken = 0
  local horizon = T + PACE.lead
  for _, key in ipairs(first_due(horizon, room)) do
    local q = qprefix .. key
    repeat  -- the key's URLs while it has slots free now (host_concurrency, no delay)
      if taken >= room then return end
      local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
      local turn = at(math.max(T, tonumber(redis.call('ZSCORE', ready, key) or T)))
      local entry = nil
      if #head > 0 and live(key) < PACE.conc then
        local url, s = head[1], tonumber(head[2])
        if s < 0 then
          redis.call('ZREM', q, url)
          entry = redis.call('HGET', inflight, url)
          if entry then
            local d, _, rest = string.match(entry, '^(%S+) (%S+) (.*)$')
            entry = d .. ' ' .. turn .. ' ' .. rest
          end
        else
          local d, p = split_score(s)
          if d <= ALLOWED then
            redis.call('ZREM', q, url)
            redis.call('HINCRBY', counters, 'held', -1)
            if redis.call('HEXISTS', inflight, url) == 1 then
              pend(d, -1)  -- (in flight already: this copy goes)
            else
              entry = d .. ' ' .. turn .. ' 0 0 ' .. p
            end
          end
        end
        if entry then
          redis.call('HSET', inflight, url, entry)
          redis.call('ZADD', lprefix .. key, T + PACE.grace, url)
          out[#out + 1] = url
          out[#out + 1] = entry
          taken = taken + 1
        end
      end
      schedule(key)
      -- a key with slots left goes again one delay after this start (its `ready` moves only
      -- when a request ends: a URL that robots.txt refuses costs its host no turn)
      local again = redis.call('ZSCORE', ready, key)
      if entry and again then
        again = math.max(tonumber(again), tonumber(turn) + in_force(load_host(key)))
        redis.call('ZADD', ready, at(again), key)
      end
    until not (entry and again and again <= horizon)
  end
end
local function room()
  return tonumber(window) - (redis.call('HLEN', inflight) - redis.call('ZCARD', later))
end
-- The end of a script that held `n` URLs past the Bloom filter (revisits, requisites): count
-- them in the counters' `field`, schedule the keys they touched and release what is due.
-- Returns {n, released url, entry...}.
local function held_then_released(n, field)
  if n > 0 then redis.call('HINCRBY', counters, field, n) end
  schedule_touched()
  local out = {n}
  release(room(), out)
  return out
end

-- Parked URLs whose time came go back to their key's queue (or to held, as new, in a
-- paused crawl: it then settles with nothing in flight).
local function take_due(limit)
  local paused = redis.call('HEXISTS', counters, 'paused_at') == 1
  for _, url in ipairs(redis.call('ZRANGEBYSCORE', later, '-inf', T, 'LIMIT', 0, limit)) do
    redis.call('ZREM', later, url)
    local key = redis.call('HGET', parked, url)
    redis.call('HDEL', parked, url)
    local entry = redis.call('HGET', inflight, url)
    if key and entry then
      if paused then
        local d, p = string.match(entry, '^(%S+) %S+ %S+ %S+ (%S+)$')
        d = tonumber(redis.call('HGET', lowered, url) or d)
        redis.call('HDEL', inflight, url)
        redis.call('HDEL', lowered, url)
        pend(d, -1)
        hold(key, url, d, p or 0)
        redis.call('HINCRBY', counters, 'put_back', 1)
      else
        requeue(key, url)
      end
    end
  end
end
