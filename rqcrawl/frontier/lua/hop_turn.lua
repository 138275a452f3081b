--#include frontier
if ended ~= '' then wait_from_now(ended, load_host(ended)) end
local h = load_host(key)
local others = 0
if own ~= '1' then
  local mine = tonumber(redis.call('ZSCORE', lprefix .. key, holder) or '-1') >= T
  others = live(key) - (mine and 1 or 0)
end
if h.ready > T or others >= PACE.conc then
  local again = math.max(h.ready, T + 0.05)
  if own ~= '1' then
    take_slot(key, holder, again + tonumber(hold_for))
    drop_turn(key)
  end
  return at(again)
end
drop_slot(key, holder)
wait_from_now(key, h)
schedule(key)
return '0'
