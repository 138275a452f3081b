--#include frontier
local identity = read_counters('started_at')
refresh_allowed()
local entry = redis.call('HGET', inflight, url)
local go = '0'
if entry then
  local a, t = string.match(entry, '^%S+ %S+ (%d+) (%d+)')
  if a == attempt and t == turn then
    redis.call('ZADD', leased, expiry, url)
    local mine = tonumber(redis.call('ZSCORE', lprefix .. key, url) or '-1')
    if mine >= T then  -- the slot its release took: the key's schedule stands
      take_slot(key, url, expiry)
      go = '1'
    elseif live(key) < PACE.conc and load_host(key).ready <= T then
      take_slot(key, url, expiry)
      schedule(key)  -- (out of `ready` if that took its last slot)
      go = '1'
    else
      go = at(math.max(load_host(key).ready, T + 0.05))
    end
  end
end
if note == '1' then redis.call('HSET', counters, 'last_claim_at', now) end
take_due(tonumber(limit))
schedule_touched()
local out = {}
release(room(), out)
return {entry, paused() and 1 or 0, identity, out, redis.call('SISMEMBER', sitemapped, url),
        redis.call('HGET', via, url), go, redis.call('HGET', lowered, url), LEVEL}
