--#include frontier
refresh_allowed()
local allowed0 = allowed()
local raised = 0
if tonumber(level) > LEVEL then
  store_level(level)
  raised = 1
  refresh_allowed()
end
local out = {raised, advance(allowed0)}
release(room(), out)
return out
