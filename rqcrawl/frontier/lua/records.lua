-- Whether the records stream holds `undelivered` ("RECORDS BYTES") records or bytes of them.
local function stream_full()
  local most, most_bytes = string.match(undelivered, '^(%d+) (%d+)$')
  if redis.call('XLEN', items) >= tonumber(most) then return true end
  if TRIMMED == nil then
    local b = redis.call('HMGET', counters, 'record_bytes', 'trimmed_bytes')
    APPENDED, TRIMMED = tonumber(b[1]) or 0, tonumber(b[2]) or 0
  end
  return APPENDED - TRIMMED >= tonumber(most_bytes)
end
-- held-back records (see above); each entry carries `o`, the bytes of records appended to the
-- stream up to it, so that trimming it (ACK_RECORDS) says how many bytes left
local function emit(record)
  local o = redis.call('HINCRBY', counters, 'record_bytes', int(#record))
  APPENDED = o
  redis.call('XADD', items, '*', 'r', record, 'o', int(o))
end
local function with_depth(record, d)
  return (string.gsub(record, '"depth":%-?%d+', '"depth":' .. d, 1))
end
local function hold_back(url, d, payload)
  redis.call('HSET', spec, url, int(d))
  SPEC_N = nil
  redis.call('HSET', sprefix .. d, url, payload)
end
-- Emit the held-back records that the level made final, at most `budget`; whether some
-- are left. Depths up to the counters' `settled` are done: no record is held back at a
-- depth the stored level passed, so each depth is settled once. (With nothing pending,
-- LEVEL is past max_depth without being stored: what is held back then goes out, but the
-- depths stay open for URLs admitted later, a revisit's or a new seed's.)
local function settle(budget)
  if held_back() == 0 then return false end
  local n = 0
  local stored = stored_level()
  local first = tonumber(redis.call('HGET', counters, 'settled') or '-1') + 1
  for d = first, math.min(LEVEL + 1, MAXD + 1) do
    local h = sprefix .. d
    local cursor = '0'
    repeat
      if n >= budget then return true end
      local scan = redis.call('HSCAN', h, cursor, 'COUNT', '100')
      cursor = scan[1]
      local kv = scan[2]
      for i = 1, #kv, 2 do
        emit(cjson.decode(kv[i + 1]).r)
        redis.call('HDEL', h, kv[i])
        redis.call('HDEL', spec, kv[i])
        SPEC_N = nil
        n = n + 1
      end
    until cursor == '0'
    if d <= stored + 1 then redis.call('HSET', counters, 'settled', int(d)) end
  end
  return false
end
