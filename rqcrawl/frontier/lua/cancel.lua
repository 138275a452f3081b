--#include frontier
if redis.call('HEXISTS', counters, 'cancelled_at') == 1 then return false end
redis.call('HSETNX', counters, 'paused_at', now)
redis.call('HSET', counters, 'cancelled_at', now)
local depths = {}
for _, d in ipairs(redis.call('HVALS', spec)) do depths[d] = true end
for d in pairs(depths) do
  local h = sprefix .. d
  local kv = redis.call('HGETALL', h)
  for i = 2, #kv, 2 do emit(cjson.decode(kv[i]).r) end
  redis.call('DEL', h)
end
local n_held = tonumber(redis.call('HGET', counters, 'held') or '0')
for _, key in ipairs(redis.call('SMEMBERS', qkeys)) do redis.call('DEL', qprefix .. key) end
local flying = redis.call('HGETALL', inflight)
redis.call('DEL', inflight, later, parked, ready, blocked, qkeys, pending, spec, lowered,
           revisiting, sitemapped, via)
redis.call('HSET', counters, 'held', 0)
redis.call('HINCRBY', counters, 'dropped', n_held + #flying / 2)
local out = {n_held}
for _, v in ipairs(flying) do out[#out + 1] = v end
return out
