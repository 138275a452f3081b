"""A crawl's state in Redis, and every change of it: the one owner of a crawl's keys.

Admitted URLs wait in Redis lists, one per priority (`held` for priority 0, entries "depth url";
see scripts.HELD_LIB), and are released only while fewer than `window` are in flight, and only
at the current level: level d+1 starts once every URL of level d has ended. Within a level the
higher priority goes first (a list per priority keeps a held URL's memory that of a list entry,
and a release step O(batch + priorities)); a page's links are held at `inherited` of its
priority. So a URL is always first discovered along a shortest
path, its depth is exact whatever the number of workers, and RQ holds at most `window` jobs
of a crawl at a time. A released URL has an entry in `inflight` (InFlight) until it ends.

A broad crawl may opt out (`exact_depth = false`): held URLs are then released highest
priority first, each priority in the order found, whatever their depth, so no host's long
level holds up the others; a URL keeps the depth at which it was first found. A URL parked in
`later` then leaves room in the window (it has no RQ job), so one slow host's deferred URLs
cannot fill the window and starve the other hosts. Finishing stays exact either way: a crawl
is over when nothing is held and nothing is in flight.

One Lua step ends a URL (scripts.FINISH): it forgets it from `inflight`, records its outcome,
admits its children through the Bloom filter and releases the next URLs, all atomically. A
crashed worker therefore either did all of that or none of it. A page with more links than
one call should take (Redis runs nothing else meanwhile) has them admitted by earlier calls of
the same script that only admit, and ends with the last batch; a worker dying between two
calls leaves the URL in flight, so it is fetched again and the links already admitted are
no-ops of the Bloom filter's check-and-add.

A job that starts on a URL takes a short lease on it (`leased`), renewed while it works
(rqcrawl.frontier.leases); a URL whose lease ran out belongs to a dead worker. A URL whose host is
not ready, or whose retry is not due, waits in `later` (still in flight) until its time.

In a crawl over several Redis servers (rqcrawl.frontier.shards) this is one shard's state: the same
step appends a page's links to other shards' hosts to the shard's `outbox` (Outgoing), from
which a drain admits them on their shard, and the level is raised by rqcrawl.frontier.levels for the
whole crawl rather than by the finish step.

Key names and counter fields are spelled in rqcrawl.frontier.keys, the Lua in
rqcrawl.frontier.scripts; the RQ
side (jobs of released URLs, wake-ups, the recovery pass) is rqcrawl.frontier.dispatch's.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from redis import Redis
from redis.client import Pipeline
from redis.exceptions import NoScriptError

from rqcrawl.config import CrawlConfig
from rqcrawl.config import load as load_config
from rqcrawl.frontier import keys, scripts
from rqcrawl.frontier.bloom import BloomFilter, NativeBloomFilter, batches
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.frontier.leases import LEASE
from rqcrawl.frontier.redisurl import behind_sentinel
from rqcrawl.frontier.shards import connect, shard_map
from rqcrawl.ops.sinks import skip_template
from rqcrawl.parse.sitemaps import target
from rqcrawl.parse.urls import host_of

REAP_EVERY = 5  # seconds between two recovery passes of one crawl
REPLICA_WAIT_MS = 2000  # most a drain waits for a shard's replica (see replicated)
DUE_BATCH = 500  # deferred URLs released per call
# Seconds between two notes of a claim's time by one process: `status` warns of idle workers
# only after stats.IDLE_WARN (a minute), and a note per job was a Redis command per page.
CLAIM_NOTE_EVERY = 1.0
# URLs this process has passed through the Bloom filter (at most this many, about 5 MB): they
# are in it for good, so they are not sent again. Pages of a site repeat most of their links,
# and each link costs k bit operations in Redis.
KNOWN_MAX = 50_000
# Redis work per child besides its k bit operations (a budget check, RPUSH and HINCRBY, or
# XADD of its record), in the bit operations of bloom.MAX_POSITIONS: sizes admission batches.
CHILD_COST = 4
# Upper bounds (seconds) of the fetch-latency histogram, Prometheus style (+Inf implied).
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
RATE_BUCKET = 10  # seconds per `rate:N` counter of fetched pages (the recent rate)
RECENT = 60  # seconds of rate buckets kept (and over which `status` reports the recent rate)
# URLs a crawl admits before max_host_share applies: a small crawl is not cut by it.
SHARE_FLOOR = 100
# max_pages over shards: pages a shard takes from the crawl's first shard at a time (see
# scripts.GRANT_PAGES), so that budgets cost one round trip to it per block, not per page.
PAGE_BLOCK = 50
NEEDS_PAGES = 2  # what scripts.FINISH returns first when this shard must take pages
# Seconds a process counts on its last read of the URLs the other shards admitted, for
# max_host_share over shards (a round trip per other shard, not per page).
OTHERS_EVERY = 1.0
FORKED_TTL = 60  # seconds a job run by a forking worker keeps the `status` warning up
WAKER_TTL = 60  # seconds a lost waker job (its worker killed) keeps others from being queued
OUTBOX_LOCK = 30  # seconds a drain of a shard's outbox holds it (a dead drain's is taken over)

Children = Sequence[tuple[str | None, str]]  # (verdict, url): a verdict refuses the URL
# Turns from here on are the browser's: a URL handed to the render queue (Frontier.hand_off)
# keeps going there when it is deferred (its turns count on from it); a retry or a recovery
# starts again at turn 0, a plain job, which decides anew.
RENDER_TURN = 1_000_000


@dataclass(frozen=True)
class InFlight:
    """A released URL: its depth, when it was (re)released or may run, its attempt number
    (retries and recoveries), its turn (deferrals within an attempt) and its priority.
    `source` ("sitemap" or ""), read by a claim from `sitemapped`, is not part of the stored
    entry (nor of its comparisons)."""

    depth: int
    released_at: float
    attempt: int
    turn: int = 0
    priority: int = 0
    source: str = field(default="", compare=False)
    # the redirects that led to the URL (rqcrawl.fetch.hops), read by a claim from `via`
    via: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, raw: bytes | str) -> InFlight:
        """Entries written before priorities have four fields (priority 0)."""
        depth, at, attempt, turn, *priority = (
            raw.decode() if isinstance(raw, bytes) else raw
        ).split(" ")
        return cls(int(depth), float(at), int(attempt), int(turn), int(*priority or [0]))

    @property
    def rendered(self) -> bool:
        """Whether the URL's jobs are the render queue's (see RENDER_TURN)."""
        return self.turn >= RENDER_TURN

    @property
    def booked(self) -> bool:
        """Whether the URL waited for a politeness slot in this attempt (deferred)."""
        return self.turn % RENDER_TURN > 0

    def encode(self) -> str:
        return f"{self.depth} {self.released_at!r} {self.attempt} {self.turn} {self.priority}"

    def job_id(self, crawl: str, url: str) -> str:
        """Deterministic per (URL, attempt, turn), so a stale job recognises itself."""
        digest = hashlib.sha1(url.encode("utf-8")).hexdigest()[:20]
        return f"rqcrawl-{crawl}-{digest}-{self.attempt}-{self.turn}"


Released = list[tuple[str, InFlight]]  # URLs that became in flight: they need RQ jobs


@dataclass(frozen=True)
class Claim:
    """What a starting job learns in one round trip (CrawlState.claim)."""

    entry: InFlight | None  # None: the URL ended, or a newer job replaced this one
    paused: bool
    due: Released  # deferred URLs whose time has come, taken out of `later`
    stale: bool  # the crawl was purged and created again since this state was made


@dataclass(frozen=True)
class Snapshot:
    """Everything `status`, `list`, the progress bar, the metrics and the bench read of a
    crawl, in one round trip."""

    counters: dict[str, int | float]
    in_flight: list[str]  # URLs (at most `window`)
    held: int
    deferred: int
    hosts: dict[str, dict[str, int]]  # host -> admitted, fetched, failed, skipped
    pace: dict[str, tuple[float, ...]]  # host -> politeness (ready, booked, step, ...)
    forked: bool  # a forking worker ran a job of the crawl lately
    bloom: dict = field(default_factory=dict)

    def count(self, name: str) -> int | float:
        return self.counters.get(name, 0)

    def family(self, prefix: str) -> dict[str, int]:
        """The counters `prefix` + name (keys.SKIPPED, keys.LINKS...), by name."""
        return {k.removeprefix(prefix): v for k, v in self.counters.items() if k.startswith(prefix)}


@dataclass(frozen=True)
class Ended:
    """What one end (or seeding, or resume) did: URLs new to the crawl, the released URLs,
    whether a recovery pass is due, and in a crawl over several shards whether this shard
    has nothing in flight (the level may be over: rqcrawl.frontier.levels) and how many links went
    to its outbox for other shards."""

    admitted: int
    released: Released
    reap_due: bool = False
    level_done: bool = False
    sent: int = 0


@dataclass(frozen=True)
class Outgoing:
    """A link to a host of another shard, waiting in the outbox of the shard that found it:
    entries "shard priority depth verdict source via url" ('-': no verdict, no source, no
    via; an entry of an earlier version has no source field, or no via field)."""

    shard: int
    priority: int
    depth: int
    verdict: str | None
    url: str
    source: str = ""  # 'sitemap' for a sitemap's URL (its record says so)
    via: str = ""  # a redirect's target: the JSON list of the redirects that led to it

    @classmethod
    def parse(cls, raw: bytes) -> Outgoing:
        fields = raw.decode().split(" ")  # a canonical URL has no space, nor its JSON list
        if len(fields) == 5:
            fields.insert(4, "-")
        if len(fields) == 6:
            fields.insert(5, "-")
        shard, priority, depth, verdict, source, via, url = fields
        return cls(
            int(shard), int(priority), int(depth), None if verdict == "-" else verdict, url,
            "" if source == "-" else source, "" if via == "-" else via,
        )  # fmt: skip

    def encode(self) -> str:
        return (
            f"{self.shard} {self.priority} {self.depth} {self.verdict or '-'} "
            f"{self.source or '-'} {self.via or '-'} {self.url}"
        )


@dataclass(frozen=True)
class LevelView:
    """What the level coordinator reads of one shard (rqcrawl.frontier.levels): `version` changes
    with every admission and every URL given back, so two equal views mean nothing moved."""

    level: int
    in_flight: int
    held: int
    outbox: int
    version: tuple[int, int]
    halted: bool


@dataclass(frozen=True)
class UrlFacts:
    """Where one URL is in this shard's state (CrawlState.url_facts), for `rqcrawl inspect`:
    its in-flight entry, when its deferral ends (`later`), its lease's expiry, its held
    place (priority, depth), the reason of a retry, whether the Bloom filter has seen it,
    the level, and its site's robots.txt verdict and whether a job is fetching that now."""

    entry: InFlight | None
    later_at: float | None
    lease_until: float | None
    held: tuple[int, int] | None
    retry_reason: str | None
    seen: bool
    level: int
    paused: bool
    robots: dict | None
    robots_fetching: bool


