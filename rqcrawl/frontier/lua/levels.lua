-- The levels of exact depth: URLs pending per depth, the settled level, the deepest
-- URL that may be released.
local function pend(d, n)
  if redis.call('HINCRBY', pending, d, n) <= 0 then redis.call('HDEL', pending, d) end
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
local function level_now()
  local stored = tonumber(redis.call('HGET', counters, 'level') or '0')
  if SHARDED then return stored end
  local m = min_pending()
  if m == nil then return MAXD + 1 end
  if m > stored then
    redis.call('HSET', counters, 'level', m)
    return m
  end
  return stored
end
-- The deepest URL that may be released: any (first-found depth, or room left for held-back
-- records), or the level's own (the barrier: budgets, max_ahead 0, or max_ahead reached).
local function refresh_allowed()
  LEVEL = level_now()
  if not EXACT then
    ALLOWED = math.huge
  elseif STRICT or redis.call('HLEN', spec) >= AHEAD then
    ALLOWED = LEVEL
  else
    ALLOWED = math.huge
  end
end
