--#include frontier
refresh_allowed()
free_slot_of(url, slot)
schedule_touched()
local out = {}
release(room(), out)
return out
