--#include frontier
refresh_allowed()
local entry = redis.call('HGET', inflight, url)
local go = '0'
if entry then
  local a, t = string.match(entry, '^%S+ %S+ (%d+) (%d+)')
  if a == attempt and t == turn then
    redis.call('ZADD', leased, expiry, url)
    local slots = lprefix .. key
    local mine = tonumber(redis.call('ZSCORE', slots, url) or '-1')
    local h = load_host(key)
    if mine >= T or (live(key) < PACE.conc and h.ready <= T) then
      redis.call('ZADD', slots, expiry, url)
      schedule(key)  -- (out of `ready` if that took its last slot)
      go = '1'
    else
      go = at(math.max(h.ready, T + 0.05))
    end
  end
end
if note == '1' then redis.call('HSET', counters, 'last_claim_at', now) end
local paused = redis.call('HEXISTS', counters, 'paused_at')
local identity = redis.call('HGET', counters, 'started_at')
take_due(tonumber(limit))
schedule_touched()
local out = {}
release(room(), out)
return {entry, paused, identity, out, redis.call('SISMEMBER', sitemapped, url),
        redis.call('HGET', via, url), go, redis.call('HGET', lowered, url), LEVEL}
