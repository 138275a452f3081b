"""Every Lua script of rqcrawl, as rq keeps its own: one named constant each, called by name.

A `Script` declares the names of its KEYS and ARGV; a prelude generated from them binds each
name to its position, so the script's body and its callers use names only. A script that takes
a variable number of keys or arguments (the Bloom filter's shards, a page's links) gets them
after the named ones, and the prelude gives the index where they start.

The sha of a script is a function of its text, so nothing is registered per connection: a
call sends EVALSHA and loads the script only when the server does not know it (a restarted
Redis forgets them). Scripts sent in a pipeline are loaded first by `load`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from redis import Redis
from redis.client import Pipeline
from redis.exceptions import NoScriptError


class Script:
    """A Lua script with named KEYS and ARGV (see the module docstring)."""

    def __init__(
        self,
        keys: Sequence[str],
        args: Sequence[str],
        body: str,
        *,
        key_tail: str = "",
        arg_tail: str = "",
        lib: str = "",
    ):
        self.keys, self.args = tuple(keys), tuple(args)
        prelude = [f"local {name} = KEYS[{i}]" for i, name in enumerate(self.keys, 1)]
        prelude += [f"local {name} = ARGV[{i}]" for i, name in enumerate(self.args, 1)]
        if key_tail:  # the index of the first key after the named ones
            prelude.append(f"local {key_tail} = {len(self.keys) + 1}")
        if arg_tail:
            prelude.append(f"local {arg_tail} = {len(self.args) + 1}")
        self.source = "\n".join(prelude) + "\n" + lib + body
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()

    def _flat(self, named: dict[str, Any], tail_keys: Sequence, tail_args: Sequence) -> list:
        unknown = named.keys() - set(self.keys) - set(self.args)
        if unknown:
            raise TypeError(f"unknown script parameters: {sorted(unknown)}")
        keys = [named[k] for k in self.keys] + list(tail_keys)
        return [len(keys), *keys, *(named[a] for a in self.args), *tail_args]

    def __call__(
        self, redis: Redis, tail_keys: Sequence = (), tail_args: Sequence = (), **named: Any
    ) -> Any:
        """Run the script now, with its keys and arguments by name."""
        flat = self._flat(named, tail_keys, tail_args)
        try:
            return redis.evalsha(self.sha, *flat)
        except NoScriptError:
            redis.script_load(self.source)
            return redis.evalsha(self.sha, *flat)

    def queue(
        self, pipe: Pipeline, tail_keys: Sequence = (), tail_args: Sequence = (), **named: Any
    ) -> None:
        """Add a run of the script to `pipe` (see `load`)."""
        pipe.evalsha(self.sha, *self._flat(named, tail_keys, tail_args))


def load(redis: Redis, *scripts: Script) -> None:
    """Load `scripts` into the server, for a pipeline that failed with NoScriptError."""
    for script in scripts:
        redis.script_load(script.source)


# Shared by the Bloom filter's own script and the finish step. Shards are
# KEYS[shard_key0 + shard], each `shard_bits` long but the last, which ends at bit `size`.
# bloom_alloc creates missing shards at their full length, each in one allocation.
# bloom_check: `pos` holds k global bit positions for each of `count` URLs from index `first`.
# Returns per URL 1 when some bit was still clear (the URL is new); with `add`, also sets every
# bit. The bits go in one BITFIELD per shard (per BITFIELD_OPS bits), not one SETBIT each: a
# page's links cost one command instead of k per link, in the same order (a URL twice in a
# batch is new only once).
# The bit filter keeps the count of its set bits in the last key (KEYS[#KEYS], bloom.BloomFilter
# .script_keys): what each add changes is counted there, so that reading the fill is a GET,
# not a BITCOUNT of the whole filter (11 ms of a blocked Redis for the default 18 MB); a
# filter made before the count was kept is counted once, by its first add since.
# shard_bits 0 means the native filter (bloom.NativeBloomFilter): KEYS[shard_key0] is one
# RedisBloom filter, `size` is "error_rate capacity" for its BF.RESERVE, k is 1 and `pos`
# holds one fingerprint per URL, checked and added by BF.MADD (1: it was not there).
BLOOM_LIB = """
local BITFIELD_OPS = 512  -- 4 arguments each, well within Lua's unpack limit (8000)

