-- The frontier in Redis (rqcrawl.frontier.state explains the model):
-- - Admitted URLs wait in one sorted set per politeness key (a host, or "ip:ADDR"):
--   `qprefix`..key, scored by depth, then priority (higher first); a parked URL whose time came
--   back is scored -1 (it goes first, and is still in flight). `qkeys` names the keys that have
--   one; the counters' `held` counts the URLs waiting there.
-- - `ready`: the keys whose next request may start at their score (they have a URL waiting and
--   a free slot); `blocked`: keys whose first URL waits for the level (see ALLOWED). A key with
--   every slot taken is in neither: the end of one of its requests schedules it again.
-- - `hosts`: key -> "ready fetch backoff base", when its next request may start, its smoothed
--   fetch time, the adaptive throttle's extra delay, and its base delay (the setting or its
--   Crawl-delay; -1 until known). `lprefix`..key: the slots in use, URL (or the holder of a
--   robots.txt hop waiting for the key, HOP_TURN) -> lease expiry.
-- - `pending`: depth -> URLs not yet ended at that depth (waiting, in flight, in the outbox);
--   the settled level L is the least such depth, never lowered (counters' `level`): no URL of
--   depth <= L + 1 can be found shorter any more. A record of depth > L + 1 is held back in
--   `sprefix`..depth (url -> JSON {r: record, l: links, p: their priority, o: their depth
--   offset, v: via}) with `spec` url -> depth, until L catches up; a shorter path found
--   meanwhile lowers it (`correct`) and sends its links again, one deeper, through the outbox.
--   An in-flight URL found shorter has its new depth in `lowered`.
-- pace: "delay concurrency factor cap grace adaptive lead" (the base delay, slots per key,
-- delay_factor, max_backoff_delay, seconds a released URL's slot waits for its job, 1 for the
-- adaptive throttle, seconds ahead of its key's turn a URL may be released: its entry's time
-- is then its turn, which its job waits for); levels: "exact strict max_ahead sharded
-- max_depth shard".
--#include args
--#include time
local T = tonumber(now)
local PACE = {}
PACE.delay, PACE.conc, PACE.factor, PACE.cap, PACE.grace, PACE.adaptive, PACE.lead =
  string.match(pace, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
for k, v in pairs(PACE) do PACE[k] = tonumber(v) end
local EXACT, STRICT, AHEAD, SHARDED, MAXD, SHARD =
  string.match(levels, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
EXACT, STRICT, SHARDED = EXACT == '1', STRICT == '1', SHARDED == '1'
AHEAD, MAXD = tonumber(AHEAD), tonumber(MAXD)
local DEPTH_UNIT, PRIO_MID, PRIO_MAX = 2097152, 1048576, 1048575
local SMOOTHING, BACKOFF_MIN, SETTLE_BUDGET = 0.3, 0.25, 500
local LEVEL, ALLOWED = 0, math.huge
local touched, sent, corrected = {}, 0, 0
-- What the level needs, read once a run (a script runs alone: only its own writes change
-- them): the stored level, the count of held-back records (nil: read it again), and whether
-- the set of pending depths, which alone moves the least of them, changed since LEVEL.
local STORED, SPEC_N, LEVEL_STALE = nil, nil, true
-- Likewise what a run read of its keys, kept by its writes below (nil: not read; a turn is
-- false when the key is not in `ready`): their pace, queue heads, live slots and turns, and
-- whether the crawl is paused, how many URLs are parked, and the bytes of records appended
-- to the records stream and trimmed from it (the counters' record_bytes, trimmed_bytes).
local PACED, HEADS, NEXTS, LIVE, TURNS = {}, {}, {}, {}, {}
local PAUSED, LATER_N, APPENDED, TRIMMED = nil, nil, nil, nil
local function paused()
  if PAUSED == nil then PAUSED = redis.call('HEXISTS', counters, 'paused_at') == 1 end
  return PAUSED
end
local function later_count()
  LATER_N = LATER_N or redis.call('ZCARD', later)
  return LATER_N
end

-- Whether two in-flight entries are one job's: all but their time (the time a release
-- writes, when a URL's host may take it, is not the job's to know to the microsecond).
local function same_entry(a, b)
  if not a or not b then return false end
  return (string.gsub(a, '^(%S+) %S+', '%1', 1)) == (string.gsub(b, '^(%S+) %S+', '%1', 1))
end
local function score_of(d, p)
  d = math.min(tonumber(d), 1048576)
  p = math.max(-PRIO_MAX, math.min(PRIO_MAX, tonumber(p)))
  return string.format('%d', d * DEPTH_UNIT + PRIO_MID - p)
end
local function split_score(s)
  local d = math.floor(s / DEPTH_UNIT)
  return d, PRIO_MID - (s - d * DEPTH_UNIT)
end

--#include levels
--#include records
--#include pacing
--#include depth