@dataclass(frozen=True)
class HostFacts:
    """What `rqcrawl hosts` reads of this shard beyond a snapshot (CrawlState.host_facts):
    per host the URLs that wait in `later` and the live requests, the robots.txt verdicts
    by site and the sites whose robots.txt is being fetched."""

    deferred: dict[str, int]
    deferred_until: dict[str, float]  # the latest deferral's end per host
    running: dict[str, int]
    robots: dict[str, dict]
    robots_fetching: set[str]


class StaleCrawl(Exception):
    """The crawl of this name was purged and created again since this state was made."""


class CrawlState:
    """One crawl's state in Redis, as seen from a seeding client, an operator or a worker."""

    def __init__(self, redis: Redis, crawl: str, cfg: CrawlConfig):
        self.redis = redis
        self.crawl = crawl
        self.cfg = cfg
        self.keys = CrawlKeys(crawl)
        self.known: set[str] = set()  # see KNOWN_MAX
        # Not behind a Sentinel: a failover loses what the old primary acknowledged last, so
        # links sent then must be sent again when their page is fetched again.
        self.remembers = not behind_sentinel(redis)
        self.identity: bytes | None = None  # see same_crawl
        self.claim_noted_at = 0.0  # see claim
        self.shards = shard_map(cfg)  # None: the crawl lives in this Redis alone
        self.others_read: tuple[float, int] = (0.0, 0)  # see admitted_elsewhere

    @cached_property
    def index(self) -> int:
        """This Redis's index among the crawl's shards (see place)."""
        return shard_index(self.redis, self.crawl)

    def place(self, index: int) -> None:
        """Record that this Redis is shard `index` of the crawl (when the crawl starts)."""
        self.redis.hset(self.keys.counters, keys.SHARD, index)
        self.index = index

    @cached_property
    def bloom(self) -> BloomFilter:
        """The crawl's filter of admitted URLs (made on first use: operators need none)."""
        kind = NativeBloomFilter if self.cfg.bloom_filter == "native" else BloomFilter
        return kind(self.redis, self.keys.bloom, self.cfg.bloom_capacity, self.cfg.bloom_error_rate)

    # -- admission and ending -------------------------------------------------------------

    def seed(self, urls: list[str], priority: int = 0) -> tuple[int, Released]:
        """Admit `urls` at depth 0 and `priority` (budgets apply, trap rules do not) and
        release what the window allows; returns how many were new to the crawl, and the
        released URLs."""
        self.redis.hsetnx(self.keys.counters, keys.STARTED_AT, repr(time.time()))
        ended = self._end("", "", None, [(None, u) for u in urls], 0, priority)
        return ended.admitted, ended.released

    def admit_listed(self, children: Children, depth: int, priority: int, source: str) -> Ended:
        """Admit `children` at `depth` and `priority` like a page's links without ending any
        URL: a sitemap's URLs, noted as coming from `source`."""
        return self._end("", "", None, children, depth, priority, source)

    def hold_sitemaps(
        self, entries: Iterable[tuple[str, str]], priority: int, cap: int
    ) -> tuple[int, Released]:
        """Hold sitemap entries (site, entry) at depth 0 (scripts.HOLD_SITEMAPS: once each,
        at most `cap` per site) and release what the window allows; returns how many the
        cap refused, and the released URLs."""
        k = self.keys
        held, capped = scripts.HOLD_SITEMAPS(
            self.redis, tail_args=[part for pair in entries for part in pair],
            counters=k.counters, held=k.held, priorities=k.priorities, sitemaps=k.sitemaps,
            cap=cap, priority=priority,
        )  # fmt: skip
        return capped, self._end("", "", None, [], 0).released if held else []

    def take_sitemap_urls(self, site: str, n: int, cap: int) -> int:
        """How many of `n` more sitemap URLs `site` may still give (at most `cap` admitted
        in all): reserved now, the unadmitted given back by `return_sitemap_urls`."""
        total = self.redis.hincrby(self.keys.sitemaps, f"urls|{site}", n)
        taken = max(0, n - max(0, total - cap))
        if taken < n:
            self.return_sitemap_urls(site, n - taken)
        return taken

    def return_sitemap_urls(self, site: str, n: int) -> None:
        """Give back `n` URLs of `site`'s sitemap cap: taken but not admitted (known ones,
        refused ones, or past the cap), so that a sitemap read again costs nothing."""
        if n:
            self.redis.hincrby(self.keys.sitemaps, f"urls|{site}", -n)

    def finish(
        self,
        url: str,
        counts: dict[str, int],
        record: dict,
        children: Children,
        child_depth: int,
        child_priority: int = 0,
        via: str = "",
    ) -> Ended:
        """End `url` for good: add `counts` to the counters, record it, and admit `children`
        at `child_priority` (a refused one is recorded once as skipped). `via`: the children
        are a redirect's target, led to by that JSON list of redirects (rqcrawl.fetch.hops)."""
        increments = " ".join(f"{name} {n}" for name, n in counts.items() if n)
        return self._end(url, increments, record, children, child_depth, child_priority, via=via)

    def inherited(self, priority: int) -> int:
        """The priority of a page's links: `priority_share` of the page's, rounded toward 0
        (so a seed's priority fades with the clicks from it unless the share is 1)."""
        return int(priority * self.cfg.priority_share)

    def _end(
        self,
        done: str,
        increments: str,
        record: dict | None,
        children: Children,
        depth: int,
        priority: int = 0,
        source: str = "",
        via: str = "",
    ) -> Ended:
        """End `done` (unless '') and admit `children`, in batches of bounded Redis time, the
        URL ending with the last one (see the module docstring). Links to other shards'
        hosts go to the outbox with the last one."""
        children = [c for c in children if c[1] not in self.known]
        children, foreign = self._split(children, depth, priority, source, via)
        parts = list(batches(children, self.bloom.hashes + CHILD_COST)) or [[]]
        admitted, released = 0, []
        for part in parts[:-1]:
            ended = self._finish_call(done, False, "", None, part, depth, priority, [], source, via)
            if ended is None:  # a stale job: the URL ended meanwhile, its links are not ours
                return Ended(admitted, released)
            admitted += ended.admitted
            released += ended.released
        last = self._finish_call(
            done, True, increments, record, parts[-1], depth, priority, foreign, source, via
        )
        if last is None:
            return Ended(admitted, released)
        return Ended(
            admitted + last.admitted, released + last.released, last.reap_due, last.level_done,
            last.sent,
        )  # fmt: skip

    def _split(
        self, children: Children, depth: int, priority: int, source: str, via: str = ""
    ) -> tuple[Children, list[Outgoing]]:
        """The children of this shard's hosts, and the others for the outbox."""
        if self.shards is None:
            return children, []
        local, foreign = [], []
        for verdict, url in children:
            shard = self.shards.index_of(host_of(url))
            if shard == self.index:
                local.append((verdict, url))
            else:
                foreign.append(Outgoing(shard, priority, depth, verdict, url, source, via))
        return local, foreign

    def _finish_call(
        self,
        done: str,
        final: bool,
        increments: str,
        record: dict | None,
        children: Children,
        child_depth: int,
        child_priority: int,
        foreign: list[Outgoing],
        source: str = "",
        via: str = "",
    ) -> Ended | None:
        """One run of scripts.FINISH; None if `done` had already ended (a stale job)."""
        urls = [u for _, u in children]
        while True:
            ended, admitted, reap_due, level_done, *released = self._finish_script(
                done, final, increments, record, children, child_depth, child_priority,
                foreign, source, urls, via,
            )  # fmt: skip
            if ended != NEEDS_PAGES:
                break
            self.take_pages(admitted)  # (then: how many it needs)
        if not ended:  # the script stopped before the Bloom filter (the URL had ended)
            return None
        if self.remembers:
            if len(self.known) > KNOWN_MAX:
                self.known.clear()
            self.known.update(urls)
            self.known.update(o.url for o in foreign)
        released = [_held_entry(raw) for raw in released]
        return Ended(admitted, released, bool(reap_due), bool(level_done), len(foreign))

    def _finish_script(
        self,
        done: str,
        final: bool,
        increments: str,
        record: dict | None,
        children: Children,
        child_depth: int,
        child_priority: int,
        foreign: list[Outgoing],
        source: str,
        urls: list[str],
        via: str,
    ) -> list:
        """One run of scripts.FINISH, its reply as is."""
        k = self.keys
        return scripts.FINISH(
            self.redis,
            tail_keys=self.bloom.keys,
            tail_args=[
                *(arg for verdict, u in children for arg in (verdict or "-", host_of(u), u)),
                *self.bloom.flat_positions(urls),
            ],
            counters=k.counters, inflight=k.inflight, held=k.held, items=k.items,
            reap_lock=k.reap_lock, host_pages=k.host_pages, later=k.later, leased=k.leased,
            revisiting=k.revisiting, priorities=k.priorities, outbox=k.outbox,
            sitemapped=k.sitemapped, via=k.via, done=done, final=int(final), source=source,
            child_via=via,
            increments=increments,
            record=json.dumps(record, separators=(",", ":")) if record else "",
            child_depth=child_depth,
            child_priority=child_priority,
            window=self.cfg.window,
            shard_bits=self.bloom.shard_bits,
            k=self.bloom.hashes,
            now=repr(time.time()),
            reap_every=REAP_EVERY,
            max_pages=self.cfg.max_pages,
            max_host_pages=self.cfg.max_pages_per_host,
            max_host_share=repr(self.cfg.max_host_share),
            share_floor=SHARE_FLOOR,
            skip_record=skip_template(child_depth, source),
            skip_prefix=keys.SKIPPED,
            n=len(children),
            size=self.bloom.size,
            sharded=int(self.shards is not None),
            foreign=json.dumps([o.encode() for o in foreign]) if foreign else "",
            exact=int(self.cfg.exact_depth),
            others=self.admitted_elsewhere(),
        )  # fmt: skip

    def take_pages(self, need: int) -> None:
        """Take at least `need` pages of max_pages from the crawl's first shard (a block
        when it has enough left) for this shard to admit; when it has fewer, note that it
        has none left, so that this shard admits what it holds and then refuses. Not
        atomic across the two servers: a process killed in between loses its block (the
        crawl then admits fewer, never more, than max_pages)."""
        home = self.redis if self.index == 0 else connect(self.cfg.shards[0])
        given = scripts.GRANT_PAGES(
            home, counters=self.keys.counters, need=need, block=PAGE_BLOCK,
            shards=len(self.cfg.shards), max_pages=self.cfg.max_pages,
        )  # fmt: skip
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hincrby(self.keys.counters, keys.PAGES_ALLOWED, given)
            if given < need:
                pipe.hset(self.keys.counters, keys.PAGES_OUT, 1)
            pipe.execute()

    def admitted_elsewhere(self) -> int:
        """The URLs the other shards of the crawl admitted, as read at most OTHERS_EVERY
        ago (0 unless max_host_share applies over shards): a host's share is of the whole
        crawl's admitted URLs."""
        if self.shards is None or not self.cfg.max_host_share:
            return 0
        read_at, others = self.others_read
        if time.monotonic() - read_at < OTHERS_EVERY:
            return others
        counts = [
            connect(url).hget(self.keys.counters, keys.ADMITTED)
            for i, url in enumerate(self.cfg.shards)
            if i != self.index
        ]
        others = sum(int(n or 0) for n in counts)
        self.others_read = (time.monotonic(), others)
        return others

    def readmit(self, due: Iterable[tuple[str, int, int]]) -> tuple[int, Released]:
        """Put URLs due for a revisit (url, depth, priority) back in the held lists, bypassing
        the Bloom filter, except those already waiting for their revisit or in flight, and
        release what the window allows; returns how many were readmitted, and the released
        URLs. They join the end of their priority's list: the level barrier applies to them as
        to new URLs."""
        k = self.keys
        added = scripts.READMIT(
            self.redis,
            tail_args=[f"{priority} {depth} {url}" for url, depth, priority in due],
            counters=k.counters, inflight=k.inflight, held=k.held, revisiting=k.revisiting,
            priorities=k.priorities,
        )  # fmt: skip
        return added, self._end("", "", None, [], 0).released if added else []

    def cancelled(self) -> bool:
        return bool(self.redis.hexists(self.keys.counters, keys.CANCELLED_AT))

    def pump_due(self, every: float) -> bool:
        """Take the pump's turn unless one ran in the last `every` seconds (any process)."""
        return bool(self.redis.set(self.keys.pump_lock, 1, nx=True, px=int(every * 1000)))

    # -- a job's life ---------------------------------------------------------------------

    def claim(self, url: str, job_id: str, reply: list | None = None) -> Claim:
        """The URL's entry if the job `job_id` is its live attempt and turn (the job then
        takes the URL's lease), whether the crawl is paused, and the deferred URLs that are
        due (released in the same call, so that busy workers keep deferrals on time).
        `reply`: the claim's reply already got (the recommended worker sends claim_call
        with the job's start, in its round trip)."""
        if reply is None:
            reply = scripts.CLAIM(self.redis, **self.claim_call(url, job_id))
        raw, paused, identity, due, sitemapped, via = reply
        entry = InFlight.parse(raw) if raw is not None else None
        if entry is not None and entry.job_id(self.crawl, url) != job_id:
            entry = None
        if entry is not None and sitemapped:
            entry = replace(entry, source="sitemap")
        if entry is not None and via:
            entry = replace(entry, via=tuple(json.loads(via)))
        return Claim(entry, bool(paused), _pairs(due), not self.same_crawl(identity))

    def claim_call(self, url: str, job_id: str) -> dict:
        """The keys and arguments by name of the claim of `url` by the job `job_id`
        (scripts.CLAIM). The claim's time is noted for `status` at most every
        CLAIM_NOTE_EVERY per process."""
        attempt, turn = job_id.rsplit("-", 2)[1:]
        k, now = self.keys, time.time()
        note = now - self.claim_noted_at >= CLAIM_NOTE_EVERY
        if note:
            self.claim_noted_at = now
        return dict(
            inflight=k.inflight, leased=k.leased, counters=k.counters, later=k.later,
            sitemapped=k.sitemapped, via=k.via, url=url, attempt=attempt, turn=turn,
            expiry=repr(now + LEASE), now=repr(now), limit=DUE_BATCH, note=int(note),
        )  # fmt: skip

    def same_crawl(self, identity: bytes | None) -> bool:
        """Whether `identity` (the crawl's `started_at`, set once when it is first seeded)
        is this crawl's: a crawl purged and seeded again under the same name has another,
        and a worker must then drop what it kept of the old one (settings, known links).
        The first identity seen is this state's."""
        if self.identity is None:
            self.identity = identity
        return identity is None or identity == self.identity

    def park(self, url: str, entry: InFlight, nxt: InFlight, counter: str = "") -> bool:
        """Replace the job's `entry` by `nxt`, waiting in `later` until nxt.released_at
        (a deferral, or with counter keys.RETRIES a retry); False if the job was stale."""
        k = self.keys
        return bool(
            scripts.PARK(
                self.redis, inflight=k.inflight, later=k.later, leased=k.leased,
                counters=k.counters, url=url, expected=entry.encode(), entry=nxt.encode(),
                until_at=repr(nxt.released_at), counter=counter,
            )
        )  # fmt: skip

    def hand_off(self, url: str, entry: InFlight, nxt: InFlight) -> bool:
        """Replace the job's `entry` by `nxt`, the entry of the job it hands the URL to (see
        Frontier.hand_off); False if the job was stale."""
        k = self.keys
        return bool(
            scripts.HAND_OFF(
                self.redis, inflight=k.inflight, leased=k.leased, url=url,
                expected=entry.encode(), entry=nxt.encode(),
            )
        )  # fmt: skip

    def take_due(self) -> Released:
        """Take the deferred URLs whose time has come out of `later`."""
        k = self.keys
        due = scripts.DUE(
            self.redis, later=k.later, inflight=k.inflight, now=repr(time.time()), limit=DUE_BATCH
        )
        return _pairs(due)

    def next_due(self) -> float | None:
        """When the earliest deferred URL may run, if any is waiting."""
        first = self.redis.zrange(self.keys.later, 0, 0, withscores=True)
        return first[0][1] if first else None

    def claim_waker(self) -> bool:
        """True for the one caller that is to queue the crawl's waker job (see
        Frontier.ensure_waker): at most one is queued or running at a time."""
        return bool(self.redis.set(self.keys.waker, 1, nx=True, ex=WAKER_TTL))

    def drop_waker(self) -> None:
        """The waker job is done: the next deferral may queue another."""
        self.redis.delete(self.keys.waker)

    def put_back(self, url: str, entry: InFlight) -> bool:
        """For a job whose claim saw the crawl paused: True if the crawl is halted, `url`
        then being given back to its held list unfetched (or dropped if cancelled)."""
        k = self.keys
        return bool(
            scripts.PUT_BACK(
                self.redis, counters=k.counters, inflight=k.inflight, held=k.held,
                priorities=k.priorities, url=url, expected=entry.encode(), depth=entry.depth,
                priority=entry.priority,
            )
        )  # fmt: skip

    def note_forked(self, pipe: Pipeline) -> None:
        """In the job's own pipeline: a forking worker ran a job of the crawl (see stats)."""
        pipe.set(self.keys.forked, 1, ex=FORKED_TTL)

    # -- operators ------------------------------------------------------------------------

    def register(self) -> None:
        """List the crawl in this Redis (the last step of starting it: a listed crawl is a
        whole one)."""
        self.redis.sadd(keys.CRAWLS, self.crawl)

    def pause(self) -> bool:
        """Halt releases; False if already halted."""
        return bool(self.redis.hsetnx(self.keys.counters, keys.PAUSED_AT, repr(time.time())))

    def marks(self) -> set[str]:
        """Which of the operators' marks the crawl has here: keys.PAUSED_AT, CANCELLED_AT,
        PURGING_AT (a sharded crawl has them per shard: control.py completes a step that a
        crash left done on some shards only)."""
        names = (keys.PAUSED_AT, keys.CANCELLED_AT, keys.PURGING_AT)
        found = self.redis.hmget(self.keys.counters, names)
        return {name for name, value in zip(names, found, strict=True) if value is not None}

    def mark_purging(self) -> None:
        """Mark the crawl as being purged, before anything of it is deleted."""
        self.redis.hset(self.keys.counters, keys.PURGING_AT, repr(time.time()))

    def resume(self) -> Released:
        """Clear the halt and release the held URLs of the current level."""
        self.redis.hdel(self.keys.counters, keys.PAUSED_AT)
        return self._end("", "", None, [], 0).released

    def cancel(self) -> tuple[int, Released] | None:
        """Halt for good and drop the held, in-flight and deferred URLs in one step; None if
        already cancelled, else how many were held and the dropped in-flight URLs."""
        k = self.keys
        out = scripts.CANCEL(
            self.redis, counters=k.counters, inflight=k.inflight, held=k.held, later=k.later,
            revisiting=k.revisiting, priorities=k.priorities, sitemapped=k.sitemapped,
            via=k.via, now=repr(time.time()),
        )  # fmt: skip
        if out is None:
            return None
        return out[0], _pairs(out[1:])

    def delete(self) -> int:
        """Delete every key of the crawl (a handful: the Bloom filter is split into at most
        512 MB shards) and unlist it; returns how many keys were deleted."""
        match = glob_escape(self.keys.prefix) + "*"
        names = list(self.redis.scan_iter(match=match, count=1000))
        deleted = self.redis.unlink(*names) if names else 0
        self.redis.srem(keys.CRAWLS, self.crawl)
        return deleted

    # -- several shards (rqcrawl.frontier.levels) -------------------------------------------------

    def admit(self, links: list[Outgoing]) -> Ended:
        """Admit links that another shard found (its outbox) as if found here: the Bloom
        filter makes a second admission of the same link a no-op."""
        ended = Ended(0, [])
        by_origin: dict[tuple[int, int, str, str], Children] = {}
        for o in links:
            origin = (o.depth, o.priority, o.source, o.via)
            by_origin.setdefault(origin, []).append((o.verdict, o.url))
        for (depth, priority, source, via), children in by_origin.items():
            step = self._end("", "", None, children, depth, priority, source, via)
            ended = Ended(ended.admitted + step.admitted, ended.released + step.released)
        return ended

    def read_outbox(self, token: str, limit: int) -> list[Outgoing] | None:
        """Take the outbox's drain lock as `token` and read its first `limit` links; None
        when another drain holds the lock."""
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(self.keys.outbox_lock, token, nx=True, ex=OUTBOX_LOCK)
            pipe.lrange(self.keys.outbox, 0, limit - 1)
            locked, raw = pipe.execute()
        return [Outgoing.parse(r) for r in raw] if locked else None

    def trim_outbox(self, token: str, n: int) -> bool:
        """Drop the `n` links read under `token` (all admitted) and free the lock, if the
        lock is still `token`'s; the lock stays otherwise (see scripts.TRIM_OUTBOX)."""
        k = self.keys
        return bool(
            scripts.TRIM_OUTBOX(self.redis, outbox=k.outbox, lock=k.outbox_lock, token=token, n=n)
        )

    def replicated(self, timeout_ms: int = REPLICA_WAIT_MS) -> bool:
        """Whether what was written to this shard so far reached a replica, when it has any
        or is behind a Sentinel (an old primary cut off by a failover has none left, and
        what it acknowledges is lost): a drain trims its outbox only then, or a failover
        in between could lose links that no other shard keeps. WAIT counts the writes of
        its own connection, so a write goes with it (the replication stream is in order:
        the earlier ones precede it)."""
        role = self.redis.execute_command("ROLE")
        replicas = role[2] if role[0] in (b"master", "master") else []
        if not replicas and not behind_sentinel(self.redis):
            return True
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(self.keys.synced, 1, px=timeout_ms + 1000)
            pipe.wait(1, timeout_ms)
            return pipe.execute()[1] >= 1

    def level_view(self) -> LevelView:
        """This shard as the level coordinator sees it, in one round trip."""
        k = self.keys

        def queue(pipe: Pipeline) -> None:
            fields = (keys.LEVEL, keys.ADMITTED, keys.PUT_BACK, keys.PAUSED_AT)
            pipe.hmget(k.counters, *fields)
            pipe.hlen(k.inflight)
            pipe.llen(k.outbox)
            scripts.HELD.queue(pipe, held=k.held, priorities=k.priorities)

        (level, admitted, put_back, paused), flying, outbox, held = self._with_held(queue)
        version = (int(admitted or 0), int(put_back or 0))
        return LevelView(int(level or 0), flying, held, outbox, version, paused is not None)

    def advance(self, level: int) -> Released:
        """Raise this shard's level past `level` if it is still there with nothing in flight
        (scripts.ADVANCE), and release the next level."""
        k = self.keys
        out = scripts.ADVANCE(
            self.redis, counters=k.counters, inflight=k.inflight, held=k.held,
            priorities=k.priorities, level=level, window=self.cfg.window, now=repr(time.time()),
        )  # fmt: skip
        return [_held_entry(raw) for raw in out]

    # -- recovery -------------------------------------------------------------------------

    def recovery_candidates(self, lost_after: float) -> tuple[list[str], Released, Released]:
        """For the recovery pass: URLs whose lease expired though they ended (the lease is
        only to be dropped), in-flight URLs whose lease expired (their worker died), and
        in-flight URLs with no lease, not waiting in `later`, released over `lost_after`
        seconds ago (their job may have failed or never been enqueued)."""
        k = self.keys
        now = time.time()
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(k.inflight)
            pipe.zrange(k.leased, 0, -1, withscores=True)
            pipe.zrange(k.later, 0, -1)
            inflight, leases, waiting = pipe.execute()
        leases = {url.decode(): expiry for url, expiry in leases}
        waiting = {url.decode() for url in waiting}
        entries = {url.decode(): InFlight.parse(raw) for url, raw in inflight.items()}
        expired = {url for url, expiry in leases.items() if expiry < now}
        orphans = sorted(expired - entries.keys())
        lost = [(url, e) for url, e in entries.items() if url in expired]
        unleased = [
            (url, e) for url, e in entries.items()
            if url not in leases and url not in waiting and e.released_at < now - lost_after
        ]  # fmt: skip
        return orphans, lost, unleased

    def requeue(self, url: str, entry: InFlight | None, nxt: InFlight | None) -> bool:
        """Replace `url`'s in-flight `entry` by `nxt` unless the URL ended, was requeued or
        had its lease renewed meanwhile (then False); an expired lease is dropped either way
        (None, None: only that)."""
        k = self.keys
        return bool(
            scripts.REQUEUE(
                self.redis, inflight=k.inflight, counters=k.counters, later=k.later,
                leased=k.leased, url=url, expected=entry.encode() if entry else "",
                entry=nxt.encode() if nxt else "", now=repr(time.time()),
            )
        )  # fmt: skip

    def still_lost(self, url: str, entry: InFlight) -> bool:
        """Whether `url` is still in flight as `entry` with no live lease (before giving it
        up: nobody took it meanwhile)."""
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(self.keys.inflight, url)
            pipe.zscore(self.keys.leased, url)
            current, lease = pipe.execute()
        return current == entry.encode().encode() and (lease is None or lease < time.time())

    def reap_due(self) -> bool:
        """Take the recovery pass's turn unless one ran in the last REAP_EVERY seconds (the
        lock the finish step also takes for workers)."""
        return bool(self.redis.set(self.keys.reap_lock, 1, nx=True, ex=REAP_EVERY))

    # -- reading --------------------------------------------------------------------------

    def unfinished(self) -> int:
        """URLs in flight or held: 0 exactly when the crawl has nothing left (cheaper than a
        snapshot, for polling)."""

        def queue(pipe: Pipeline) -> None:
            pipe.hlen(self.keys.inflight)
            scripts.HELD.queue(pipe, held=self.keys.held, priorities=self.keys.priorities)

        return sum(self._with_held(queue))

    def snapshot(self) -> Snapshot:
        """The crawl's counters and queues in one round trip (rate buckets older than RECENT
        are pruned here, so the counters hash stays small however long the crawl runs)."""
        k = self.keys

        def queue(pipe: Pipeline) -> None:
            pipe.hgetall(k.counters)
            pipe.hkeys(k.inflight)  # at most `window` URLs
            scripts.HELD.queue(pipe, held=k.held, priorities=k.priorities)
            pipe.zcard(k.later)
            pipe.hgetall(k.host_pages)
            pipe.hgetall(k.hosts)
            pipe.exists(k.forked)

        raw, flying, held, deferred, host_pages, pace, forked = self._with_held(queue)
        counters = {f.decode(): float(v) if b"." in v else int(v) for f, v in raw.items()}
        self._prune_rates(counters)
        return Snapshot(
            counters=counters,
            in_flight=[url.decode() for url in flying],
            held=held,
            deferred=deferred,
            hosts=_per_host(host_pages),
            pace={
                # "ready booked step fetch backoff base" (scripts._HOST_STATE)
                host.decode(): tuple(float(x) for x in v.split())
                for host, v in pace.items()
            },
            forked=bool(forked),
            bloom=self.bloom.stats(),
        )

    def _with_held(self, queue: Callable[[Pipeline], None]) -> list:
        """Run the pipeline that `queue` fills, which counts the held URLs with scripts.HELD
        (loaded first if a restarted Redis forgot it)."""

        def run() -> list:
            with self.redis.pipeline(transaction=False) as pipe:
                queue(pipe)
                return pipe.execute()

        try:
            return run()
        except NoScriptError:
            scripts.load(self.redis, scripts.HELD)
            return run()

    def _prune_rates(self, counters: dict) -> None:
        first = int(time.time()) // RATE_BUCKET - RECENT // RATE_BUCKET
        old = [f for f in counters if f.startswith(keys.RATE) and int(f[len(keys.RATE) :]) < first]
        if old:
            self.redis.hdel(self.keys.counters, *old)
            for f in old:
                del counters[f]

    # -- inspecting (rqcrawl inspect / hosts) ---------------------------------------------

    def note_retry(self, url: str, why: str, delay: float) -> None:
        """Keep why `url` waits `delay` seconds for its next attempt, until a little after."""
        self.redis.set(self.keys.retry_reason(url), why, ex=max(1, round(delay) + RECENT))

    def url_facts(self, url: str, site: str) -> UrlFacts:
        """Where `url` is in this shard, in two round trips (one to find the priorities):
        a held URL is found by LPOS of its possible entries "depth url" in each priority's
        list, from the level to max_depth (an operator's look-up, O(held) in Redis)."""
        k = self.keys
        priorities = [int(p) for p in self.redis.zrange(k.priorities, 0, -1)]
        level = int(self.redis.hget(k.counters, keys.LEVEL) or 0)
        depths = range(0 if not self.cfg.exact_depth else level, self.cfg.max_depth + 1)
        lists = [(p, k.held if p == 0 else f"{k.held}:{p}") for p in priorities]
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(k.inflight, url)
            pipe.zscore(k.later, url)
            pipe.zscore(k.leased, url)
            pipe.get(k.retry_reason(url))
            pipe.hexists(k.counters, keys.PAUSED_AT)
            pipe.hget(k.robots, site)
            pipe.exists(k.robots_claim(site))
            for _, name in lists:
                for depth in depths:
                    pipe.lpos(name, f"{depth} {url}")
            raw, later, lease, why, paused, robots, fetching, *found = pipe.execute()
        places = [(p, d) for p, _ in lists for d in depths]
        held = next((at for at, pos in zip(places, found, strict=True) if pos is not None), None)
        return UrlFacts(
            entry=InFlight.parse(raw) if raw is not None else None,
            later_at=later, lease_until=lease, held=held,
            retry_reason=why.decode() if why else None,
            seen=self.bloom.contains_many([url])[0], level=level, paused=bool(paused),
            robots=json.loads(robots) if robots else None, robots_fetching=bool(fetching),
        )  # fmt: skip

    def ended_record(self, url: str, limit: int) -> dict | None:
        """The last record of `url` among the newest `limit` of the records stream (a URL
        that ended has one; the stream is read newest first, 1000 at a time)."""
        needles = (url.encode(), url.replace("/", "\\/").encode())  # cjson escapes '/'
        last, read = "+", 0
        while read < limit:
            batch = self.redis.xrevrange(self.keys.items, max=last, count=1000)
            if last != "+":
                batch = batch[1:]  # `max` is inclusive
            if not batch:
                return None
            for _, fields in batch:
                raw = fields[b"r"]
                if any(n in raw for n in needles):
                    found = json.loads(raw)
                    if found.get("url") == url:
                        return found
            read += len(batch)
            last = batch[-1][0]
        return None

    def recent_ends(self, since: float, limit: int) -> list[tuple[float, str]]:
        """(time, url) of the URLs that ended since `since`, among the newest `limit` records
        (the records stream's entry ids are their times in ms), newest first."""
        entries = self.redis.xrevrange(self.keys.items, min=f"{int(since * 1000)}", count=limit)
        records = [(entry_id, json.loads(fields[b"r"])) for entry_id, fields in entries]
        return [
            (int(entry_id.split(b"-")[0]) / 1000, r["url"])
            for entry_id, r in records
            if r.get("attempts")  # not a link refused at admission (never in flight)
        ]

    def host_facts(self, hosts: list[str]) -> HostFacts:
        """Deferred URLs per host, and for `hosts` their live requests, the robots.txt
        verdicts of their sites (http and https) and which of those are being fetched, in
        one round trip (`later` holds in-flight URLs only: about the window at most)."""
        k, now = self.keys, time.time()
        sites = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.zrange(k.later, 0, -1, withscores=True)
            for host in hosts:
                pipe.zcount(k.host_leases(host), now, "+inf")
            for site in sites:
                pipe.exists(k.robots_claim(site))
            if sites:
                pipe.hmget(k.robots, sites)
            later, *rest = pipe.execute()
        running, claims = rest[: len(hosts)], rest[len(hosts) : len(hosts) + len(sites)]
        verdicts = rest[-1] if sites else []
        deferred, until = Counter(), {}
        for url, at in later:  # by score: the last one of a host is its latest
            host = host_of(target(url.decode()))
            deferred[host] += 1
            until[host] = at
        return HostFacts(
            deferred=dict(deferred),
            deferred_until=until,
            running=dict(zip(hosts, running, strict=True)),
            robots={site: json.loads(v) for site, v in zip(sites, verdicts, strict=True) if v},
            robots_fetching={site for site, busy in zip(sites, claims, strict=True) if busy},
        )

    def robots_verdicts(self, sites: list[str]) -> dict[str, dict]:
        """The robots.txt verdicts (rqcrawl.fetch.robots.Robots as JSON) of those of `sites` that
        have one here."""
        if not sites:
            return {}
        found = self.redis.hmget(self.keys.robots, sites)
        return {site: json.loads(v) for site, v in zip(sites, found, strict=True) if v}

    def overdue(self, before: float) -> int:
        """Deferred URLs whose time came before `before` and that nobody released yet."""
        return self.redis.zcount(self.keys.later, "-inf", before)

    def running_requests(self, hosts: list[str]) -> list[int]:
        """Requests in progress per host (live politeness leases)."""
        now = time.time()
        with self.redis.pipeline(transaction=False) as pipe:
            for host in hosts:
                pipe.zcount(self.keys.host_leases(host), now, "+inf")
            return pipe.execute()


