-- Numbers as redis.call arguments. Redis writes a Lua number argument out with "%.17g", a
-- floating-point format that costs several times "%d": at a page's hundred-odd numeric
-- arguments that was a tenth of Redis's work (docs/benchmarks.md). So a whole number goes
-- as text made here, a constant as text ('1', not 1), and the time as `now`, the text it
-- came in as.
local function int(n)
  return string.format('%d', n)
end
