--#include frontier
if redis.call('HEXISTS', counters, 'cancelled_at') == 1 then return {0} end
refresh_allowed()
local added = 0
-- each entry a messages.Readmitted: "priority depth key url"
for i = entries, #ARGV do
  local p, d, key, url = string.match(ARGV[i], '^(%S+) (%S+) (%S+) (.*)$')
  if redis.call('HEXISTS', inflight, url) == 0 and redis.call('SADD', revisiting, url) == 1 then
    hold(key, url, d, p)
    added = added + 1
  end
end
return held_then_released(added, 'revisits')
