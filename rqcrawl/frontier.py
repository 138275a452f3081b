"""The frontier: admission, level-by-level release as RQ jobs, exact finishing, recovery.

Admitted URLs wait in one Redis list per crawl (`held`, entries "depth url") and are released
as RQ jobs only while fewer than `window` are in flight, and only at the current level: level
d+1 starts once every URL of level d has ended. So a URL is always first discovered along a
shortest path, its depth is exact whatever the number of workers, and RQ holds at most
`window` jobs of a crawl at a time.

One Lua script ends a URL: it forgets it from `inflight`, records its outcome, admits its
children through the Bloom filter and releases the next URLs, all atomically. A crashed worker
therefore either did all of that or none of it; the reaper brings back URLs whose job was lost.
A page with more links than one call should take (Redis runs nothing else meanwhile) has them
admitted by earlier calls of the same script that only admit, and ends with the last batch; a
worker dying between two calls leaves the URL in flight, so it is fetched again and the links
already admitted are no-ops of the Bloom filter's check-and-add.

A job that starts on a URL takes a short lease on it (`leased`, url -> expiry), which the
process running the job renews while it works (`rqcrawl.leases`). A URL whose lease ran out
belongs to a dead worker: the recovery pass (every REAP_EVERY seconds) queues it again within
seconds, where RQ itself notices a dead worker's job only when its heartbeat expires.

A URL whose host is not ready (politeness, robots.txt) stays in flight but leaves RQ: it waits
in the `later` sorted set, scored by the time it may run, and is released again as a new job
of the same attempt (a new `turn`) by whichever comes first: a job starting on any worker, the
release thread of `rqcrawl.worker.CrawlWorker`, or a wake-up job in RQ's scheduler. A retry
waits there too, as the next attempt, so that it comes at its exact time and not on RQ's
scheduler's whole seconds.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from redis import Redis
from redis.exceptions import NoScriptError
from rq import Queue
from rq.job import Job, JobStatus
from rq.registry import StartedJobRegistry

from . import keys
from .bloom import LUA_BLOOM, BloomFilter, batches
from .config import CrawlConfig
from .leases import LEASE
from .sinks import failure_record
from .urls import host_of

REAP_EVERY = 5  # seconds between two recovery passes of one crawl
LOST_AFTER = 30  # seconds a released URL may go without a live RQ job before it is requeued
# A dead worker's URL is queued again LEASE to LEASE + REAP_EVERY seconds after its death.
# Seconds a finished crawl job stays in RQ (rq-dashboard's finished list) before it expires.
# Not 0: RQ deletes a result_ttl=0 job at once, which costs eight round trips per job, while
# an expiry rides in the worker's own success pipeline.
RESULT_TTL = 30
_LIVE = {"queued", "started", "scheduled", "deferred"}
JOB_FUNC = "rqcrawl.jobs.crawl_url"
# URLs this process has passed through the Bloom filter (at most this many, about 5 MB): they
# are in it for good, so they are not sent again. Pages of a site repeat most of their links,
# and each link costs k bit operations in Redis.
KNOWN_MAX = 50_000
WAKE_FUNC = "rqcrawl.jobs.wake"

# Redis work per child besides its k bit operations (a budget check, RPUSH and HINCRBY, or
# XADD of its record), in the bit operations of bloom.MAX_POSITIONS: sizes admission batches.
CHILD_COST = 4

# KEYS: counters, inflight, held, items, reap lock, pages per host, later, bloom shards...,
#       leased (last)
# ARGV: done url ('' when seeding), final ('1': end the done url; '0': only admit its children,
#       while it is still in flight), counter increments "field n field n", record json,
#       child depth, window, shard bits, k, now, reap interval, max pages, max pages per host,
#       recording time, n children, bloom bits,
#       3 slots per child (verdict, '-' to admit; host; url)..., k positions per child...
# Returns {1 | 0 (done url had already ended), admitted, reap due, released "depth url"...}
_LUA_FINISH = (
    LUA_BLOOM
    + """
local counters, inflight, held, items = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local host_pages = KEYS[6]
local done, now = ARGV[1], ARGV[9]
local reap_due = 0
if done ~= '' and ARGV[2] ~= '1' then
  if redis.call('HEXISTS', inflight, done) == 0 then return {0, 0, 0} end
