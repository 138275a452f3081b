--#include bloom
--#include frontier
local max_total = tonumber(max_pages)
local limit = max_total
local kids = tonumber(n)
if SHARDED and max_total > 0 then
  limit = tonumber(redis.call('HGET', counters, 'pages_allowed') or '0')
  local left = limit - tonumber(redis.call('HGET', counters, 'admitted') or '0')
  if left < kids and redis.call('HEXISTS', counters, 'pages_out') == 0 then
    bloom_alloc(bloom0, tonumber(shard_bits), size)
    local new = bloom_check(bloom0, tonumber(shard_bits), tonumber(k), ARGV,
                            children + 4 * kids, kids, false)
    local want = 0
    for i = 1, kids do
      if new[i] == 1 and ARGV[children + 4 * (i - 1)] == '-' then want = want + 1 end
    end
    if want > left then return {2, want - left, 0, 0, 0, 0, 0} end
  end
end
-- (URLs readmitted for a revisit, counted as they join `revisiting`: none, none there)
local revisits = tonumber(read_counters('revisits')) or 0
refresh_allowed()
local allowed0, level0 = allowed(), LEVEL
local reap_due, shift, next_at, d_done = 0, 0, 0, 0
if done ~= '' then
  local entry = redis.call('HGET', inflight, done)
  if not entry then return {0, 0, 0, 0, 0, 0, 0, ''} end
  local d_entry = tonumber(string.match(entry, '^(%S+)'))
  local low = redis.call('HGET', lowered, done)
  d_done = math.min(d_entry, tonumber(low or d_entry))
  local rd = tonumber(rec_depth)
  if rd > d_done then shift = rd - d_done end
  if final == '1' then
    redis.call('HDEL', inflight, done)
    -- (parked: `later` and `parked` go together; none parked, as often: no write. Its
    -- release below reads how many are parked anyway.)
    if later_count() > 0 and redis.call('ZREM', later, done) == 1 then
      LATER_N = LATER_N - 1
      redis.call('HDEL', parked, done)
    end
    redis.call('ZREM', leased, done)
    if low then redis.call('HDEL', lowered, done) end
    if revisits > 0 then redis.call('SREM', revisiting, done) end
    if string.find(marks, 's', 1, true) then redis.call('SREM', sitemapped, done) end
    if string.find(marks, 'v', 1, true) then redis.call('HDEL', via, done) end
    pend(d_done, -1)
    for field, count in string.gmatch(increments, '(%S+) (%S+)') do
      local per_host = string.find(field, '|', 1, true)
      redis.call('HINCRBY', per_host and host_pages or counters, field, count)
    end
    next_at = free_slot_of(done, slot)
    redis.call('HSET', counters, 'last_at', now)
    if reap_every ~= '0' and redis.call('SET', reap_lock, '1', 'NX', 'EX', reap_every) then
      reap_due = 1
    end
  end
end
local dup = ''
if digest ~= '' and done ~= '' then  -- a body the crawl already fetched: named in the record
  local first = redis.call('HSETNX', digests, digest, done) == 0
                and redis.call('HGET', digests, digest)
  if first and first ~= done then
    dup = first
    local named = '"duplicate_of":' .. cjson.encode(first)
    record = string.gsub(record, '"duplicate_of":null', function() return named end, 1)
  end
