--#include frontier
refresh_allowed()
take_due(tonumber(limit))
schedule_touched()
local out = {advance(allowed())}
release(room(), out)
return out