def outcome_counts(
    host: str, counts: dict[str, int], record: dict, fetch_s: float | None, attempts: int = 1
) -> dict[str, int]:
    """The counters an ended URL adds beside its outcome's, in the same atomic finish step
    (no round trip of their own): its host's fetched/failed/skipped, the failure's reason,
    the recent-rate bucket and bytes of a fetched page, and the latency histogram and the
    host's timed requests when a request was made (`attempts` of them: a retried timeout
    held the host as long each time)."""
    if counts.get(keys.FETCHED):
        kind = keys.FETCHED
    else:
        kind = keys.FAILED if counts.get(keys.FAILED) else keys.HOST_SKIPPED
    out = {keys.per_host(kind, host): 1}
    if kind == keys.FAILED:
        out[keys.failed_by(record.get("reason") or "other")] = 1
    if kind == keys.FETCHED:
        out[f"{keys.RATE}{int(time.time()) // RATE_BUCKET}"] = 1
        out[keys.BYTES] = record.get("bytes") or 0
        out.update(_link_counts(record))
    if fetch_s is not None:
        bound = next((b for b in LATENCY_BUCKETS if fetch_s <= b), "inf")
        out[f"{keys.LATENCY_LE}{bound}"] = 1
        out[keys.LATENCY_MS] = round(fetch_s * 1000)
        out[keys.per_host(keys.HOST_TIMED, host)] = 1
        out[keys.per_host(keys.HOST_REQUESTS, host)] = attempts
        out[keys.per_host(keys.HOST_BUSY_MS, host)] = round(fetch_s * 1000) * attempts
    return out


