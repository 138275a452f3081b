-- A link in the outbox is pending at the depth of the page it comes from: admitted at `d`,
-- it may lower a URL of depth d + 1 to d.
local function pend_sent(d, n)
  pend(math.max(0, d - 1), n)
end
-- Send `links` ("shard verdict url") at depth `d` and priority `p` through the outbox, to be
-- admitted (or found shorter) on their shard by a drain.
local function push_links(links, d, p, via)
  if d > MAXD then return end
  for _, link in ipairs(links) do
    local shard, verdict, url = string.match(link, '^(%S+) (%S+) (.*)$')
    redis.call('RPUSH', outbox, shard .. ' ' .. p .. ' ' .. d .. ' ' .. verdict .. ' - ' ..
               (via ~= '' and via or '-') .. ' ' .. url)
    pend_sent(d, 1)
    sent = sent + 1
  end
end
-- A URL already admitted, found again at depth `d`: lowered if it was deeper (in its queue,
-- in flight, or held back; an emitted record is final).
local function correct(key, url, d)
  local q = qprefix .. key
  local s = redis.call('ZSCORE', q, url)
  if s then
    s = tonumber(s)
    if s >= 0 then
      local old, p = split_score(s)
      if old > d then
        enqueue(key, score_of(d, p), url)
        pend(old, -1)
        pend(d, 1)
        touched[key] = true
        corrected = corrected + 1
      end
    end
    return
  end
  local entry = redis.call('HGET', inflight, url)
  if entry then
    local old = tonumber(redis.call('HGET', lowered, url) or string.match(entry, '^(%S+)'))
    if old > d then
      redis.call('HSET', lowered, url, int(d))
      pend(old, -1)
      pend(d, 1)
      corrected = corrected + 1
    end
    return
  end
  local old = tonumber(redis.call('HGET', spec, url) or '-1')
  if old > d then
    local payload = cjson.decode(redis.call('HGET', sprefix .. old, url))
    redis.call('HDEL', sprefix .. old, url)
    redis.call('HDEL', spec, url)
    SPEC_N = nil
    payload.r = with_depth(payload.r, d)
    if payload.l then push_links(payload.l, d + payload.o, payload.p, payload.v or '') end
    if d > LEVEL + 1 then hold_back(url, d, cjson.encode(payload)) else emit(payload.r) end
    corrected = corrected + 1
  end
end
-- After a change that may have raised the level or freed room for held-back records: emit
-- what became final and let blocked keys go. Returns 1 if records are left to settle.
local function advance(allowed_before)
  local settling = settle(SETTLE_BUDGET)
  refresh_allowed()
  if allowed() > allowed_before then unblock() end
  return settling and 1 or 0
end
