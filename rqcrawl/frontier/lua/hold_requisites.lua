--#include bloom
--#include frontier
if redis.call('HEXISTS', counters, 'cancelled_at') == 1 then return {0} end
refresh_allowed()
local count, sbits = tonumber(n), tonumber(shard_bits)
bloom_alloc(bloom0, sbits, size)
local new = bloom_check(bloom0, sbits, tonumber(k), ARGV, tail + 2 * count, count, true)
local held_now = 0
for i = 1, count do
  if new[i] == 1 then
    hold(ARGV[tail + 2 * (i - 1)], ARGV[tail + 2 * (i - 1) + 1], tonumber(depth), priority)
    held_now = held_now + 1
  end
end
return held_then_released(held_now, 'requisites')