def _link_counts(record: dict) -> dict[str, int]:
    """Links found on a fetched page, and on a seed's: a crawl that ends having found none
    is told apart from a finished site (stats.thin_crawl_warnings)."""
    found = record.get("outlinks") or 0
    if record["depth"] == 0 and not record.get("source"):
        return {keys.OUTLINKS: found, keys.SEED_PAGES: 1, keys.SEED_OUTLINKS: found}
    return {keys.OUTLINKS: found}


def shard_index(redis: Redis, crawl: str) -> int:
    """This Redis's index among the shards of `crawl` (0 for a crawl on one Redis)."""
    return int(redis.hget(CrawlKeys(crawl).counters, keys.SHARD) or 0)


def all_shards(redis: Redis, crawl: str) -> list[Redis]:
    """Every shard of `crawl` in shard order, from a connection to any one of them (which
    stands for itself in the list): `[redis]` for a crawl on one Redis."""
    cfg = load_config(redis, crawl, fresh=True)
    if cfg is None or not cfg.shards:
        return [redis]
    own = shard_index(redis, crawl)
    return [redis if i == own else connect(url) for i, url in enumerate(cfg.shards)]


def crawl_names(redis: Redis) -> list[str]:
    """The crawls listed in this Redis, sorted."""
    return sorted(n.decode(errors="backslashreplace") for n in redis.smembers(keys.CRAWLS))


