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
        self.source = lib + "\n".join(prelude) + "\n" + body
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
  if redis.call('EXISTS', KEYS[shard_key0 + shards - 1]) == 1 then return end
  for shard = 0, shards - 1 do
    local key = KEYS[shard_key0 + shard]
    if redis.call('EXISTS', key) == 0 then
      redis.call('SETBIT', key, math.min(shard_bits, bits - shard * shard_bits) - 1, 0)
    end
  end
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
  local new = {}
  for u = 1, count do
    new[u] = 0
    for i = first + (u - 1) * k, first + u * k - 1 do
      if old[i] == 0 then new[u] = 1 end
    end
  end
  return new
end
"""

# Admitted URLs wait in one list per priority: `held` itself for priority 0, `held:P` for
# priority P; the zset `priorities` names the priorities that have a list (score: P). The
# lists share the crawl's hash tag, so the keys made here are in the script's slot.
HELD_LIB = """
local function held_list(held, p)
  if tonumber(p) == 0 then return held end
  return held .. ':' .. p
end

local function hold(held, priorities, p, entry, at_head)
  redis.call(at_head and 'LPUSH' or 'RPUSH', held_list(held, p), entry)
  redis.call('ZADD', priorities, tonumber(p), p)
end
"""

# Release the heads of the held lists while they are at `level` and `room` allows, highest
# priority first, into `inflight`, appending "priority depth url" to `out`. Returns how many
# were released, or -1 when nothing is held at all. Small batches: while a level drains the
# head waits for the next level, and copying `room` entries on every call to look at the first
# one was half of Redis's CPU per page.
RELEASE_LIB = """
local function release_list(held, priorities, inflight, level, room, now, out, p)
  local list = held_list(held, p)
  local taken = 0
  while room > taken do
    local head = redis.call('LRANGE', list, 0, math.min(room - taken, 64) - 1)
    local batch = 0
    for _, entry in ipairs(head) do
      local sp = string.find(entry, ' ', 1, true)
      local depth = tonumber(string.sub(entry, 1, sp - 1))
      if depth > level then break end
      local url = string.sub(entry, sp + 1)
      if redis.call('HSETNX', inflight, url, depth .. ' ' .. now .. ' 0 0 ' .. p) == 1 then
        out[#out + 1] = p .. ' ' .. entry
      end
      batch = batch + 1
    end
    if batch == 0 then break end
    redis.call('LTRIM', list, batch, -1)
    taken = taken + batch
    if batch < #head then break end
  end
  if redis.call('EXISTS', list) == 0 then redis.call('ZREM', priorities, p) end
  return taken
end

local function release_held(held, priorities, inflight, level, room, now, out)
  local ps = redis.call('ZREVRANGE', priorities, 0, -1)
  if #ps == 0 then return -1 end
  local taken = 0
  for _, p in ipairs(ps) do
    if room <= taken then break end
    taken = taken + release_list(held, priorities, inflight, level, room - taken, now, out, p)
  end
  return taken
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

# The one step that ends a URL: forget it from `inflight`, count its outcome, record it,
# admit its children through the Bloom filter (budgets apply: max_pages, max_host_pages, and
# max_host_share once `share_floor` URLs were admitted; a refused child is recorded once, from
# `skip_record`, and stays refused: it is in the filter), and release the next URLs of the
# current level while fewer than `window` are in flight. With `exact` '0' (no level barrier,
# first-found depth) the release is not gated by depth, and URLs parked in `later` (no RQ
# job: a host not ready, a retry not due) leave room in the window, so that one slow host's
# deferred URLs cannot fill it and starve the other hosts.
# done: the ending URL ('' when seeding or resuming). final: '1' to end it, '0' to only admit
# its children while it stays in flight (a page with more links than one call should take).
# increments: "field n field n"; a field "kind|host" goes to the per-host hash.
# record: the URL's record as JSON, or ''. skip_record: the JSON of a refused child's record
# without its url and outcome. n: number of children; the tail holds 3 arguments per child
# (verdict, '-' to admit; host; url), then k Bloom positions per child. Children are held at
# `child_priority`; the level is released highest priority first (HELD_LIB).
# In a crawl over several shards (sharded = '1'), `foreign` is a JSON list of the page's links
# to other shards' hosts, appended to `outbox` in the same step (entries of
# rqcrawl.frontier.state.Outgoing, admitted on their shard by a drain; counted in `outboxed`, the
# cross-shard share the bench reports), and the level is not raised
# here: the last element of the header says that this shard has nothing in flight.
# source: 'sitemap' to note the admitted children in `sitemapped` until they end (their
# records say where they came from), or ''. child_via: for a redirect's target (a child at
# the ending URL's own depth), the JSON list of the redirects that led to it, noted in `via`
# until it ends; such a target of the level in progress goes to the head of its list, so that
# the level releases it before the next level's URLs (depth stays exact).
# max_pages over shards: a shard admits only the pages the first shard granted it
# (`pages_allowed`, see GRANT_PAGES); with fewer left than the children it would admit (new
# to the Bloom filter, not refused by a rule), and the first shard not yet out of pages, the
# script changes nothing but the filter's allocation and returns {2, pages needed, 0, 0}.
# max_host_share counts `others`, the URLs admitted by the other shards (as last read).
# Returns {1 | 0 (done had already ended), admitted, reap due, level done here,
# released "priority depth url"...}.
FINISH = Script(
    keys=(
        "counters", "inflight", "held", "items", "reap_lock", "host_pages", "later", "leased",
        "revisiting", "priorities", "outbox", "sitemapped", "via",
    ),
    args=(
        "done", "final", "increments", "record", "child_depth", "child_priority", "source",
        "window", "child_via",
        "shard_bits", "k", "now", "reap_every", "max_pages", "max_host_pages", "max_host_share",
        "share_floor", "skip_record", "skip_prefix", "n", "size", "sharded", "foreign", "exact",
        "others",
    ),
    key_tail="bloom0",
    arg_tail="children",
    lib=BLOOM_LIB + HELD_LIB + RELEASE_LIB,
    body="""
local max_total = tonumber(max_pages)
local limit = max_total
if sharded == '1' and max_total > 0 then
  limit = tonumber(redis.call('HGET', counters, 'pages_allowed') or '0')
  local room = limit - tonumber(redis.call('HGET', counters, 'admitted') or '0')
  local kids = tonumber(n)
  if room < kids and redis.call('HEXISTS', counters, 'pages_out') == 0 then
    bloom_alloc(bloom0, tonumber(shard_bits), size)
    local new = bloom_check(bloom0, tonumber(shard_bits), tonumber(k), ARGV,
                            children + 3 * kids, kids, false)
    local want = 0
    for i = 1, kids do
      if new[i] == 1 and ARGV[children + 3 * (i - 1)] == '-' then want = want + 1 end
    end
    if want > room then return {2, want - room, 0, 0} end
  end
end
local reap_due = 0
if done ~= '' and final ~= '1' then
  if redis.call('HEXISTS', inflight, done) == 0 then return {0, 0, 0, 0} end
elseif done ~= '' then
  if redis.call('HDEL', inflight, done) == 0 then return {0, 0, 0, 0} end
  redis.call('ZREM', later, done)
  redis.call('ZREM', leased, done)
  redis.call('SREM', revisiting, done)
  redis.call('SREM', sitemapped, done)
  redis.call('HDEL', via, done)
  for field, count in string.gmatch(increments, '(%S+) (%S+)') do
    local per_host = string.find(field, '|', 1, true)
    redis.call('HINCRBY', per_host and host_pages or counters, field, count)
  end
  if record ~= '' then redis.call('XADD', items, '*', 'r', record) end
  redis.call('HSET', counters, 'last_at', now)
  if redis.call('SET', reap_lock, '1', 'NX', 'EX', reap_every) then reap_due = 1 end
end
local sbits, kk = tonumber(shard_bits), tonumber(k)
local max_host = tonumber(max_host_pages)
local max_share, floor = tonumber(max_host_share), tonumber(share_floor)
local count = tonumber(n)
if count > 0 then bloom_alloc(bloom0, sbits, size) end
local total = tonumber(redis.call('HGET', counters, 'admitted') or '0')
local admitted = 0
local skip = nil
local level = tonumber(redis.call('HGET', counters, 'level') or '0')
local at_head = child_via ~= '' and exact == '1' and tonumber(child_depth) <= level
local fresh = bloom_check(bloom0, sbits, kk, ARGV, children + 3 * count, count, true)
for i = 1, count do
  if fresh[i] == 1 then
    local at = children + 3 * (i - 1)
    local verdict, host, url = ARGV[at], ARGV[at + 1], ARGV[at + 2]
    if verdict == '-' then
      local so_far = total + admitted
      local whole = so_far + tonumber(others)
      local of_host = tonumber(redis.call('HGET', host_pages, host) or '0')
      if max_total > 0 and so_far >= limit then
        verdict = 'max_pages'
      elseif max_host > 0 and of_host >= max_host then
        verdict = 'max_pages_per_host'
      elseif max_share > 0 and whole >= floor and of_host + 1 > max_share * (whole + 1) then
        verdict = 'max_host_share'
      end
    end
    if verdict == '-' then
      hold(held, priorities, child_priority, child_depth .. ' ' .. url, at_head)
      redis.call('HINCRBY', host_pages, host, 1)
      if source ~= '' then redis.call('SADD', sitemapped, url) end
      if child_via ~= '' then redis.call('HSET', via, url, child_via) end
      admitted = admitted + 1
    else
      skip = skip or cjson.decode(skip_record)
      skip.url, skip.outcome = url, verdict
      redis.call('XADD', items, '*', 'r', cjson.encode(skip))
      redis.call('HINCRBY', counters, skip_prefix .. verdict, 1)
    end
  end
end
if admitted > 0 then redis.call('HINCRBY', counters, 'admitted', admitted) end

if foreign ~= '' then
  local entries = cjson.decode(foreign)
  for i = 1, #entries, 1000 do  -- unpack's stack is bounded
    redis.call('RPUSH', outbox, unpack(entries, i, math.min(i + 999, #entries)))
  end
  redis.call('HINCRBY', counters, 'outboxed', #entries)
end

local out = {1, admitted, reap_due, 0}
local room = tonumber(window) - redis.call('HLEN', inflight)
if exact ~= '1' then room = room + redis.call('ZCARD', later) end
if redis.call('HEXISTS', counters, 'paused_at') == 1 then room = 0 end
while room > 0 do
  local taken = release_held(held, priorities, inflight, exact == '1' and level or math.huge,
                             room, now, out)
  if taken ~= 0 then
    break  -- released (every list down to the level, or the window is full), or none held
  elseif redis.call('HLEN', inflight) == 0 and sharded ~= '1' then
    level = level + 1
    redis.call('HSET', counters, 'level', level)
  else
    break
  end
end
-- A shard's level is the whole crawl's: another shard may still send links of this level
-- here, so its end is only reported, for the coordinator (rqcrawl.frontier.levels).
if sharded == '1' and redis.call('HLEN', inflight) == 0 then out[4] = 1 end
return out
""",
)  # fmt: skip

# Raise a shard's level from `level` to the next, if it is still there with nothing in flight
# and not halted (the coordinator decided that the whole crawl ended `level`:
# rqcrawl.frontier.levels;
# a second call for the same level does nothing), and release the next level's URLs.
# Returns the released "priority depth url" entries.
ADVANCE = Script(
    keys=("counters", "inflight", "held", "priorities"),
    args=("level", "window", "now"),
    lib=HELD_LIB + RELEASE_LIB,
    body="""
local current = tonumber(redis.call('HGET', counters, 'level') or '0')
if current ~= tonumber(level) or redis.call('HLEN', inflight) > 0 then return {} end
if redis.call('HEXISTS', counters, 'paused_at') == 1 then return {} end
redis.call('HSET', counters, 'level', current + 1)
local out = {}
release_held(held, priorities, inflight, current + 1, tonumber(window), now, out)
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

# Drop the first `n` entries of a shard's outbox, which the drain holding the lock `token`
# read and admitted on their shards, and free the lock; nothing if the lock is no longer
# that drain's (it ran out: another drain reads the same entries again, and the Bloom filter
# makes their second admission a no-op). Returns 1 if trimmed.
TRIM_OUTBOX = Script(
    keys=("outbox", "lock"),
    args=("token", "n"),
    body="""
if redis.call('GET', lock) ~= token then return 0 end
redis.call('LTRIM', outbox, tonumber(n), -1)
redis.call('DEL', lock)
return 1
""",
)

# Compare-and-set of one inflight entry, so the reaper never requeues a URL that ended or was
# requeued meanwhile, nor one whose lease a live worker renewed. An expired lease is dropped
# whatever the entry: no live job holds it. Returns 1 if the entry was replaced.
REQUEUE = Script(
    keys=("inflight", "counters", "later", "leased"),
    args=("url", "expected", "entry", "now"),
    body="""
local lease = tonumber(redis.call('ZSCORE', leased, url) or '-1')
if lease >= tonumber(now) then return 0 end
if lease >= 0 then redis.call('ZREM', leased, url) end
if redis.call('HGET', inflight, url) ~= expected then return 0 end
redis.call('HSET', inflight, url, entry)
redis.call('ZREM', later, url)
redis.call('HINCRBY', counters, 'recovered', 1)
return 1
""",
)

# Take the URLs of `later` that are due (also while paused: their jobs then give them back to
# `held`, so a paused crawl settles with nothing in flight): {url, entry, url, entry...}.
DUE_LIB = """
local function take_due(later, inflight, now, limit)
  local out = {}
  for _, url in ipairs(redis.call('ZRANGEBYSCORE', later, '-inf', now, 'LIMIT', 0, limit)) do
    redis.call('ZREM', later, url)
    local entry = redis.call('HGET', inflight, url)
    if entry then
      out[#out + 1] = url
      out[#out + 1] = entry
    end
  end
  return out
end
"""

# A starting job's one call: the URL's inflight entry (if it is the entry of the claiming job,
# its attempt and turn, the job takes the URL's lease until `expiry`), whether the crawl is
# paused, its identity (started_at), and the deferred URLs that are due (taken as DUE does).
# note: '1' to note the claim's time as last_claim_at (see stats.idle_warnings).
# Returns {entry or nil, paused (0 | 1), identity or nil, {url, entry, ...}}.
CLAIM = Script(
    keys=("inflight", "leased", "counters", "later", "sitemapped", "via"),
    args=("url", "attempt", "turn", "expiry", "now", "limit", "note"),
    lib=DUE_LIB,
    body="""
local entry = redis.call('HGET', inflight, url)
if entry then
  local a, t = string.match(entry, '^%S+ %S+ (%d+) (%d+)')
  if a == attempt and t == turn then redis.call('ZADD', leased, expiry, url) end
end
if note == '1' then redis.call('HSET', counters, 'last_claim_at', now) end
local paused = redis.call('HEXISTS', counters, 'paused_at')
local identity = redis.call('HGET', counters, 'started_at')
-- last: whether a sitemap admitted the URL (its record says so), the redirects that led to it
return {entry, paused, identity, take_due(later, inflight, now, limit),
        redis.call('SISMEMBER', sitemapped, url), redis.call('HGET', via, url)}
""",
)

# Park an in-flight URL in `later` until `until_at`, if its entry is still the expected one;
# the job's lease ends (a waiting URL is nobody's). `counter`: a field to increment, or ''.
PARK = Script(
    keys=("inflight", "later", "leased", "counters"),
    args=("url", "expected", "entry", "until_at", "counter"),
    body="""
if redis.call('HGET', inflight, url) ~= expected then return 0 end
redis.call('HSET', inflight, url, entry)
redis.call('ZADD', later, until_at, url)
redis.call('ZREM', leased, url)
if counter ~= '' then redis.call('HINCRBY', counters, counter, 1) end
return 1
""",
)

# Hand an in-flight URL from its job to a new job (a render job, rqcrawl.render.browser), if its
# entry
# is still the expected one: the entry becomes the new job's, and the job's lease ends (the new
# job takes its own when it starts; until then the recovery pass looks for its RQ job, as for
# any released URL, so that a queue wait longer than a lease is no loss).
HAND_OFF = Script(
    keys=("inflight", "leased"),
    args=("url", "expected", "entry"),
    body="""
if redis.call('HGET', inflight, url) ~= expected then return 0 end
redis.call('HSET', inflight, url, entry)
redis.call('ZREM', leased, url)
return 1
""",
)

# Take the URLs of `later` that are due (DUE_LIB). Returns url, entry, url, entry...
DUE = Script(
    keys=("later", "inflight"),
    args=("now", "limit"),
    lib=DUE_LIB,
    body="return take_due(later, inflight, now, limit)",
)

# If the crawl is halted and the job is still the live attempt for the URL, put the URL back
# on the head of its priority's list (it belongs to the current level), or drop it if the
# crawl was cancelled (a retry scheduled by a job that was running during the cancel). A
# running job's URL is never in `later`: deferral gives it a new job.
PUT_BACK = Script(
    keys=("counters", "inflight", "held", "priorities"),
    args=("url", "expected", "depth", "priority"),
    lib=HELD_LIB,
    body="""
if redis.call('HEXISTS', counters, 'paused_at') == 0 then return 0 end
if redis.call('HGET', inflight, url) ~= expected then return 0 end
redis.call('HDEL', inflight, url)
if redis.call('HEXISTS', counters, 'cancelled_at') == 1 then
  redis.call('HINCRBY', counters, 'dropped', 1)
else
  hold(held, priorities, priority, depth .. ' ' .. url, true)
  redis.call('HINCRBY', counters, 'put_back', 1)
end
return 1
""",
)

# Readmit URLs due for a revisit (from the task table) into the held lists, past the Bloom
# filter (seen is not done), unless the URL is already waiting for its revisit or in flight,
# or the crawl is cancelled. The tail holds "priority depth url" entries. Returns how many
# were readmitted.
READMIT = Script(
    keys=("counters", "inflight", "held", "revisiting", "priorities"),
    args=(),
    arg_tail="entries",
    lib=HELD_LIB,
    body="""
if redis.call('HEXISTS', counters, 'cancelled_at') == 1 then return 0 end
local added = 0
for i = entries, #ARGV do
  local p, entry = string.match(ARGV[i], '^(%S+) (.*)$')
  local url = string.sub(entry, string.find(entry, ' ', 1, true) + 1)
  if redis.call('HEXISTS', inflight, url) == 0 and redis.call('SADD', revisiting, url) == 1 then
    hold(held, priorities, p, entry, false)
    added = added + 1
  end
end
if added > 0 then redis.call('HINCRBY', counters, 'revisits', added) end
return added
""",
)

HELD_COUNT_LIB = """
local function held_count(held, priorities)
  local n = 0
  for _, p in ipairs(redis.call('ZRANGE', priorities, 0, -1)) do
    n = n + redis.call('LLEN', held_list(held, p))
  end
  return n
end
"""

# The number of admitted URLs not yet released, over every priority's list.
HELD = Script(
    keys=("held", "priorities"),
    args=(),
    lib=HELD_LIB + HELD_COUNT_LIB,
    body="return held_count(held, priorities)",
)

# Halt the crawl for good and drop its pending work (held, in flight, deferred) in one step,
# so that no release can slip in between. Returns false if it was already cancelled, else
# {held count, url, entry, url, entry...} of the dropped in-flight URLs.
CANCEL = Script(
    keys=(
        "counters",
        "inflight",
        "held",
        "later",
        "revisiting",
        "priorities",
        "sitemapped",
        "via",
    ),
    args=("now",),
    lib=HELD_LIB + HELD_COUNT_LIB,
    body="""
if redis.call('HEXISTS', counters, 'cancelled_at') == 1 then return false end
redis.call('HSETNX', counters, 'paused_at', now)
redis.call('HSET', counters, 'cancelled_at', now)
local n_held = held_count(held, priorities)
for _, p in ipairs(redis.call('ZRANGE', priorities, 0, -1)) do
  redis.call('DEL', held_list(held, p))
end
local flying = redis.call('HGETALL', inflight)
redis.call('DEL', inflight, held, later, revisiting, priorities, sitemapped, via)
redis.call('HINCRBY', counters, 'dropped', n_held + #flying / 2)
local out = {n_held}
for _, v in ipairs(flying) do out[#out + 1] = v end
return out
""",
)

# A host's politeness state is "ready booked step fetch backoff base": when its next request
# may start, the last slot promised to a deferred job, the spacing of slots, its smoothed
# fetch time (an EWMA of request durations), the extra delay of the adaptive throttle (0: none)
# and the base delay it was last given (the setting or Crawl-delay). An entry of an earlier
# version has the first three only. The delay in force is the base, or the back-off, or
# `factor` x the smoothed fetch time (Heritrix's delayFactor), whichever is longest, the last
# two at most `cap` (max_backoff_delay). Slots are spaced by the delay in force plus the
# smoothed fetch time, bounded by that delay (or STEP_FLOOR without one): a host serving one
# request at a time allows about that pace, and one slow response cannot stretch it.
_HOST_STATE = """
local STEP_FLOOR = 0.25
local function load_state(hosts, host)
  local v = {0, 0, 0, 0, 0, 0}
  local state = redis.call('HGET', hosts, host)
  if state then
    local i = 1
    for x in string.gmatch(state, '%S+') do
      v[i] = tonumber(x) or 0
      i = i + 1
    end
  end
  return v[1], v[2], v[3], v[4], v[5], v[6]
end
local function save_state(hosts, host, ready, booked, step, fetch, backoff, base)
  redis.call('HSET', hosts, host, string.format('%.6f %.6f %.6f %.6f %.6f %.6f',
             ready, booked, step, fetch, backoff, base))
end
local function in_force(d, fetch, backoff, factor, cap)
  return math.max(d, math.min(math.max(backoff, factor * fetch), cap))
end
local function spacing(force, fetch)
  return force + math.min(fetch, math.max(force, STEP_FLOOR))
end
"""

# May a request to `host` start now? Returns '0' to go (the lease is taken), else the time
# (string) of the slot booked for the job. `booked` is '1' when the asking job holds a booked
# slot: one that just missed it (the host is free, ready within one step) keeps its turn and
# comes back at `ready` instead of joining the end of the line. `delay`: the host's base
# delay; factor and cap: see _HOST_STATE.
HOST_GATE = Script(
    keys=("hosts", "leases"),
    args=("host", "now", "delay", "concurrency", "lease", "expiry", "booked", "factor", "cap"),
    lib=_HOST_STATE,
    body="""
local t, base = tonumber(now), tonumber(delay)
local is_booked = booked == '1'
local ready, last_booked, _, fetch, backoff = load_state(hosts, host)
local d = in_force(base, fetch, backoff, tonumber(factor), tonumber(cap))
local step = spacing(d, fetch)
-- expired leases (of killed workers) matter only once the live ones seem to fill the host
local running = redis.call('ZCARD', leases)
if running >= tonumber(concurrency) then
  redis.call('ZREMRANGEBYSCORE', leases, '-inf', t)
  running = redis.call('ZCARD', leases)
end
local free = running < tonumber(concurrency)
-- Without a delay, `ready` is only the end of another worker's last request, whose clock may
-- be a little ahead of ours: waiting for it deferred jobs for nothing, and every later job
-- queued behind them one request duration apart.
if free and (d == 0 or t >= ready) and (is_booked or last_booked <= t) then
  redis.call('ZADD', leases, expiry, lease)
  save_state(hosts, host, t + d, last_booked, step, fetch, backoff, base)
  return '0'
end
local slot
if is_booked and free and ready - t <= step then
  slot = ready
else
  slot = math.max(ready, last_booked + step, t + 0.05)
  save_state(hosts, host, ready, slot, step, fetch, backoff, base)
end
return string.format('%.6f', slot)
""",
)

# End a request: release its lease, learn the host's smoothed fetch time from the request's
# `duration` (-1: no request was made), let the adaptive throttle (`adaptive` '1') hear the
# answer (`answer`: 'push' for 429/503 or a Retry-After, with `retry_after` seconds or 0; 'ok'
# for a success; '' otherwise): a push doubles the back-off (at least BACKOFF_MIN, at least
# the Retry-After, at most `cap`), a success halves it until it is below the base delay.
# Then `ready` is at least now + the delay in force.
HOST_RELEASE = Script(
    keys=("hosts", "leases"),
    args=(
        "host", "lease", "now", "delay", "duration", "answer", "retry_after", "adaptive",
        "factor", "cap",
    ),
    lib=_HOST_STATE,
    body="""
local SMOOTHING, BACKOFF_MIN = 0.3, 0.25
redis.call('ZREM', leases, lease)
local ready, last_booked, _, fetch, backoff = load_state(hosts, host)
local t, base, dur, c = tonumber(now), tonumber(delay), tonumber(duration), tonumber(cap)
if dur >= 0 then
  fetch = fetch == 0 and dur or (1 - SMOOTHING) * fetch + SMOOTHING * dur
end
if adaptive == '1' and answer == 'push' then
  backoff = math.min(c, math.max(2 * math.max(backoff, base, BACKOFF_MIN),
                                 tonumber(retry_after) or 0))
elseif answer == 'ok' and backoff > 0 then
  backoff = backoff / 2
  if backoff < math.max(base, BACKOFF_MIN) then backoff = 0 end
end
local d = in_force(base, fetch, backoff, tonumber(factor), c)
save_state(hosts, host, math.max(ready, t + d), last_booked, spacing(d, fetch), fetch, backoff,
           base)
return 1
""",
)  # fmt: skip

# Hold sitemap documents (rqcrawl.parse.sitemaps: entries "sitemap:<url>") at depth 0 and
# `priority`, past the Bloom filter and the budgets (a sitemap is not a page of the crawl):
# each document once per crawl (the field `entry` of `sitemaps`), at most `cap` per site (the
# field `docs|site`), none once the crawl is cancelled. The tail holds pairs (site, entry).
# Returns {held, refused by the cap} (one held before is neither: with revisits it comes back
# on its own schedule, from the task table).
HOLD_SITEMAPS = Script(
    keys=("counters", "held", "priorities", "sitemaps"),
    args=("cap", "priority"),
    arg_tail="pairs",
    lib=HELD_LIB,
    body="""
if redis.call('HEXISTS', counters, 'cancelled_at') == 1 then return {0, 0} end
local held_now, capped = 0, 0
for i = pairs, #ARGV, 2 do
  local count_field, entry = 'docs|' .. ARGV[i], ARGV[i + 1]
  if redis.call('HEXISTS', sitemaps, entry) == 0 then
    if tonumber(redis.call('HGET', sitemaps, count_field) or '0') < tonumber(cap) then
      redis.call('HSET', sitemaps, entry, 1)
      redis.call('HINCRBY', sitemaps, count_field, 1)
      hold(held, priorities, priority, '0 ' .. entry, false)
      held_now = held_now + 1
    else
      capped = capped + 1
    end
  end
end
return {held_now, capped}
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
