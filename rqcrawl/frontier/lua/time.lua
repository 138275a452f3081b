-- A time to store (a score, a key's state): to the microsecond, rounded down, so that a time
-- "now" compares as due with `now` itself. (x * 1e6 is rounded to the nearest quarter
-- microsecond at today's times, so its floor can be a microsecond past x: then one less.)
local function at(x)
  local us = math.floor(x * 1000000)
  local s = string.format('%.6f', us / 1000000)
  if tonumber(s) > x then s = string.format('%.6f', (us - 1) / 1000000) end
  return s
end