def is_known(redis: Redis, crawl: str) -> bool:
    """Whether the crawl is listed or has settings (a half-registered crawl has only these)."""
    return bool(redis.sismember(keys.CRAWLS, crawl) or redis.exists(CrawlKeys(crawl).config))


def busy_crawls(redis: Redis, names: Iterable[str]) -> list[tuple[str, bool, bytes | None]]:
    """Per crawl: whether it has URLs in flight, and its identity (see same_crawl)."""
    names = list(names)
    with redis.pipeline(transaction=False) as pipe:
        for name in names:
            k = CrawlKeys(name)
            pipe.hlen(k.inflight)
            pipe.hget(k.counters, keys.STARTED_AT)
        found = pipe.execute()
    return [
        (name, bool(size), identity)
        for name, size, identity in zip(names, found[::2], found[1::2], strict=True)
    ]


def glob_escape(text: str) -> str:
    """`text` as a literal in a Redis MATCH pattern: glob's * ? [ ] and \\ escaped, and the
    braces of the hash tag too (harmless in Redis, literal in every glob dialect)."""
    return "".join("\\" + c if c in "*?[]\\{}" else c for c in text)


def _per_host(host_pages: dict) -> dict[str, dict[str, int]]:
    """`host_pages` (host -> admitted, "kind|host" -> n) by host."""
    per: dict[str, dict[str, int]] = {}
    for name, n in host_pages.items():
        kind, _, host = name.decode().rpartition("|")
        per.setdefault(host, {})[kind or keys.ADMITTED] = int(n)
    return per


def _pairs(flat: list[bytes]) -> Released:
    return [
        (url.decode(), InFlight.parse(raw)) for url, raw in zip(flat[::2], flat[1::2], strict=True)
    ]


def _held_entry(raw: bytes) -> tuple[str, InFlight]:
    """A released held entry "priority depth url" (its in-flight entry is attempt 0, turn 0)."""
    priority, depth, url = raw.decode().split(" ", 2)
    return url, InFlight(int(depth), 0.0, 0, priority=int(priority))
