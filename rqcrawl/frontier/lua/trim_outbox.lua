if redis.call('GET', lock) ~= token then return 0 end
if tonumber(n) == 0 then
  redis.call('DEL', lock)
  return 1 + redis.call('LLEN', outbox)
end
for _, entry in ipairs(redis.call('LRANGE', outbox, 0, tonumber(n) - 1)) do
  local d = math.max(0, tonumber(string.match(entry, '^%S+ %S+ (%S+)')) - 1)
  if redis.call('HINCRBY', pending, d, -1) <= 0 then redis.call('HDEL', pending, d) end
end
redis.call('LTRIM', outbox, tonumber(n), -1)
redis.call('DEL', lock)
return 1 + redis.call('LLEN', outbox)
