--#include frontier
if ended ~= '' then wait_from_now(ended, load_host(ended)) end
local h = load_host(key)
local slots = lprefix .. key
local others = 0
if own ~= '1' then
  local mine = tonumber(redis.call('ZSCORE', slots, holder) or '-1') >= T
  others = live(key) - (mine and 1 or 0)
end
if h.ready > T or others >= PACE.conc then
  local again = math.max(h.ready, T + 0.05)
  if own ~= '1' then
    redis.call('ZADD', slots, again + tonumber(hold_for), holder)
    redis.call('ZREM', ready, key)
  end
  return at(again)
end
redis.call('ZREM', slots, holder)
wait_from_now(key, h)
schedule(key)
return '0'
