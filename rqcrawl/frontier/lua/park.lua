--#include frontier
if not same_entry(redis.call('HGET', inflight, url), expected) then return {0, '0'} end
refresh_allowed()
redis.call('HSET', inflight, url, entry)
redis.call('ZREM', leased, url)
if counter ~= '' then redis.call('HINCRBY', counters, counter, 1) end
local next_at = free_slot_of(url, slot)
if tonumber(until_at) <= T then
  requeue(key, url)
else
  redis.call('ZADD', later, until_at, url)
  LATER_N = nil
  redis.call('HSET', parked, url, key)
end
schedule_touched()
local out = {1, string.format('%.6f', next_at)}
release(room(), out)
return out