local function bloom_alloc(shard_key0, shard_bits, size)
  if shard_bits == 0 then
    if redis.call('EXISTS', KEYS[shard_key0]) == 0 then
      local rate, capacity = string.match(size, '(%S+) (%S+)')
      redis.call('BF.RESERVE', KEYS[shard_key0], rate, capacity)
    end
    return
  end
  local bits = tonumber(size)
  local shards = math.ceil(bits / shard_bits)
  -- all shards are created in one call, the last one last: it stands for them all
  if redis.call('EXISTS', KEYS[shard_key0 + shards - 1]) == 1 then
    if redis.call('EXISTS', KEYS[#KEYS]) == 0 then
      local set = 0
      for shard = 0, shards - 1 do set = set + redis.call('BITCOUNT', KEYS[shard_key0 + shard]) end
      redis.call('SET', KEYS[#KEYS], set)
    end
    return
  end
  for shard = 0, shards - 1 do
    local key = KEYS[shard_key0 + shard]
    if redis.call('EXISTS', key) == 0 then
      redis.call('SETBIT', key, math.min(shard_bits, bits - shard * shard_bits) - 1, 0)
    end
  end
  redis.call('SET', KEYS[#KEYS], 0)
end

local function bloom_check(shard_key0, shard_bits, k, pos, first, count, add)
  if shard_bits == 0 then
    if count == 0 then return {} end
    local items = {unpack(pos, first, first + count - 1)}
    if add then return redis.call('BF.MADD', KEYS[shard_key0], unpack(items)) end
    local seen = redis.call('BF.MEXISTS', KEYS[shard_key0], unpack(items))
    for i = 1, count do seen[i] = 1 - seen[i] end
    return seen
  end
  local old, groups = {}, {}
  local function flush(shard, g)
    local got = redis.call('BITFIELD', KEYS[shard_key0 + shard], unpack(g.args))
    for j, i in ipairs(g.at) do old[i] = got[j] end
    groups[shard] = nil
  end
  for i = first, first + count * k - 1 do
    local p = tonumber(pos[i])
    local shard = math.floor(p / shard_bits)
    local g = groups[shard] or {at = {}, args = {}}
    groups[shard] = g
    g.at[#g.at + 1] = i
    local a = g.args
    a[#a + 1] = add and 'SET' or 'GET'
    a[#a + 1] = 'u1'
    a[#a + 1] = p % shard_bits
    if add then a[#a + 1] = 1 end
    if #g.at == BITFIELD_OPS then flush(shard, g) end
  end
  for shard, g in pairs(groups) do flush(shard, g) end
  local new, cleared = {}, 0
  for u = 1, count do
    new[u] = 0
    for i = first + (u - 1) * k, first + u * k - 1 do
      if old[i] == 0 then new[u], cleared = 1, cleared + 1 end
    end
  end
  if add and cleared > 0 then redis.call('INCRBY', KEYS[#KEYS], cleared) end
  return new
end
"""

# Check (and with add = '1', add) URLs in the Bloom filter: k positions per URL in the tail.
# Returns 1 (new) or 0 per URL.
BLOOM_BATCH = Script(
    keys=(),
    args=("shard_bits", "size", "k", "add"),
    key_tail="shard0",
    arg_tail="positions",
    lib=BLOOM_LIB,
    body="""
local sbits, kk, adding = tonumber(shard_bits), tonumber(k), add == '1'
if adding then bloom_alloc(shard0, sbits, size) end
return bloom_check(shard0, sbits, kk, ARGV, positions, (#ARGV - positions + 1) / kk, adding)
""",
)

# A time to store (a score, a key's state): to the microsecond, rounded down, so that a time
# "now" compares as due with `now` itself. (x * 1e6 is rounded to the nearest quarter
# microsecond at today's times, so its floor can be a microsecond past x: then one less.)
TIME_LIB = """
local function at(x)
  local us = math.floor(x * 1000000)
  local s = string.format('%.6f', us / 1000000)
  if tonumber(s) > x then s = string.format('%.6f', (us - 1) / 1000000) end
  return s
end
"""

# Every script that changes which URLs wait, run or end takes the crawl's frontier keys and
# arguments by these names (CrawlState.frontier_names), so that FRONTIER_LIB can use them.
FRONTIER_KEYS = (
    "counters", "inflight", "ready", "blocked", "qkeys", "hosts", "later", "parked", "pending",
    "spec", "lowered", "items", "outbox", "leased",
)  # fmt: skip
FRONTIER_ARGS = (
    "qprefix", "lprefix", "sprefix", "pace", "levels", "now", "window", "undelivered",
)  # fmt: skip

# The frontier in Redis (rqcrawl.frontier.state explains the model):
# - Admitted URLs wait in one sorted set per politeness key (a host, or "ip:ADDR"):
#   `qprefix`..key, scored by depth, then priority (higher first); a parked URL whose time came
#   back is scored -1 (it goes first, and is still in flight). `qkeys` names the keys that have
#   one; the counters' `held` counts the URLs waiting there.
# - `ready`: the keys whose next request may start at their score (they have a URL waiting and
#   a free slot); `blocked`: keys whose first URL waits for the level (see ALLOWED). A key with
#   every slot taken is in neither: the end of one of its requests schedules it again.
# - `hosts`: key -> "ready fetch backoff base", when its next request may start, its smoothed
#   fetch time, the adaptive throttle's extra delay, and its base delay (the setting or its
#   Crawl-delay; -1 until known). `lprefix`..key: the slots in use, URL (or the holder of a
#   robots.txt hop waiting for the key, HOP_TURN) -> lease expiry.
# - `pending`: depth -> URLs not yet ended at that depth (waiting, in flight, in the outbox);
#   the settled level L is the least such depth, never lowered (counters' `level`): no URL of
#   depth <= L + 1 can be found shorter any more. A record of depth > L + 1 is held back in
#   `sprefix`..depth (url -> JSON {r: record, l: links, p: their priority, o: their depth
#   offset, v: via}) with `spec` url -> depth, until L catches up; a shorter path found
#   meanwhile lowers it (`correct`) and sends its links again, one deeper, through the outbox.
#   An in-flight URL found shorter has its new depth in `lowered`.
# pace: "delay concurrency factor cap grace adaptive lead" (the base delay, slots per key,
# delay_factor, max_backoff_delay, seconds a released URL's slot waits for its job, 1 for the
# adaptive throttle, seconds ahead of its key's turn a URL may be released: its entry's time
# is then its turn, which its job waits for); levels: "exact strict max_ahead sharded
# max_depth shard".
FRONTIER_LIB = (
    TIME_LIB
    + """
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
-- whether the crawl is paused, and how many URLs are parked.
local PACED, HEADS, NEXTS, LIVE, TURNS = {}, {}, {}, {}, {}
local PAUSED, LATER_N = nil, nil
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

-- levels
local function pend(d, n)
  local left = redis.call('HINCRBY', pending, d, n)
  if left <= 0 then redis.call('HDEL', pending, d) end
  if left <= 0 or left == n then LEVEL_STALE = true end  -- a depth went, or came
end
local function min_pending()
  local all, m = redis.call('HGETALL', pending), nil
  for i = 1, #all, 2 do
    local d = tonumber(all[i])
    if tonumber(all[i + 1]) > 0 and (m == nil or d < m) then m = d end
  end
  return m
end
-- The settled level; on one Redis raised here as URLs end, over shards by the coordinator.
-- With nothing pending every depth is settled (a crawl before its seeds, or at its end),
-- but the stored level stays where it was: the next URLs start from it.
local function stored_level()
  STORED = STORED or tonumber(redis.call('HGET', counters, 'level') or '0')
  return STORED
end
local function store_level(level)
  redis.call('HSET', counters, 'level', level)
  STORED, LEVEL_STALE = tonumber(level), true
end
local function level_now()
  local stored = stored_level()
  if SHARDED then return stored end
  local m = min_pending()
  if m == nil then return MAXD + 1 end
  if m > stored then
    store_level(m)
    return m
  end
  return stored
end
local function held_back()
  SPEC_N = SPEC_N or redis.call('HLEN', spec)
  return SPEC_N
end
-- The deepest URL that may be released: any (first-found depth, or room left for held-back
-- records), or the level's own (the barrier: budgets, max_ahead 0, or max_ahead reached).
local function refresh_allowed()
  if LEVEL_STALE then
    LEVEL = level_now()
    LEVEL_STALE = false
  end
  if not EXACT then
    ALLOWED = math.huge
  elseif STRICT or held_back() >= AHEAD then
    ALLOWED = LEVEL
  else
    ALLOWED = math.huge
  end
end

-- a key's pace
local function parse_host(raw)
  local h = {ready = 0, fetch = 0, backoff = 0, base = -1}
  if raw then
    local r, f, b, base = string.match(raw, '^(%S+) (%S+) (%S+) (%S+)$')
    if r then
      h.ready, h.fetch, h.backoff, h.base = tonumber(r), tonumber(f), tonumber(b), tonumber(base)
    end
  end
  return h
end
local function load_host(key)
  if PACED[key] == nil then PACED[key] = redis.call('HGET', hosts, key) or false end
  return parse_host(PACED[key])
end
local function save_host(key, h)
  PACED[key] = at(h.ready) .. ' ' .. string.format('%.6f %.6f %.6f', h.fetch, h.backoff, h.base)
  redis.call('HSET', hosts, key, PACED[key])
end
local function base_of(h)
  return h.base >= 0 and h.base or PACE.delay
end
-- the delay in force: the base, or the back-off, or factor x the smoothed fetch time (capped)
local function in_force(h)
  return math.max(base_of(h), math.min(math.max(h.backoff, PACE.factor * h.fetch), PACE.cap))
end
local function live(key)
  LIVE[key] = LIVE[key] or redis.call('ZCOUNT', lprefix .. key, T, '+inf')
  return LIVE[key]
end
local function take_slot(key, holder, expiry)
  local added = redis.call('ZADD', lprefix .. key, expiry, holder) == 1
  if added and LIVE[key] and tonumber(expiry) >= T then
    LIVE[key] = LIVE[key] + 1  -- (a new holder: one more live)
  else
    LIVE[key] = nil
  end
end
local function drop_slot(key, holder)
  redis.call('ZREM', lprefix .. key, holder)
  LIVE[key] = nil
end
-- `key`'s score in `ready` (false: not there)
local function turn_of(key)
  if TURNS[key] == nil then TURNS[key] = tonumber(redis.call('ZSCORE', ready, key)) or false end
  return TURNS[key]
end
local function set_turn(key, when)
  redis.call('ZADD', ready, when, key)
  TURNS[key] = tonumber(when)
end
local function drop_turn(key)
  if TURNS[key] ~= false then redis.call('ZREM', ready, key) end
  TURNS[key] = false
end
-- the first URL waiting in `key`'s queue and its score ({} if none); the second is read
-- with it, the head once the first is taken
local function head_of(key)
  if HEADS[key] == nil then
    local two = redis.call('ZRANGE', qprefix .. key, 0, 1, 'WITHSCORES')
    HEADS[key], NEXTS[key] = {two[1], two[2]}, {two[3], two[4]}
  end
  return HEADS[key]
end
local function enqueue(key, score, url)
  redis.call('ZADD', qprefix .. key, score, url)
  HEADS[key], NEXTS[key] = nil, nil
end
local function dequeue(key, url)
  redis.call('ZREM', qprefix .. key, url)
  if HEADS[key] and HEADS[key][1] == url and NEXTS[key] then
    HEADS[key], NEXTS[key] = NEXTS[key], nil
  else
    HEADS[key], NEXTS[key] = nil, nil
  end
end
-- A request of key `k` (state `h`) that takes no slot just ended: the key's next request
-- waits the delay in force from now.
local function wait_from_now(k, h)
  h.ready = math.max(h.ready, T + in_force(h))
  save_host(k, h)
  if turn_of(k) then set_turn(k, at(h.ready)) end
end

-- Put `key` in `ready` (at its next start), in `blocked`, or in neither (no free slot).
local function schedule(key)
  local head = head_of(key)
  if #head == 0 then
    drop_turn(key)
    redis.call('SREM', blocked, key)
    redis.call('SREM', qkeys, key)
    return
  end
  if live(key) >= PACE.conc then
    drop_turn(key)
    return
  end
  local s = tonumber(head[2])
  if s >= 0 and split_score(s) > ALLOWED then
    drop_turn(key)
    redis.call('SADD', blocked, key)
    return
  end
  redis.call('SREM', blocked, key)
  set_turn(key, at(load_host(key).ready))
end
local function schedule_touched()
  for key in pairs(touched) do
    if not turn_of(key) then schedule(key) end
  end
  touched = {}
end
local function unblock()
  for _, key in ipairs(redis.call('SMEMBERS', blocked)) do schedule(key) end
end

-- Wait in `key`'s queue at depth `d` and priority `p` (a new URL: pending, held).
local function hold(key, url, d, p)
  enqueue(key, score_of(d, p), url)
  redis.call('SADD', qkeys, key)
  redis.call('HINCRBY', counters, 'held', 1)
  pend(d, 1)
  touched[key] = true
end
-- An in-flight URL back at the head of its key's queue (its turn came: parked, recovered).
local function requeue(key, url)
  enqueue(key, -1, url)
  redis.call('SADD', qkeys, key)
  touched[key] = true
end

-- End a request of `url` (a slot of `key`): dur its seconds (-1: none was made), answer
-- 'push' (429/503 or a Retry-After), 'ok' (a success) or '-', base the key's base delay as
-- now known (-1: unchanged), not_before a time before which the key takes no request.
-- A push doubles the back-off (at least BACKOFF_MIN and the Retry-After, at most the cap),
-- a success halves it until it is below the base. Returns when the key may go next.
local function free_slot(key, url, dur, answer, retry_after, base, not_before)
  drop_slot(key, url)
  local h = load_host(key)
  if base >= 0 then h.base = base end
  if dur >= 0 then h.fetch = h.fetch == 0 and dur or (1 - SMOOTHING) * h.fetch + SMOOTHING * dur end
  local floor = math.max(base_of(h), BACKOFF_MIN)
  if PACE.adaptive == 1 and answer == 'push' then
    h.backoff = math.min(PACE.cap, math.max(2 * math.max(h.backoff, floor), retry_after))
  elseif answer == 'ok' and h.backoff > 0 then
    h.backoff = h.backoff / 2
    if h.backoff < floor then h.backoff = 0 end
  end
  if dur >= 0 then h.ready = math.max(h.ready, T + in_force(h)) end
  h.ready = math.max(h.ready, not_before)
  save_host(key, h)
  touched[key] = true
  return h.ready
end
local function free_slot_of(url, slot)
  if slot == '' then return 0 end
  local key, dur, answer, retry_after, base, not_before =
    string.match(slot, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
  return free_slot(key, url, tonumber(dur), answer, tonumber(retry_after), tonumber(base),
                   tonumber(not_before))
end

-- Whether the records stream holds `undelivered` ("RECORDS BYTES") records or bytes of them.
local function stream_full()
  local most, most_bytes = string.match(undelivered, '^(%d+) (%d+)$')
  if redis.call('XLEN', items) >= tonumber(most) then return true end
  local b = redis.call('HMGET', counters, 'record_bytes', 'trimmed_bytes')
  return (tonumber(b[1]) or 0) - (tonumber(b[2]) or 0) >= tonumber(most_bytes)
end
-- The keys due by `horizon` to release first, for `room` URLs: in their turns' order, or,
-- when more are due than there is room, those whose first URL is the shallowest, then of the
-- highest priority (its score), among the first due.
local function first_due(horizon, room)
  local due = redis.call('ZRANGEBYSCORE', ready, '-inf', horizon, 'LIMIT', 0, 2 * room + 64)
  if #due <= room then return due end
  local heads = {}
  for _, key in ipairs(due) do
    local head = head_of(key)
    heads[key] = head[2] and tonumber(head[2]) or math.huge
  end
  table.sort(due, function(a, b) return heads[a] < heads[b] end)
  return due
end
-- Release the first URL of each due key while `room` allows, into `inflight` (a slot of its
-- key taken until its job claims it, or `grace` runs out), appending url, entry to `out`;
-- none while paused, or while the records stream is at its bound (a follower drains it; the
-- URLs in flight still end and are recorded).
local function release(room, out)
  if room <= 0 or paused() then return end
  local horizon = T + PACE.lead
  local due = first_due(horizon, room)
  if #due == 0 or stream_full() then return end
  local taken = 0
  for _, key in ipairs(due) do
    repeat  -- the key's URLs while it has slots free now (host_concurrency, no delay)
      if taken >= room then return end
      local head = head_of(key)
      local turn = at(math.max(T, turn_of(key) or T))
      local entry = nil
      if #head > 0 and live(key) < PACE.conc then
        local url, s = head[1], tonumber(head[2])
        if s < 0 then
          dequeue(key, url)
          entry = redis.call('HGET', inflight, url)
          if entry then
            local d, _, rest = string.match(entry, '^(%S+) (%S+) (.*)$')
            entry = d .. ' ' .. turn .. ' ' .. rest
          end
        else
          local d, p = split_score(s)
          if d <= ALLOWED then
            dequeue(key, url)
            redis.call('HINCRBY', counters, 'held', -1)
            if redis.call('HEXISTS', inflight, url) == 1 then
              pend(d, -1)  -- (in flight already: this copy goes)
            else
              entry = d .. ' ' .. turn .. ' 0 0 ' .. p
            end
          end
        end
        if entry then
          redis.call('HSET', inflight, url, entry)
          take_slot(key, url, T + PACE.grace)
          out[#out + 1] = url
          out[#out + 1] = entry
          taken = taken + 1
        end
      end
      schedule(key)
      -- a key with slots left goes again one delay after this start (its `ready` moves only
      -- when a request ends: a URL that robots.txt refuses costs its host no turn)
      local again = turn_of(key)
      if entry and again then
        again = math.max(again, tonumber(turn) + in_force(load_host(key)))
        set_turn(key, at(again))
      end
    until not (entry and again and again <= horizon)
  end
end
local function room()
  return tonumber(window) - (redis.call('HLEN', inflight) - later_count())
end

-- Parked URLs whose time came go back to their key's queue (or to held, as new, in a
-- paused crawl: it then settles with nothing in flight).
local function take_due(limit)
  if later_count() == 0 then return end
  for _, url in ipairs(redis.call('ZRANGEBYSCORE', later, '-inf', T, 'LIMIT', 0, limit)) do
    redis.call('ZREM', later, url)
    LATER_N = nil
    local key = redis.call('HGET', parked, url)
    redis.call('HDEL', parked, url)
    local entry = redis.call('HGET', inflight, url)
    if key and entry then
      if paused() then
        local d, p = string.match(entry, '^(%S+) %S+ %S+ %S+ (%S+)$')
        d = tonumber(redis.call('HGET', lowered, url) or d)
        redis.call('HDEL', inflight, url)
        redis.call('HDEL', lowered, url)
        pend(d, -1)
        hold(key, url, d, p or 0)
        redis.call('HINCRBY', counters, 'put_back', 1)
      else
        requeue(key, url)
      end
    end
  end
end

-- held-back records (see above); each entry carries `o`, the bytes of records appended to the
-- stream up to it, so that trimming it (ACK_RECORDS) says how many bytes left
local function emit(record)
  local o = redis.call('HINCRBY', counters, 'record_bytes', #record)
  redis.call('XADD', items, '*', 'r', record, 'o', o)
end
local function with_depth(record, d)
  return (string.gsub(record, '"depth":%-?%d+', '"depth":' .. d, 1))
end
local function hold_back(url, d, payload)
  redis.call('HSET', spec, url, d)
  SPEC_N = nil
  redis.call('HSET', sprefix .. d, url, payload)
end
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
      redis.call('HSET', lowered, url, d)
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
      local scan = redis.call('HSCAN', h, cursor, 'COUNT', 100)
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
    if d <= stored + 1 then redis.call('HSET', counters, 'settled', d) end
  end
  return false
end
-- After a change that may have raised the level or freed room for held-back records: emit
-- what became final and let blocked keys go. Returns 1 if records are left to settle.
local function advance(allowed_before)
  local settling = settle(SETTLE_BUDGET)
  refresh_allowed()
  if ALLOWED > allowed_before then unblock() end
  return settling and 1 or 0
end
"""
)

# The one step that ends a URL: forget it from `inflight`, count its outcome, free its
# request's slot (`slot`: "key seconds answer retry_after base not_before", see free_slot),
# record it, admit its children through the Bloom filter into their keys' queues (budgets
# apply: max_pages, max_host_pages, and max_host_share once `share_floor` URLs were admitted;
# a refused child is recorded once, from `skip_record`, and stays refused: it is in the
# filter), lower the children that were known deeper (exact depth), and release the next URLs
# of the keys that are due while fewer than `window` have jobs.
# done: the ending URL ('' when seeding or admitting). final: '1' to end it, '0' to only admit
# its children while it stays in flight (a page with more links than one call should take).
# increments: "field n field n"; a field "kind|host" goes to the per-host hash.
# record: the URL's record as JSON, or ''; rec_depth its depth (-1: none). A URL found
# shorter while in flight (`lowered`) is recorded at its new depth, and its children one
# deeper than that. A record that may still be lowered is held back (FRONTIER_LIB) with
# `links`, the page's links as a JSON list of "shard verdict url" (its children, and `cut`:
# those past max_depth, admitted here if the page turns out shallower).
# n: number of children; the tail holds 4 arguments per child (verdict, '-' to admit; key;
# host; url), then k Bloom positions per child. Children are held at `child_priority`.
# In a crawl over several shards, `foreign` is a JSON list of the page's links to other
# shards' hosts, appended to `outbox` in the same step (entries of
# rqcrawl.frontier.state.Outgoing, admitted on their shard by a drain; counted in `outboxed`).
# marks: the ending URL's marks to drop, 's' in `sitemapped`, 'v' in `via` (set only when a
# URL is admitted: its claim read them, state.Ending.marks).
# source: 'sitemap' to note the admitted children in `sitemapped` until they end (their
# records say where they came from), or ''. child_via: for a redirect's target (a child at
# the ending URL's own depth), the JSON list of the redirects that led to it, noted in `via`
# until it ends.
# max_pages over shards: a shard admits only the pages the first shard granted it
# (`pages_allowed`, see GRANT_PAGES); with fewer left than the children it would admit (new
# to the Bloom filter, not refused by a rule), and the first shard not yet out of pages, the
# script changes nothing but the filter's allocation and returns {2, pages needed, ...}.
# max_host_share counts `others`, the URLs admitted by the other shards (as last read).
# digest: the body digest of a fetched page (detect_duplicates), or ''. The first URL to
# end with a digest is kept in `digests`; another one with the same digest is a duplicate:
# its record gets `duplicate_of`, its links are admitted like any page's (a copy under
# another path links URLs found nowhere else: traps are the trap rules' and max_depth's).
# Returns {1 | 0 (done had already ended), admitted, reap due, level up (over shards: this
# shard's pending URLs are past the crawl's level), links sent to the outbox, records left to
# settle, when the freed key may go next, the first URL of `digest` if done is a duplicate
# (else ''), released url, entry...}.
FINISH = Script(
    keys=(
        *FRONTIER_KEYS, "reap_lock", "host_pages", "revisiting", "sitemapped", "via", "digests",
    ),
    args=(
        *FRONTIER_ARGS, "done", "final", "digest", "marks", "increments", "record", "rec_depth",
        "child_depth", "child_priority", "source", "child_via", "links", "cut", "slot",
        "shard_bits", "k", "reap_every", "max_pages", "max_host_pages", "max_host_share",
        "share_floor", "skip_record", "skip_prefix", "n", "size", "foreign", "others",
    ),
    key_tail="bloom0",
    arg_tail="children",
    lib=BLOOM_LIB + FRONTIER_LIB,
    body="""
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
refresh_allowed()
local allowed0, level0 = ALLOWED, LEVEL
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
    if redis.call('ZREM', later, done) == 1 then  -- (parked: `later` and `parked` go together)
      LATER_N = nil
      redis.call('HDEL', parked, done)
    end
    redis.call('ZREM', leased, done)
    if low then redis.call('HDEL', lowered, done) end
    redis.call('SREM', revisiting, done)
    if string.find(marks, 's', 1, true) then redis.call('SREM', sitemapped, done) end
    if string.find(marks, 'v', 1, true) then redis.call('HDEL', via, done) end
    pend(d_done, -1)
    for field, count in string.gmatch(increments, '(%S+) (%S+)') do
      local per_host = string.find(field, '|', 1, true)
      redis.call('HINCRBY', per_host and host_pages or counters, field, count)
    end
    next_at = free_slot_of(done, slot)
    redis.call('HSET', counters, 'last_at', now)
    if redis.call('SET', reap_lock, '1', 'NX', 'EX', reap_every) then reap_due = 1 end
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
        of_host = tonumber(redis.call('HGET', host_pages, host) or '0')
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
      hold(key, url, cd, child_priority)
      redis.call('HINCRBY', host_pages, host, 1)
      if source ~= '' then redis.call('SADD', sitemapped, url) end
      if child_via ~= '' then redis.call('HSET', via, url, child_via) end
      admitted = admitted + 1
    else
      skip = skip or cjson.decode(skip_record)
      skip.url, skip.outcome, skip.depth = url, verdict, cd
      refused[#refused + 1] = {url, cjson.encode(skip)}
      redis.call('HINCRBY', counters, skip_prefix .. verdict, 1)
    end
  elseif fresh[i] == 0 and EXACT then
    correct(key, url, cd)
  end
end
if admitted > 0 then redis.call('HINCRBY', counters, 'admitted', admitted) end
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
  redis.call('HINCRBY', counters, 'outboxed', #entries)
  sent = sent + #entries
end
if corrected > 0 then redis.call('HINCRBY', counters, 'lowered', corrected) end

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
if LEVEL > level0 or ALLOWED ~= allowed0 then settling = advance(allowed0) end
local level_up = 0
if SHARDED and (min_pending() or math.huge) > LEVEL then level_up = 1 end
if not SHARDED and LEVEL > level0 then level_up = 1 end
local out = {1, admitted, reap_due, level_up, sent, settling, string.format('%.6f', next_at), dup}
release(room(), out)
return out
""",
)  # fmt: skip

# Over shards: raise this shard's level to `level` (the coordinator found that the whole crawl
# has nothing pending below it: rqcrawl.frontier.levels; a lower or equal one does nothing but
# go on settling), emit what became final, let blocked keys go and release what is due.
# Returns {raised (0 | 1), records left to settle, released url, entry...}.
ADVANCE = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "level"),
    lib=FRONTIER_LIB,
    body="""
refresh_allowed()
local allowed0 = ALLOWED
local raised = 0
if tonumber(level) > LEVEL then
  store_level(level)
  raised = 1
  refresh_allowed()
end
local out = {raised, advance(allowed0)}
release(room(), out)
return out
""",
)

# The outbox's drain admitted the first `n` entries on their shards: drop them (they are no
# longer pending here, at their page's depth: FRONTIER_LIB) and free the lock; nothing if the
# lock is no longer that drain's (it ran out: another drain reads the same entries again, and
# their second admission is a no-op). With n = 0 only the lock goes: LRANGE 0 -1 would name
# the whole list, entries pushed since the drain read it included.
# Returns 1 if trimmed.
TRIM_OUTBOX = Script(
    keys=("outbox", "lock", "pending"),
    args=("token", "n"),
    body="""
if redis.call('GET', lock) ~= token then return 0 end
if tonumber(n) == 0 then
  redis.call('DEL', lock)
  return 1
end
for _, entry in ipairs(redis.call('LRANGE', outbox, 0, tonumber(n) - 1)) do
  local d = math.max(0, tonumber(string.match(entry, '^%S+ %S+ (%S+)')) - 1)
  if redis.call('HINCRBY', pending, d, -1) <= 0 then redis.call('HDEL', pending, d) end
end
redis.call('LTRIM', outbox, tonumber(n), -1)
redis.call('DEL', lock)
return 1
""",
)

# Compare-and-set of one inflight entry, so the reaper never requeues a URL that ended or was
# requeued meanwhile, nor one whose lease a live worker renewed; the URL goes back to the head
# of its key's queue. An expired lease is dropped whatever the entry (url only, expected ''):
# no live job holds it. Returns {1 | 0 (replaced), released url, entry...}.
REQUEUE = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "url", "key", "expected", "entry"),
    lib=FRONTIER_LIB,
    body="""
local lease = tonumber(redis.call('ZSCORE', leased, url) or '-1')
if lease >= T then return {0} end
if lease >= 0 then redis.call('ZREM', leased, url) end
if expected == '' or not same_entry(redis.call('HGET', inflight, url), expected) then
  return {0}
end
refresh_allowed()
redis.call('HSET', inflight, url, entry)
redis.call('ZREM', later, url)
LATER_N = nil
redis.call('HDEL', parked, url)
redis.call('HINCRBY', counters, 'recovered', 1)
requeue(key, url)
schedule_touched()
local out = {1}
release(room(), out)
return out
""",
)

# A starting job's one call: the URL's inflight entry (if it is the entry of the claiming job,
# its attempt and turn, the job takes the URL's lease until `expiry`, and its slot of `key`:
# the one its release took, or a free one if the key may go now), whether the crawl is paused,
# its identity (started_at), the URLs released meanwhile (parked ones that came due first),
# whether a sitemap admitted the URL, the redirects that led to it, '1' if the job may make
# its request (else when to come back; '0' for a job that is not the URL's), the URL's lowered
# depth if it was found shorter, and the level. note: '1' to note the claim's time as
# last_claim_at (see stats.idle_warnings).
CLAIM = Script(
    keys=(*FRONTIER_KEYS, "sitemapped", "via"),
    args=(*FRONTIER_ARGS, "url", "key", "attempt", "turn", "expiry", "limit", "note"),
    lib=FRONTIER_LIB,
    body="""
refresh_allowed()
local entry = redis.call('HGET', inflight, url)
local go = '0'
if entry then
  local a, t = string.match(entry, '^%S+ %S+ (%d+) (%d+)')
  if a == attempt and t == turn then
    redis.call('ZADD', leased, expiry, url)
    local mine = tonumber(redis.call('ZSCORE', lprefix .. key, url) or '-1')
    if mine >= T then  -- the slot its release took: the key's schedule stands
      take_slot(key, url, expiry)
      go = '1'
    elseif live(key) < PACE.conc and load_host(key).ready <= T then
      take_slot(key, url, expiry)
      schedule(key)  -- (out of `ready` if that took its last slot)
      go = '1'
    else
      go = at(math.max(load_host(key).ready, T + 0.05))
    end
  end
end
if note == '1' then redis.call('HSET', counters, 'last_claim_at', now) end
local identity = redis.call('HGET', counters, 'started_at')
take_due(tonumber(limit))
schedule_touched()
local out = {}
release(room(), out)
return {entry, paused() and 1 or 0, identity, out, redis.call('SISMEMBER', sitemapped, url),
        redis.call('HGET', via, url), go, redis.call('HGET', lowered, url), LEVEL}
""",
)

# Park an in-flight URL until `until_at` (now or past: straight back to the head of its key's
# queue), if its entry is still the expected one, replaced by `entry`; the job's lease ends,
# its slot is freed (`slot`, as FINISH's), and what is due is released. `counter`: a field to
# increment, or ''. Returns {1 | 0 (stale), when the freed key may go next, released...}.
PARK = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "url", "key", "expected", "entry", "until_at", "counter", "slot"),
    lib=FRONTIER_LIB,
    body="""
if not same_entry(redis.call('HGET', inflight, url), expected) then return {0, '0'} end
refresh_allowed()
redis.call('HSET', inflight, url, entry)
redis.call('ZREM', leased, url)
if counter ~= '' then redis.call('HINCRBY', counters, counter, 1) end
local next_at = free_slot_of(url, slot)
if tonumber(until_at) <= T then
  requeue(key, url)
else
  redis.call('ZADD', later, until_at, url)
  LATER_N = nil
  redis.call('HSET', parked, url, key)
end
schedule_touched()
local out = {1, string.format('%.6f', next_at)}
release(room(), out)
return out
""",
)

# Free the slot of a job that did not end its URL (failed, cut short): `slot` as FINISH's;
# releases what is then due. Returns the released url, entry...
FREE_SLOT = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "url", "slot"),
    lib=FRONTIER_LIB,
    body="""
refresh_allowed()
free_slot_of(url, slot)
schedule_touched()
local out = {}
release(room(), out)
return out
""",
)

# The turn of a robots.txt redirect hop to key `key` (rqcrawl.workers.gate.HopPacer), which
# takes no slot: `ended` is the key of the request that just ended ('' when asking again),
# whose next request now waits its delay in force from now; `own` is 1 when the asking job
# holds a slot of `key`. Another key's hop also waits for a free slot, and holds it meanwhile
# as `holder` (a lease until a while after it asks again), so that a busy host's URLs, each
# released as the one before ends, cannot starve it. Returns '0' when the hop may go now (the
# key's next request then waits its delay from now), else when to ask again.
HOP_TURN = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "key", "ended", "own", "holder", "hold_for"),
    lib=FRONTIER_LIB,
    body="""
if ended ~= '' then wait_from_now(ended, load_host(ended)) end
local h = load_host(key)
local others = 0
if own ~= '1' then
  local mine = tonumber(redis.call('ZSCORE', lprefix .. key, holder) or '-1') >= T
  others = live(key) - (mine and 1 or 0)
end
if h.ready > T or others >= PACE.conc then
  local again = math.max(h.ready, T + 0.05)
  if own ~= '1' then
    take_slot(key, holder, again + tonumber(hold_for))
    drop_turn(key)
  end
  return at(again)
end
drop_slot(key, holder)
wait_from_now(key, h)
schedule(key)
return '0'
""",
)

# The last request of a robots.txt fetch, a redirect hop to key `key` (another host's), ended:
# that key's next request waits its delay from now, as after a page (HOP_TURN made it wait
# from when the hop went, before its answer came).
HOP_ENDED = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "key"),
    lib=FRONTIER_LIB,
    body="""
wait_from_now(key, load_host(key))
""",
)

# Bring parked URLs whose time came back to their keys' queues, go on settling held-back
# records, and release what is due (the release thread, the waker, the recovery pass).
# Returns {records left to settle, released url, entry...}.
DUE = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "limit"),
    lib=FRONTIER_LIB,
    body="""
refresh_allowed()
take_due(tonumber(limit))
schedule_touched()
local out = {advance(ALLOWED)}
release(room(), out)
return out
""",
)

# If the crawl is halted and the job is still the live attempt for the URL, put the URL back
# in its key's queue at its depth (a new URL again), or drop it if the crawl was cancelled (a
# retry scheduled by a job that was running during the cancel); its slot is freed.
PUT_BACK = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "url", "key", "expected"),
    lib=FRONTIER_LIB,
    body="""
if redis.call('HEXISTS', counters, 'paused_at') == 0 then return 0 end
if not same_entry(redis.call('HGET', inflight, url), expected) then return 0 end
refresh_allowed()
local d, p = string.match(expected, '^(%S+) %S+ %S+ %S+ (%S+)$')
d = tonumber(redis.call('HGET', lowered, url) or d)
redis.call('HDEL', inflight, url)
redis.call('HDEL', lowered, url)
redis.call('ZREM', leased, url)
free_slot(key, url, -1, '-', 0, -1, 0)
pend(d, -1)
if redis.call('HEXISTS', counters, 'cancelled_at') == 1 then
  redis.call('HINCRBY', counters, 'dropped', 1)
else
  hold(key, url, d, p or 0)
  redis.call('HINCRBY', counters, 'put_back', 1)
end
schedule_touched()
return 1
""",
)

# Readmit URLs due for a revisit (from the task table) into their keys' queues, past the Bloom
# filter (seen is not done), unless the URL is already waiting for its revisit or in flight,
# or the crawl is cancelled. The tail holds "priority depth key url" entries. Returns
# {readmitted, released url, entry...}.
READMIT = Script(
    keys=(*FRONTIER_KEYS, "revisiting"),
    args=FRONTIER_ARGS,
    arg_tail="entries",
    lib=FRONTIER_LIB,
    body="""
if redis.call('HEXISTS', counters, 'cancelled_at') == 1 then return {0} end
refresh_allowed()
local added = 0
for i = entries, #ARGV do
  local p, d, key, url = string.match(ARGV[i], '^(%S+) (%S+) (%S+) (.*)$')
  if redis.call('HEXISTS', inflight, url) == 0 and redis.call('SADD', revisiting, url) == 1 then
    hold(key, url, d, p)
    added = added + 1
  end
end
if added > 0 then redis.call('HINCRBY', counters, 'revisits', added) end
schedule_touched()
local out = {added}
release(room(), out)
return out
""",
)

# Hold sitemap documents (rqcrawl.frontier.sitemaps: entries "sitemap:<url>") at depth 0 and
# `priority`, past the Bloom filter and the budgets (a sitemap is not a page of the crawl):
# each document once per crawl (the field `entry` of `sitemaps`), at most `cap` per site (the
# field `docs|site`), none once the crawl is cancelled. The tail holds (site, key, entry).
# Returns {held, refused by the cap, released url, entry...} (one held before is neither:
# with revisits it comes back on its own schedule, from the task table).
HOLD_SITEMAPS = Script(
    keys=(*FRONTIER_KEYS, "sitemaps"),
    args=(*FRONTIER_ARGS, "cap", "priority"),
    arg_tail="triples",
    lib=FRONTIER_LIB,
    body="""
if redis.call('HEXISTS', counters, 'cancelled_at') == 1 then return {0, 0} end
refresh_allowed()
local held_now, capped = 0, 0
for i = triples, #ARGV, 3 do
  local count_field, key, entry = 'docs|' .. ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if redis.call('HEXISTS', sitemaps, entry) == 0 then
    if tonumber(redis.call('HGET', sitemaps, count_field) or '0') < tonumber(cap) then
      redis.call('HSET', sitemaps, entry, 1)
      redis.call('HINCRBY', sitemaps, count_field, 1)
      hold(key, entry, 0, priority)
      held_now = held_now + 1
    else
      capped = capped + 1
    end
  end
end
schedule_touched()
local out = {held_now, capped}
release(room(), out)
return out
""",
)

# Hold requisites (rqcrawl.frontier.requisites: entries "requisite:<url>") at `depth` (their
# page's) and `priority`, past the budgets (a requisite is not a page of the crawl): each
# once per crawl, by the Bloom filter (check-and-add of the entry), none once the crawl is
# cancelled. The tail holds (key, entry) for each of `n` entries, then their Bloom positions.
# Returns {held, released url, entry...}.
HOLD_REQUISITES = Script(
    keys=FRONTIER_KEYS,
    args=(*FRONTIER_ARGS, "depth", "priority", "n", "shard_bits", "k", "size"),
    key_tail="bloom0",
    arg_tail="tail",
    lib=BLOOM_LIB + FRONTIER_LIB,
    body="""
if redis.call('HEXISTS', counters, 'cancelled_at') == 1 then return {0} end
refresh_allowed()
local count, sbits = tonumber(n), tonumber(shard_bits)
bloom_alloc(bloom0, sbits, size)
local new = bloom_check(bloom0, sbits, tonumber(k), ARGV, tail + 2 * count, count, true)
local held_now = 0
for i = 1, count do
  if new[i] == 1 then
    hold(ARGV[tail + 2 * (i - 1)], ARGV[tail + 2 * (i - 1) + 1], tonumber(depth), priority)
    held_now = held_now + 1
  end
end
if held_now > 0 then redis.call('HINCRBY', counters, 'requisites', held_now) end
schedule_touched()
local out = {held_now}
release(room(), out)
return out
""",
)

# Halt the crawl for good and drop its pending work (waiting, in flight, parked) in one step,
# so that no release can slip in between; held-back records are emitted first (their pages
# were fetched: their depth is the crawl's last word). Returns false if it was already
# cancelled, else {held count, url, entry, url, entry...} of the dropped in-flight URLs.
CANCEL = Script(
    keys=(*FRONTIER_KEYS, "revisiting", "sitemapped", "via"),
    args=FRONTIER_ARGS,
    lib=FRONTIER_LIB,
    body="""
if redis.call('HEXISTS', counters, 'cancelled_at') == 1 then return false end
redis.call('HSETNX', counters, 'paused_at', now)
redis.call('HSET', counters, 'cancelled_at', now)
local depths = {}
for _, d in ipairs(redis.call('HVALS', spec)) do depths[d] = true end
for d in pairs(depths) do
  local h = sprefix .. d
  local kv = redis.call('HGETALL', h)
  for i = 2, #kv, 2 do emit(cjson.decode(kv[i]).r) end
  redis.call('DEL', h)
end
local n_held = tonumber(redis.call('HGET', counters, 'held') or '0')
for _, key in ipairs(redis.call('SMEMBERS', qkeys)) do redis.call('DEL', qprefix .. key) end
local flying = redis.call('HGETALL', inflight)
redis.call('DEL', inflight, later, parked, ready, blocked, qkeys, pending, spec, lowered,
           revisiting, sitemapped, via)
redis.call('HSET', counters, 'held', 0)
redis.call('HINCRBY', counters, 'dropped', n_held + #flying / 2)
local out = {n_held}
for _, v in ipairs(flying) do out[#out + 1] = v end
return out
""",
)

# max_pages over shards, run on the crawl's first shard: grant a shard `need` pages, or a
# block of up to `block` (at most 1/`shards` of those left, so that the shards that stop
# early strand little), never more than max_pages in all; returns the pages granted.
GRANT_PAGES = Script(
    keys=("counters",),
    args=("need", "block", "shards", "max_pages"),
    body="""
local granted = tonumber(redis.call('HGET', counters, 'pages_granted') or '0')
local left = tonumber(max_pages) - granted
local want = math.max(tonumber(need), math.min(tonumber(block), math.ceil(left / tonumber(shards))))
local give = math.max(0, math.min(left, want))
if give > 0 then redis.call('HINCRBY', counters, 'pages_granted', give) end
return give
""",
)

# RQ's non-blocking dequeue of one queue in one round trip (rqcrawl.workers.worker.CrawlQueue):
# the first job id moves to RQ's intermediate list as LMOVE does, and its hash comes with it
# (`prefix` .. id, a key the script names itself: RQ's job hashes are not in KEYS, as RQ
# runs on one server). Returns false for an empty queue, else {id, field, value, ...}; a job
# whose hash is gone comes with no fields, as RQ's HGETALL would.
DEQUEUE = Script(
    keys=("queue", "intermediate"),
    args=("prefix",),
    body="""
local id = redis.call('LMOVE', queue, intermediate, 'LEFT', 'RIGHT')
if not id then return false end
local job = redis.call('HGETALL', prefix .. id)
table.insert(job, 1, id)
return job
""",
)

# A follower wrote records `ARGV[delivered..]` to disk: acknowledge them in `group`, forget
# where its batch started in its file (the `followers` hash: a restart cuts the file back to
# a batch still pending there, never to one acknowledged), and trim the stream of every
# record that each of its groups has delivered and acknowledged (below the oldest pending
# one, else past the last delivered one), counting the bytes trimmed (`trimmed_bytes` of
# `counters`, against emit's `record_bytes`); count the records as the follower's
# (`delivered_to`: what left Redis and where it went). Returns the stream's length.
ACK_RECORDS = Script(
    keys=("items", "followers", "delivered_to", "counters"),
    args=("group", "consumer"),
    arg_tail="delivered",
    body="""
if #ARGV >= delivered then
  local acked = redis.call('XACK', items, group, unpack(ARGV, delivered))
  if acked > 0 then redis.call('HINCRBY', delivered_to, consumer, acked) end
end
redis.call('HDEL', followers, consumer)
local floor = nil
local function lower(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  local a, b = tonumber(ms), tonumber(seq)
  if not floor or a < floor[1] or (a == floor[1] and b < floor[2]) then floor = {a, b} end
end
for _, g in ipairs(redis.call('XINFO', 'GROUPS', items)) do
  local info = {}
  for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
  local pending = redis.call('XPENDING', items, info['name'])
  if pending[1] > 0 then
    lower(pending[2])
  else
    local ms, seq = string.match(info['last-delivered-id'], '^(%d+)-(%d+)$')
    lower(ms .. '-' .. string.format('%d', tonumber(seq) + 1))
  end
end
if floor then
  local id = string.format('%d-%d', floor[1], floor[2])
  local last = redis.call('XREVRANGE', items, '(' .. id, '-', 'COUNT', 1)[1]
  if last then  -- the bytes appended up to the last entry trimmed (emit's `o`)
    for i = 1, #last[2], 2 do
      if last[2][i] == 'o' then redis.call('HSET', counters, 'trimmed_bytes', last[2][i + 1]) end
    end
  end
  redis.call('XTRIM', items, 'MINID', id)
end
return redis.call('XLEN', items)
""",
)
