local granted = tonumber(redis.call('HGET', counters, 'pages_granted') or '0')
local left = tonumber(max_pages) - granted
local want = math.max(tonumber(need), math.min(tonumber(block), math.ceil(left / tonumber(shards))))
local give = math.max(0, math.min(left, want))
if give > 0 then redis.call('HINCRBY', counters, 'pages_granted', give) end
return give
