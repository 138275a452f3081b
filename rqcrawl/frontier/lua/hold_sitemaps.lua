--#include frontier
if redis.call('HEXISTS', counters, 'cancelled_at') == 1 then return {0, 0} end
refresh_allowed()
local held_now, capped = 0, 0
for i = triples, #ARGV, 3 do
  local count_field, key, entry = 'docs|' .. ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('HEXISTS', sitemaps, entry) == 0 then
    if tonumber(redis.call('HGET', sitemaps, count_field) or '0') < tonumber(cap) then
      redis.call('HSET', sitemaps, entry, 1)
      redis.call('HINCRBY', sitemaps, count_field, 1)
      hold(key, entry, 0, priority)
      held_now = held_now + 1
    else
      capped = capped + 1
    end
  end
end
schedule_touched()
local out = {held_now, capped}
release(room(), out)
return out
