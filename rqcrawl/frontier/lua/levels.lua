-- The levels of exact depth: URLs pending per depth, the settled level, the deepest
-- URL that may be released.
local function pend(d, n)
  local field = int(d)
  local left = redis.call('HINCRBY', pending, field, int(n))
  if left <= 0 then redis.call('HDEL', pending, field) end
  if left <= 0 or left == n then LEVEL_STALE = true end  -- a depth went, or came
end
local function min_pending()
  local all, m = redis.call('HGETALL', pending), nil
  for i = 1, #all, 2 do
    local d = tonumber(all[i])
    if tonumber(all[i + 1]) > 0 and (m == nil or d < m) then m = d end
  end
  return m
end
-- The settled level; on one Redis raised here as URLs end, over shards by the coordinator.
-- With nothing pending every depth is settled (a crawl before its seeds, or at its end),
-- but the stored level stays where it was: the next URLs start from it.
local function stored_level()
  STORED = STORED or tonumber(redis.call('HGET', counters, 'level') or '0')
  return STORED
end
-- What a run reads of the counters first, in one read: the stored level, whether the crawl
-- is paused (see paused), the records' bytes (see stream_full), and the `more` fields asked
-- for, returned in their order.
local function read_counters(...)
  local got = redis.call('HMGET', counters, 'level', 'paused_at', 'record_bytes',
                         'trimmed_bytes', ...)
  STORED = STORED or tonumber(got[1] or '0')
  if PAUSED == nil then PAUSED = got[2] ~= false end
  if TRIMMED == nil then APPENDED, TRIMMED = tonumber(got[3]) or 0, tonumber(got[4]) or 0 end
  return unpack(got, 5)
end
local function store_level(level)
  redis.call('HSET', counters, 'level', level)
  STORED, LEVEL_STALE = tonumber(level), true
end
local function level_now()
  local stored = stored_level()
  if SHARDED then return stored end
  local m = min_pending()
  if m == nil then return MAXD + 1 end
  if m > stored then
    store_level(m)
    return m
  end
  return stored
end
local function held_back()
  SPEC_N = SPEC_N or redis.call('HLEN', spec)
  return SPEC_N
end
-- The deepest URL that may be released: any (first-found depth, or room left for held-back
-- records), or the level's own (the barrier: budgets, max_ahead 0, or max_ahead reached).
-- Where it hangs on the count of held-back records, that count is read when first asked
-- for (ALLOWED nil till then): a URL at the level or above goes either way (allows), so a
-- run that releases none deeper reads no count.
local function refresh_allowed()
  if LEVEL_STALE then
    LEVEL = level_now()
    LEVEL_STALE = false
  end
  if not EXACT then
    ALLOWED = math.huge
  elseif STRICT then
    ALLOWED = LEVEL
  else
    ALLOWED = nil
  end
end
local function allowed()
  if ALLOWED == nil then ALLOWED = held_back() >= AHEAD and LEVEL or math.huge end
  return ALLOWED
end
-- Whether a URL of depth `d` may be released now.
local function allows(d)
  return d <= LEVEL or d <= allowed()
end