elseif done ~= '' then
  if redis.call('HDEL', inflight, done) == 0 then return {0, 0, 0} end
  redis.call('ZREM', KEYS[7], done)
  redis.call('ZREM', KEYS[#KEYS], done)
  for field, n in string.gmatch(ARGV[3], '(%S+) (%S+)') do
    -- "kind|host": per-host counts, kept beside the host's admitted count (see stats.py)
    redis.call('HINCRBY', string.find(field, '|', 1, true) and host_pages or counters, field, n)
  end
  if ARGV[4] ~= '' then redis.call('XADD', items, '*', 'r', ARGV[4]) end
  redis.call('HSET', counters, 'last_at', now)
  if redis.call('SET', KEYS[5], '1', 'NX', 'EX', ARGV[10]) then reap_due = 1 end
end
local child_depth, shard_bits = ARGV[5], tonumber(ARGV[7])
local k, max_pages, max_host = tonumber(ARGV[8]), tonumber(ARGV[11]), tonumber(ARGV[12])
local n = tonumber(ARGV[14])
if n > 0 then bloom_alloc(8, shard_bits, tonumber(ARGV[15])) end
local total = tonumber(redis.call('HGET', counters, 'admitted') or '0')
local admitted = 0
for i = 1, n do
  if bloom_test(8, shard_bits, k, ARGV, 16 + 3 * n + (i - 1) * k, true) == 1 then
    local verdict, host, url = ARGV[13 + 3 * i], ARGV[14 + 3 * i], ARGV[15 + 3 * i]
    if verdict == '-' then
      if max_pages > 0 and total + admitted >= max_pages then
        verdict = 'max_pages'
      elseif max_host > 0 and tonumber(redis.call('HGET', host_pages, host) or '0') >= max_host then
        verdict = 'max_pages_per_host'
      end
    end
    if verdict == '-' then
      redis.call('RPUSH', held, child_depth .. ' ' .. url)
      redis.call('HINCRBY', host_pages, host, 1)
      admitted = admitted + 1
    else
      local record = {url = url, outcome = verdict, depth = tonumber(child_depth),
                      attempts = 0, fetched_at = ARGV[13]}
      redis.call('XADD', items, '*', 'r', cjson.encode(record))
      redis.call('HINCRBY', counters, 'skipped:' .. verdict, 1)
    end
  end
end
if admitted > 0 then redis.call('HINCRBY', counters, 'admitted', admitted) end

local out = {1, admitted, reap_due}
local level = tonumber(redis.call('HGET', counters, 'level') or '0')
local room = tonumber(ARGV[6]) - redis.call('HLEN', inflight)
if redis.call('HEXISTS', counters, 'paused_at') == 1 then room = 0 end  -- see control.py
while room > 0 do
  -- in small batches: while a level drains, the head waits for the next level, and copying
  -- `room` entries on every call to look at the first one was half of Redis's CPU per page
  local head = redis.call('LRANGE', held, 0, math.min(room, 64) - 1)
  if #head == 0 then break end
  local taken = 0
  for _, entry in ipairs(head) do
    local sp = string.find(entry, ' ', 1, true)
    local depth = tonumber(string.sub(entry, 1, sp - 1))
    if depth > level then break end
    local url = string.sub(entry, sp + 1)
    if redis.call('HSETNX', inflight, url, depth .. ' ' .. now .. ' 0 0') == 1 then
      out[#out + 1] = entry
    end
    taken = taken + 1
  end
  if taken > 0 then
    redis.call('LTRIM', held, taken, -1)
    room = room - taken
  elseif redis.call('HLEN', inflight) == 0 then
    level = level + 1
    redis.call('HSET', counters, 'level', level)
  else
    break
  end
end
return out
"""
)

# Compare-and-set of one inflight entry, so the reaper never requeues a URL that ended or
# was requeued meanwhile, nor one whose lease a live worker renewed. An expired lease is
# dropped whatever the entry: no live job holds it.
# KEYS: inflight, counters, later, leased. ARGV: url, expected entry, new entry, now.
_LUA_CAS = """
local lease = tonumber(redis.call('ZSCORE', KEYS[4], ARGV[1]) or '-1')
if lease >= tonumber(ARGV[4]) then return 0 end
if lease >= 0 then redis.call('ZREM', KEYS[4], ARGV[1]) end
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HINCRBY', KEYS[2], 'recovered', 1)
return 1
"""

# The URL's inflight entry; if it is the entry of the claiming job (attempt ARGV[2], turn
# ARGV[3]), the job takes the URL's lease until ARGV[4]. KEYS: inflight, leased.
_LUA_CLAIM = """
local entry = redis.call('HGET', KEYS[1], ARGV[1])
if entry then
  local attempt, turn = string.match(entry, ' (%d+) (%d+)$')
  if attempt == ARGV[2] and turn == ARGV[3] then
    redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
  end
end
return entry
"""

# Park an in-flight URL in `later` until ARGV[4], if its entry is still the expected one; the
# job's lease ends (a waiting URL is nobody's). ARGV[5]: a counter to increment, or ''.
# KEYS: inflight, later, leased, counters. ARGV: url, expected entry, new entry, time, counter.
_LUA_DEFER = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if ARGV[5] ~= '' then redis.call('HINCRBY', KEYS[4], ARGV[5], 1) end
return 1
"""

# Take the URLs of `later` that are due (also while paused: their jobs then give them back to
# `held`, so a paused crawl settles with nothing in flight). KEYS: later, inflight.
# ARGV: now, limit. Returns url, inflight entry, url, entry...
_LUA_DUE = """
local out = {}
for _, url in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])) do
  redis.call('ZREM', KEYS[1], url)
  local entry = redis.call('HGET', KEYS[2], url)
  if entry then
    out[#out + 1] = url
    out[#out + 1] = entry
  end
end
return out
"""


class CompactJob(Job):
    """An RQ job whose first save leaves out the fields that are still empty (callbacks,
    start and end times, worker, group): 8 of 17, about 130 bytes of Redis per pending job.
    RQ reads a missing field as empty. Only the first save: a later one (a requeue, a failed
    job) must overwrite old values with empty ones."""

    _new = False

    @classmethod
    def create(cls, *args, **kwargs) -> CompactJob:
        job = super().create(*args, **kwargs)
        job._new = True
        return job

    def to_dict(self, include_meta: bool = True, include_result: bool = True) -> dict:
        fields = super().to_dict(include_meta=include_meta, include_result=include_result)
        return {k: v for k, v in fields.items() if v != ""} if self._new else fields


@dataclass(frozen=True)
class InFlight:
    """A released URL: its depth, when it was (re)released or may run, its attempt number
    (retries and recoveries) and its turn (deferrals within an attempt)."""

    depth: int
    released_at: float
    attempt: int
    turn: int = 0

    @classmethod
    def parse(cls, raw: bytes | str) -> InFlight:
        depth, at, attempt, turn = (raw.decode() if isinstance(raw, bytes) else raw).split(" ")
        return cls(int(depth), float(at), int(attempt), int(turn))

    def encode(self) -> str:
        return f"{self.depth} {self.released_at!r} {self.attempt} {self.turn}"

    def job_id(self, crawl: str, url: str) -> str:
        """Deterministic per (URL, attempt, turn), so a stale job recognises itself."""
        digest = hashlib.sha1(url.encode("utf-8")).hexdigest()[:20]
        return f"rqcrawl-{crawl}-{digest}-{self.attempt}-{self.turn}"


class StaleCrawl(Exception):
    """The crawl of this name was purged and created again since this Frontier was made."""


class Frontier:
    """One crawl's frontier, as seen from a seeding client or a worker."""

    def __init__(self, redis: Redis, crawl: str, cfg: CrawlConfig):
        self.redis = redis
        self.crawl = crawl
        self.cfg = cfg
        self.bloom = BloomFilter(
            redis, keys.key(crawl, "bloom"), cfg.bloom_capacity, cfg.bloom_error_rate
        )
        self.counters = keys.key(crawl, "counters")
        self.inflight = keys.key(crawl, "inflight")
        self.held = keys.key(crawl, "held")
        self.items = keys.key(crawl, "items")
        self.later = keys.key(crawl, "later")
        self.leased = keys.key(crawl, "leased")
        self.reap_lock = keys.key(crawl, "reap")
        self.host_pages = keys.key(crawl, "host_pages")
        self.queue = Queue(keys.QUEUE_NAME, connection=redis, job_class=CompactJob)
        self._finish = redis.register_script(_LUA_FINISH)
        self._cas = redis.register_script(_LUA_CAS)
        self._defer = redis.register_script(_LUA_DEFER)
        self._claim = redis.register_script(_LUA_CLAIM)
        self._due = redis.register_script(_LUA_DUE)
        self._due_keys = [self.later, self.inflight]
        self.known: set[str] = set()  # see KNOWN_MAX
        self.identity: bytes | None = None  # see same_crawl

    def seed(self, urls: list[str]) -> int:
        """Admit `urls` at depth 0 (budgets apply, trap rules do not); returns how many were
        new to the crawl. Also releases whatever the window allows."""
        self.redis.hsetnx(self.counters, "started_at", repr(time.time()))
        admitted, _ = self._run("", "", None, [(None, u) for u in urls], 0)
        return admitted

    def claim(self, url: str, rq_job_id: str) -> tuple[InFlight | None, bool]:
        """The URL's inflight entry if this job is its live attempt and turn, else None (the
        URL already ended, or a newer job replaced this one), and whether the crawl is
        paused. The live job takes the URL's lease (see rqcrawl.leases). Releases
        due deferred URLs in the same round trip, so that busy workers keep deferrals on
        time. Raises StaleCrawl if the crawl is not this Frontier's."""
        try:
            raw, paused, due, identity, _ = self._claim_round_trip(url, rq_job_id)
        except NoScriptError:  # a restarted Redis forgot the scripts
            self.redis.script_load(_LUA_CLAIM)
            self.redis.script_load(_LUA_DUE)
            raw, paused, due, identity, _ = self._claim_round_trip(url, rq_job_id)
        self._enqueue_due(due)
        if not self.same_crawl(identity):
            raise StaleCrawl(self.crawl)
        entry = InFlight.parse(raw) if raw is not None else None
        if entry is not None and entry.job_id(self.crawl, url) != rq_job_id:
            entry = None
        return entry, bool(paused)

    def _claim_round_trip(self, url: str, rq_job_id: str) -> list:
        # EVALSHA rather than the Script object: in a pipeline, the latter first costs a
        # SCRIPT EXISTS round trip of its own.
        attempt, turn = rq_job_id.rsplit("-", 2)[1:]
        with self.redis.pipeline(transaction=False) as pipe:
            claim_args = [url, attempt, turn, repr(time.time() + LEASE)]
            pipe.evalsha(self._claim.sha, 2, self.inflight, self.leased, *claim_args)
            pipe.hexists(self.counters, "paused_at")
            due_args = [*self._due_keys, repr(time.time()), 500]
            pipe.evalsha(self._due.sha, len(self._due_keys), *due_args)
            pipe.hget(self.counters, "started_at")  # the crawl's identity, see same_crawl
            pipe.hset(self.counters, "last_claim_at", repr(time.time()))  # see stats.py
            return pipe.execute()

    def same_crawl(self, identity: bytes | None) -> bool:
        """Whether `identity` (the crawl's `started_at`, set once when it is first seeded)
        is this crawl's: a crawl purged and seeded again under the same name has another,
        and a worker must then drop what it kept of the old one (settings, known links).
        The first identity seen is this Frontier's."""
        if self.identity is None:
            self.identity = identity
        return identity is None or identity == self.identity

    def finish(
        self,
        url: str,
        counts: dict[str, int],
        record: dict,
        children: list[tuple[str | None, str]],
        child_depth: int,
    ) -> None:
        """End `url` for good: add `counts` to the counters, record it, and admit `children`
        ((verdict, url) pairs: a verdict refuses the URL, which is recorded once as skipped)."""
        increments = " ".join(f"{field} {n}" for field, n in counts.items() if n)
        _, reap_due = self._run(url, increments, record, children, child_depth)
        if reap_due:
            self.reap()

    def retry_later(self, url: str, entry: InFlight, delay: float) -> bool:
        """Park the next attempt of `url` until `delay` seconds from now, at that exact time
        (like a deferral, not on RQ's scheduler's whole seconds); False if the job was
        stale."""
        until = time.time() + delay
        return self._park(url, entry, InFlight(entry.depth, until, entry.attempt + 1), "retries")

    def defer(self, url: str, entry: InFlight, until: float) -> bool:
        """Park `url` until `until` without using a worker; False if the job was stale."""
        return self._park(url, entry, InFlight(entry.depth, until, entry.attempt, entry.turn + 1))

    def _park(self, url: str, entry: InFlight, nxt: InFlight, counter: str = "") -> bool:
        """Replace the job's `entry` by `nxt`, waiting in `later` until its time."""
        until = nxt.released_at
        args = [url, entry.encode(), nxt.encode(), repr(until), counter]
        if not self._defer(keys=[self.inflight, self.later, self.leased, self.counters], args=args):
            return False
        self._wake_at(until)
        return True

    def _wake_at(self, until: float) -> None:
        """Make sure a wake-up job runs in RQ's scheduler by then, for fleets of stock
        `rq worker --with-scheduler` (at most one per crawl per second)."""
        when = _whole_second_after(until - time.time())
        second = int(when.timestamp())
        if not self.redis.set(keys.key(self.crawl, "wake", str(second)), 1, nx=True, ex=600):
            return
        job = self.queue.create_job(
            WAKE_FUNC,
            args=(self.crawl,),
            job_id=f"rqcrawl-{self.crawl}-wake-{second}",
            description=f"{self.crawl} wake deferred URLs",
            result_ttl=0,
            failure_ttl=self.cfg.failure_ttl,
            status=JobStatus.SCHEDULED,
        )
        self.queue.schedule_job(job, when)

    def release_due(self) -> int:
        """Release the deferred URLs whose time has come as RQ jobs; returns how many."""
        due = self._due(keys=self._due_keys, args=[repr(time.time()), 500])
        return self._enqueue_due(due)

    def next_due(self) -> float | None:
        """When the earliest deferred URL may run, if any is waiting."""
        first = self.redis.zrange(self.later, 0, 0, withscores=True)
        return first[0][1] if first else None

    def _enqueue_due(self, due: list[bytes]) -> int:
        pairs = zip(due[::2], due[1::2], strict=True)
        entries = [(u.decode(), InFlight.parse(e)) for u, e in pairs]
        self._enqueue(entries)
        return len(entries)

    def _run(
        self,
        done: str,
        increments: str,
        record: dict | None,
        children: list[tuple[str | None, str]],
        child_depth: int,
    ) -> tuple[int, int]:
        """End `done` (unless '') and admit `children`: in batches of bounded Redis time, the
        URL ending with the last one (see the module docstring). Returns how many children
        were admitted and whether a recovery pass is due."""
        children = [c for c in children if c[1] not in self.known]
        parts = list(batches(children, self.bloom.hashes + CHILD_COST)) or [[]]
        admitted = 0
        for part in parts[:-1]:
            ended, n, _ = self._call(done, False, "", None, part, child_depth)
            if not ended:  # a stale job: the URL ended meanwhile, its links are not ours
                return admitted, 0
            admitted += n
        _, n, reap_due = self._call(done, True, increments, record, parts[-1], child_depth)
        return admitted + n, reap_due

    def _call(
        self,
        done: str,
        final: bool,
        increments: str,
        record: dict | None,
        children: Sequence[tuple[str | None, str]],
        child_depth: int,
    ) -> tuple[int, int, int]:
        """One run of the finish script; enqueues the URLs it released."""
        urls = [u for _, u in children]
        args = [
            done,
            int(final),
            increments,
            json.dumps(record, separators=(",", ":")) if record else "",
            child_depth,
            self.cfg.window,
            self.bloom.shard_bits,
            self.bloom.hashes,
            repr(time.time()),
            REAP_EVERY,
            self.cfg.max_pages,
            self.cfg.max_pages_per_host,
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            len(children),
            self.bloom.bits,
            *(arg for verdict, u in children for arg in (verdict or "-", host_of(u), u)),
            *self.bloom.flat_positions(urls),
        ]
        ended, admitted, reap_due, *released = self._finish(
            keys=[
                self.counters,
                self.inflight,
                self.held,
                self.items,
                self.reap_lock,
                self.host_pages,
                self.later,
            ]
            + self.bloom.keys
            + [self.leased],
            args=args,
        )
        if ended:  # else the script stopped before the Bloom filter (the URL had ended)
            if len(self.known) > KNOWN_MAX:
                self.known.clear()
            self.known.update(urls)
        self._enqueue([_split(raw) for raw in released])
        return ended, admitted, reap_due

    def _enqueue(self, entries: list[tuple[str, InFlight]]) -> None:
        """Create the RQ jobs of released URLs in one pipeline."""
        if not entries:
            return
        datas = [Queue.prepare_data(JOB_FUNC, **self._job_kwargs(u, e)) for u, e in entries]
        with self.redis.pipeline() as pipe:
            # A job id comes back when a paused URL is released again: its finished
            # predecessor's hash (and expiry) must not outlive into the new job.
            pipe.delete(*(Job.key_for(d.job_id) for d in datas))
            self.queue.enqueue_many(datas, pipeline=pipe)
            pipe.execute()

    def _job_kwargs(self, url: str, entry: InFlight) -> dict:
        """Job hygiene: tiny JSON-friendly args, a dashboard-readable description, a short
        result life (the crawl's records hold the outcome)."""
        short = url if len(url) <= 120 else url[:117] + "..."
        return {
            "args": (self.crawl, url, entry.depth),
            "job_id": entry.job_id(self.crawl, url),
            "description": f"{self.crawl} d{entry.depth} {short}",
            "result_ttl": RESULT_TTL,
            "failure_ttl": self.cfg.failure_ttl,
            "timeout": self.cfg.job_timeout,
        }

    def maybe_reap(self) -> int:
        """Run a recovery pass unless one ran for this crawl in the last REAP_EVERY seconds
        (the same lock the finish script takes for workers)."""
        if self.redis.set(self.reap_lock, 1, nx=True, ex=REAP_EVERY):
            return self.reap()
        return 0

    def reap(self) -> int:
        """Requeue URLs whose job was lost: its lease expired (worker killed), or it has no
        lease and no live RQ job LOST_AFTER seconds after its release (job failed, enqueue
        never happened). Uses RQ's own cleanup to turn abandoned jobs into failed ones
        first, and releases due deferred URLs, so that a URL still waiting in `later` is
        never taken for lost. Returns how many URLs were brought back or given up."""
        StartedJobRegistry(queue=self.queue).cleanup()
        self.release_due()
        now = time.time()
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.inflight)
            pipe.zrange(self.leased, 0, -1, withscores=True)
            inflight, leases = pipe.execute()
        leases = {url.decode(): expiry for url, expiry in leases}
        lost = {url for url, expiry in leases.items() if expiry < now}
        entries = {url.decode(): raw.decode() for url, raw in inflight.items()}
        for url in lost - entries.keys():  # left by a job whose URL ended without it
            self._cas_entry(url, "", "", now)  # only drops the expired lease
        unleased = [
            (url, raw) for url, raw in entries.items()
            if url not in leases and InFlight.parse(raw).released_at < now - LOST_AFTER
        ]  # fmt: skip
        lost = [(url, raw) for url, raw in entries.items() if url in lost]
        lost += self._jobless(unleased)
        for url, raw in lost:
            entry = InFlight.parse(raw)
            nxt = InFlight(entry.depth, time.time(), entry.attempt + 1)
            if entry.attempt >= self.cfg.retries:
                self._give_up(url, raw, entry, now)
            elif self._cas_entry(url, raw, nxt.encode(), now):
                self._enqueue([(url, nxt)])
        return len(lost)

    def _jobless(self, entries: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Those of the (url, entry) pairs that are not waiting in `later` and whose RQ job
        is neither pending nor running."""
        with self.redis.pipeline(transaction=False) as pipe:
            for url, raw in entries:
                pipe.hget(Job.key_for(InFlight.parse(raw).job_id(self.crawl, url)), "status")
                pipe.zscore(self.later, url)
            found = pipe.execute()
        return [
            pair
            for pair, status, waiting in zip(entries, found[::2], found[1::2], strict=True)
            if waiting is None and (status is None or status.decode() not in _LIVE)
        ]

    def _cas_entry(self, url: str, raw: str, new: str, now: float) -> bool:
        """Replace the entry `raw` of `url` by `new`, unless the URL ended, was requeued or
        had its lease renewed since `now` (then False)."""
        cas_keys = [self.inflight, self.counters, self.later, self.leased]
        return bool(self._cas(keys=cas_keys, args=[url, raw, new, repr(now)]))

    def _give_up(self, url: str, raw: str, entry: InFlight, now: float) -> None:
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(self.inflight, url)
            pipe.zscore(self.leased, url)
            current, lease = pipe.execute()
        if current == raw.encode() and (lease is None or lease < now):
            message = f"job lost by its worker {entry.attempt + 1} times"
            record = failure_record(url, entry.depth, "lost", message, entry.attempt + 1)
            record["reason"] = "lost"
            self._run(
                url, f"failed 1 failed:lost 1 failed|{host_of(url)} 1", record, [], entry.depth + 1
            )


def _whole_second_after(delay: float) -> datetime:
    """RQ's scheduler keeps whole seconds and may run a job up to 1 s early: round up, so
    that a Retry-After or a politeness delay is never cut short."""
    return datetime.fromtimestamp(math.ceil(time.time() + max(0.0, delay)), UTC)


def _split(raw: bytes) -> tuple[str, InFlight]:
    depth, url = raw.decode().split(" ", 1)
    return url, InFlight(int(depth), 0.0, 0)
