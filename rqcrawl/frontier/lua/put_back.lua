--#include frontier
if redis.call('HEXISTS', counters, 'paused_at') == 0 then return 0 end
if not same_entry(redis.call('HGET', inflight, url), expected) then return 0 end
refresh_allowed()
local d, p = string.match(expected, '^(%S+) %S+ %S+ %S+ (%S+)$')
d = tonumber(redis.call('HGET', lowered, url) or d)
redis.call('HDEL', inflight, url)
redis.call('HDEL', lowered, url)
redis.call('ZREM', leased, url)
free_slot(key, url, -1, '-', 0, -1, 0)
pend(d, -1)
if redis.call('HEXISTS', counters, 'cancelled_at') == 1 then
  redis.call('HINCRBY', counters, 'dropped', 1)
else
  hold(key, url, d, p or 0)
  redis.call('HINCRBY', counters, 'put_back', 1)
end
schedule_touched()
return 1
