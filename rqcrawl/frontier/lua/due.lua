--#include frontier
refresh_allowed()
take_due(tonumber(limit))
schedule_touched()
local out = {advance(ALLOWED)}
release(room(), out)
return out
