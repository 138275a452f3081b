--#include frontier
refresh_allowed()
local next_at = free_slot_of(url, slot)
schedule_touched()
local out = {string.format('%.6f', next_at)}
release(room(), out)
return out
