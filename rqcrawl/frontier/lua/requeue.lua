--#include frontier
local lease = tonumber(redis.call('ZSCORE', leased, url) or '-1')
if lease >= T then return {0} end
if lease >= 0 then redis.call('ZREM', leased, url) end
if expected == '' or not same_entry(redis.call('HGET', inflight, url), expected) then
  return {0}
end
refresh_allowed()
redis.call('HSET', inflight, url, entry)
redis.call('ZREM', later, url)
LATER_N = nil
redis.call('HDEL', parked, url)
redis.call('HINCRBY', counters, 'recovered', 1)
requeue(key, url)
schedule_touched()
local out = {1}
release(room(), out)
return out