end
local cd = tonumber(child_depth) - shift
local sbits, kk = tonumber(shard_bits), tonumber(k)
local max_host = tonumber(max_host_pages)
local max_share, floor = tonumber(max_host_share), tonumber(share_floor)
if kids > 0 then bloom_alloc(bloom0, sbits, size) end
local total = nil  -- (read at the first new child)
local admitted = 0
local by_key, by_host = {}, {}  -- the admitted children, held once the loop is done
local skip = nil
local fresh = bloom_check(bloom0, sbits, kk, ARGV, children + 4 * kids, kids, true)
local refused = {}
for i = 1, kids do
  local at = children + 4 * (i - 1)
  local verdict, key, host, url = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  if fresh[i] == 1 then
    if verdict == '-' then
      total = total or tonumber(redis.call('HGET', counters, 'admitted') or '0')
      local so_far = total + admitted
      local whole = so_far + tonumber(others)
      local of_host = 0  -- (read only for a per-host budget)
      if max_host > 0 or max_share > 0 then
        of_host = tonumber(redis.call('HGET', host_pages, host) or '0') + (by_host[host] or 0)
      end
      if max_total > 0 and so_far >= limit then
        verdict = 'max_pages'
      elseif max_host > 0 and of_host >= max_host then
        verdict = 'max_pages_per_host'
      elseif max_share > 0 and whole >= floor and of_host + 1 > max_share * (whole + 1) then
        verdict = 'max_host_share'
      end
    end
    if verdict == '-' then
      local scored = by_key[key] or {}
      by_key[key] = scored
      scored[#scored + 1], scored[#scored + 2] = score_of(cd, child_priority), url
      by_host[host] = (by_host[host] or 0) + 1
      if source ~= '' then redis.call('SADD', sitemapped, url) end
      if child_via ~= '' then redis.call('HSET', via, url, child_via) end
      admitted = admitted + 1
    else
      skip = skip or cjson.decode(skip_record)
      skip.url, skip.outcome, skip.depth = url, verdict, cd
      refused[#refused + 1] = {url, cjson.encode(skip)}
      redis.call('HINCRBY', counters, skip_prefix .. verdict, '1')
    end
  elseif fresh[i] == 0 and EXACT then
    correct(key, url, cd)
  end
end
for key, scored in pairs(by_key) do hold_all(key, scored, cd) end
for host, count in pairs(by_host) do redis.call('HINCRBY', host_pages, host, int(count)) end
if admitted > 0 then redis.call('HINCRBY', counters, 'admitted', int(admitted)) end
if cut ~= '' and shift > 0 then push_links(cjson.decode(cut), cd, child_priority, child_via) end

if foreign ~= '' then
  local entries = cjson.decode(foreign)
  for i, entry in ipairs(entries) do
    local head, d, tail = string.match(entry, '^(%S+ %S+) (%S+) (.*)$')
    entries[i] = head .. ' ' .. cd .. ' ' .. tail
    pend_sent(cd, 1)
  end
  for i = 1, #entries, 1000 do  -- unpack's stack is bounded
    redis.call('RPUSH', outbox, unpack(entries, i, math.min(i + 999, #entries)))
  end
  redis.call('HINCRBY', counters, 'outboxed', int(#entries))
  sent = sent + #entries
end
if corrected > 0 then redis.call('HINCRBY', counters, 'lowered', int(corrected)) end

-- records: now or held back, once the level is known after this end
refresh_allowed()
for _, r in ipairs(refused) do
  if EXACT and cd > LEVEL + 1 then hold_back(r[1], cd, cjson.encode({r = r[2], o = 1, p = 0}))
  else emit(r[2]) end
end
if done ~= '' and final == '1' and record ~= '' then
  local rec = shift > 0 and with_depth(record, d_done) or record
  if EXACT and d_done > LEVEL + 1 then
    local payload = {r = rec, p = tonumber(child_priority), v = child_via,
                     o = tonumber(child_depth) - tonumber(rec_depth)}
    if links ~= '' then payload.l = cjson.decode(links) end
    hold_back(done, d_done, cjson.encode(payload))
  else
    emit(rec)
  end
end
refresh_allowed()  -- (a record held back may have reached max_ahead)
schedule_touched()
local settling = 0
if LEVEL > level0 or allowed() ~= allowed0 then settling = advance(allowed0) end
local level_up = 0
if SHARDED and (min_pending() or math.huge) > LEVEL then level_up = 1 end
if not SHARDED and LEVEL > level0 then level_up = 1 end
local out = {1, admitted, reap_due, level_up, sent, settling, string.format('%.6f', next_at), dup}
release(room(), out)
return out
