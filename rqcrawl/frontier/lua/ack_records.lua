if #ARGV >= delivered then
  local acked = redis.call('XACK', items, group, unpack(ARGV, delivered))
  if acked > 0 then redis.call('HINCRBY', delivered_to, consumer, acked) end
end
redis.call('HDEL', followers, consumer)
local floor = nil
local function lower(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  local a, b = tonumber(ms), tonumber(seq)
  if not floor or a < floor[1] or (a == floor[1] and b < floor[2]) then floor = {a, b} end
end
for _, g in ipairs(redis.call('XINFO', 'GROUPS', items)) do
  local info = {}
  for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
  local pending = redis.call('XPENDING', items, info['name'])
  if pending[1] > 0 then
    lower(pending[2])
  else
    local ms, seq = string.match(info['last-delivered-id'], '^(%d+)-(%d+)$')
    lower(ms .. '-' .. string.format('%d', tonumber(seq) + 1))
  end
end
if floor then
  local id = string.format('%d-%d', floor[1], floor[2])
  local last = redis.call('XREVRANGE', items, '(' .. id, '-', 'COUNT', 1)[1]
  if last then  -- the bytes appended up to the last entry trimmed (emit's `o`)
    for i = 1, #last[2], 2 do
      if last[2][i] == 'o' then redis.call('HSET', counters, 'trimmed_bytes', last[2][i + 1]) end
    end
  end
  redis.call('XTRIM', items, 'MINID', id)
end
return redis.call('XLEN', items)
