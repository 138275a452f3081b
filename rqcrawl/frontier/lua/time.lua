-- A time to store (a score, a key's state): to the microsecond, rounded down, so that a time
-- "now" compares as due with `now` itself. (x * 1e6 is rounded to the nearest quarter
-- microsecond at today's times, so its floor can be a microsecond past x: then one less.)
-- `on_us` is its value, what its text `at` reads back as: us / 1e6 is the double nearest to
-- the text's decimal, as tonumber would make it, without parsing it (a tonumber is a
-- thousand-odd instructions of strtod).
local function on_us(x)
  local us = math.floor(x * 1000000)
  if us / 1000000 > x then us = us - 1 end
  return us / 1000000
end
local function at(x)
  return string.format('%.6f', on_us(x))
end
