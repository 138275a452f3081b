"""A crawl's state in Redis, and every change of it: the one owner of a crawl's keys.

Admitted URLs wait in one queue per politeness key (a host, or its address with
`politeness_by = "ip"`), lowest depth first, then highest priority. A key is `ready` when its
next request may start (its pace: the delay in force since its last request ended) and it
has a free slot (`host_concurrency`); releasing takes the first URL of each due key, takes a
slot of the key for it and makes it an RQ job (rqcrawl.frontier.dispatch). So RQ holds the
URLs that can be fetched now, a job rarely finds its host busy, and one slow host holds up
no other: each key goes at its own pace. A released URL has an entry in `inflight`
(InFlight) until it ends; at most `window` have jobs at once.

Exact depth without a barrier (docs/explanation/exact-depth.md): a URL's depth is its shortest
click distance from a seed. Hosts do not wait for each other, so a URL can be found first
along a longer path; when a shorter one turns up, the URL is lowered where it is (waiting,
in flight, or ended with its record held back) and an ended page's links are sent again one
deeper. What can still change is bounded by the settled level L: the least depth of a URL
not yet ended. No URL of depth <= L + 1 can be found shorter any more, so a record of a
deeper URL is held back in Redis (with the page's links) until L catches up, and the records
in the stream are final. `max_ahead` bounds the held-back records: at the bound, and with
budgets (max_pages...) or `max_ahead = 0`, only URLs of depth L are released (the level
barrier of a breadth-first crawl). `exact_depth = false` keeps the depth at which a URL was
first found, and holds nothing back.

One Lua step ends a URL (scripts.FINISH): it forgets it from `inflight`, frees its slot,
records its outcome, admits its children through the Bloom filter (and lowers the known ones
found shorter) and releases the next URLs, all atomically. A crashed worker therefore either
did all of that or none of it. A page with more links than one call should take (Redis runs
nothing else meanwhile) has them admitted by earlier calls of the same script that only
admit, and ends with the last batch; a worker dying between two calls leaves the URL in
flight, so it is fetched again and the links already admitted are no-ops of the Bloom
filter's check-and-add.

A job that starts on a URL takes a short lease on it (`leased`) and on its slot, renewed while
it works (rqcrawl.frontier.leases); a URL whose lease ran out belongs to a dead worker. A URL
whose retry is not due, or whose site's robots.txt is not ready, waits in `later` (still in
flight, its slot freed) until its time, then goes back to the head of its key's queue.

In a crawl over several Redis servers (rqcrawl.frontier.shards) this is one shard's state: the
same step appends a page's links to other shards' hosts to the shard's `outbox` (Outgoing),
from which a drain admits them on their shard, and the settled level is the whole crawl's,
raised by rqcrawl.frontier.levels rather than by the finish step.

Key names and counter fields are spelled in rqcrawl.frontier.keys, the Lua in
rqcrawl.frontier.scripts; the RQ side (jobs of released URLs, wake-ups, the recovery pass) is
rqcrawl.frontier.dispatch's.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from redis import Redis
from redis.client import Pipeline

from rqcrawl.config import CrawlConfig
from rqcrawl.defaults import (
    CLAIM_NOTE_EVERY,
    DUE_BATCH,
    FORKED_TTL,
    HOP_HOLD,
    KNOWN_MAX,
    LEASE,
    OTHERS_EVERY,
    OUTBOX_LOCK,
    PAGE_BLOCK,
    RATE_BUCKET,
    REAP_EVERY,
    RECENT,
    RELEASE_GRACE,
    REPLICA_WAIT_MS,
    SHARE_FLOOR,
    WAKER_TTL,
)
from rqcrawl.fetch.politeness import GateKeys
from rqcrawl.fetch.robots import site_of
from rqcrawl.frontier import keys, scripts
from rqcrawl.frontier.bloom import BloomFilter, NativeBloomFilter, batches
from rqcrawl.frontier.configs import load as load_config
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.frontier.records import skip_template
from rqcrawl.frontier.shards import connect, shard_map
from rqcrawl.frontier.sitemaps import target
from rqcrawl.parse.urls import host_of
from rqcrawl.redisurl import behind_sentinel

# Redis work per child besides its k bit operations (a budget check, its queue and its key's
# schedule, or the look-ups of a known child), in the bit operations of
# bloom.MAX_POSITIONS: sizes admission batches.
CHILD_COST = 6
# Upper bounds (seconds) of the fetch-latency histogram, Prometheus style (+Inf implied).
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
NEEDS_PAGES = 2  # what scripts.FINISH returns first when this shard must take pages

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
    released_at: float = field(compare=False)  # (the frontier's to set: see same_entry)
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

    def encode(self) -> str:
        return f"{self.depth} {self.released_at!r} {self.attempt} {self.turn} {self.priority}"

    def job_id(self, crawl: str, url: str) -> str:
        """Deterministic per (URL, attempt, turn), so a stale job recognises itself."""
        digest = hashlib.sha1(url.encode("utf-8")).hexdigest()[:20]
        return f"rqcrawl-{crawl}-{digest}-{self.attempt}-{self.turn}"


Released = list[tuple[str, InFlight]]  # URLs that became in flight: they need RQ jobs


@dataclass(frozen=True)
class Slot:
    """How a job's hold of a slot of its politeness key ended, for the key's pace
    (scripts.FRONTIER_LIB, free_slot): the request's `seconds` (-1: none was made), the
    adaptive throttle's `answer` ('push' for 429/503 or a Retry-After, 'ok' for a success,
    '-' otherwise) and `retry_after`, the key's base delay as now known (`base`: the setting
    or its Crawl-delay; -1: unchanged), and a time before which the key takes no request."""

    key: str
    seconds: float = -1.0
    answer: str = "-"
    retry_after: float = 0.0
    base: float = -1.0
    not_before: float = 0.0

    def encode(self) -> str:
        return (
            f"{self.key} {self.seconds!r} {self.answer} {self.retry_after!r} {self.base!r} "
            f"{self.not_before!r}"
        )


@dataclass(frozen=True)
class Ending:
    """What ending a URL writes in one atomic step (CrawlState.finish): the `counts` to add,
    its `record` (None: none), its `children` admitted at `child_depth` and `child_priority`
    (`via`: they are a redirect's target, led to by that JSON list of redirects,
    rqcrawl.fetch.hops), the end of its request's `slot`, and, for a page whose record may be
    held back (exact depth), all its `links` and those `cut` by max_depth, which a shorter
    path found later sends again. `digest`: the body digest of a fetched page, when the
    crawl detects duplicates: a page whose body an earlier URL of the crawl had is recorded
    `duplicate_of` it (scripts.FINISH), its links admitted as any page's. `claimed`: the
    entry the URL's claim read (its `source` and `via` then say whether it has a mark to
    drop; None: both are dropped)."""

    counts: dict[str, int]
    record: dict | None
    children: Children = ()
    child_depth: int = 1
    child_priority: int = 0
    via: str = ""
    slot: Slot | None = None
    links: Children | None = None
    cut: Children = ()
    digest: bytes = b""
    claimed: InFlight | None = None

    def marks(self) -> str:
        """Which of the URL's marks its end drops (scripts.FINISH): s its sitemap's, v the
        redirects that led to it; a claimed URL has those its claim found (they are set
        only when a URL is admitted)."""
        entry = self.claimed
        return ("s" if entry is None or entry.source else "") + (
            "v" if entry is None or entry.via else ""
        )


@dataclass(frozen=True)
class Claim:
    """What a starting job learns in one round trip (CrawlState.claim)."""

    entry: InFlight | None  # None: the URL ended, or a newer job replaced this one
    paused: bool
    due: Released  # URLs released meanwhile (see scripts.CLAIM)
    stale: bool  # the crawl was purged and created again since this state was made
    wait_until: float | None = None  # its key has no slot now: come back then
    lowered: int | None = None  # the URL was found shorter: its depth now
    level: int = 0  # the settled level when the job started


@dataclass(frozen=True)
class Snapshot:
    """Everything `status`, `list`, the progress bar, the metrics and the bench read of a
    crawl, in one round trip."""

    counters: dict[str, int | float]
    in_flight: list[str]  # URLs (at most `window` with jobs, and the parked ones)
    held: int
    deferred: int
    hosts: dict[str, dict[str, int]]  # host -> admitted, fetched, failed, skipped
    pace: dict[str, tuple[float, ...]]  # key -> politeness (ready, fetch, backoff, base)
    forked: bool  # a forking worker ran a job of the crawl lately
    bloom: dict = field(default_factory=dict)
    held_back: int = 0  # records held back until the level settles them
    outbox: int = 0  # links waiting to be admitted (on another shard, or one deeper)

    def count(self, name: str) -> int | float:
        return self.counters.get(name, 0)

    def family(self, prefix: str) -> dict[str, int]:
        """The counters `prefix` + name (keys.SKIPPED, keys.LINKS...), by name."""
        return {k.removeprefix(prefix): v for k, v in self.counters.items() if k.startswith(prefix)}


@dataclass(frozen=True)
class Ended:
    """What one end (or seeding, or resume) did: URLs new to the crawl, the released URLs,
    whether a recovery pass is due, whether the level rose (over several shards: whether
    this shard has nothing pending at the crawl's level, which may be over:
    rqcrawl.frontier.levels), how many links went to the outbox, whether held-back records
    are left to settle, and when the key it freed may go next (0: none)."""

    admitted: int
    released: Released
    reap_due: bool = False
    level_up: bool = False
    sent: int = 0
    settling: bool = False
    next_at: float = 0.0
    duplicate_of: str = ""  # the ended page's body was first this URL's (Ending.digest)


@dataclass(frozen=True)
class Outgoing:
    """A link waiting in a shard's outbox, to be admitted on its shard (another shard's host,
    or a link sent again one deeper when its page was found shorter): entries
    "shard priority depth verdict source via url" ('-': no verdict, no source, no via)."""

    shard: int
    priority: int
    depth: int
    verdict: str | None
    url: str
    source: str = ""  # 'sitemap' for a sitemap's URL (its record says so)
    via: str = ""  # a redirect's target: the JSON list of the redirects that led to it

    @classmethod
    def parse(cls, raw: bytes) -> Outgoing:
        # the URL last, whatever it holds (a JSON list of redirects has no space)
        shard, priority, depth, verdict, source, via, url = raw.decode().split(" ", 6)
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
    """What the level coordinator reads of one shard (rqcrawl.frontier.levels): its level,
    the least depth it has pending (None: none), its in-flight, waiting, outbox and held-back
    counts, and `version`, which changes with every admission and every URL given back, so
    two equal views mean nothing moved."""

    level: int
    lowest: int | None
    in_flight: int
    held: int
    outbox: int
    held_back: int
    version: tuple[int, int, int]
    halted: bool


@dataclass(frozen=True)
class UrlFacts:
    """Where one URL is in this shard's state (CrawlState.url_facts), for `rqcrawl inspect`:
    its in-flight entry, when its deferral ends (`later`), its lease's expiry, its place in
    its key's queue (priority, depth), the reason of a retry, whether the Bloom filter has
    seen it, the level, and its site's robots.txt verdict and whether a job is fetching that
    now, its key's next start and whether the key waits for the level."""

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
    key_ready_at: float | None = None
    key_blocked: bool = False
    held_back_at: int | None = None  # its record is held back at this depth


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
        self.known: dict[str, int] = {}  # url -> least depth sent (see KNOWN_MAX)
        # Not behind a Sentinel: a failover loses what the old primary acknowledged last, so
        # links sent then must be sent again when their page is fetched again.
        self.remembers = not behind_sentinel(redis)
        self.identity: bytes | None = None  # see same_crawl
        self.claim_noted_at = 0.0  # see claim
        self.shards = shard_map(cfg)  # None: the crawl lives in this Redis alone
        self.others_read: tuple[float, int] = (0.0, 0)  # see admitted_elsewhere
        self.gate_key = GateKeys(cfg)  # host -> its politeness key
        # Seconds ahead of its host's turn a URL may be released (its job then waits for the
        # turn): a forking worker's job takes that long to start (defaults.FORK_LEAD).
        self.lead = 0.0

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

    def key_of(self, url: str) -> str:
        """The politeness key of `url` (a crawl entry: a page, or a sitemap document)."""
        return self.gate_key(host_of(target(url)))

    @property
    def strict(self) -> bool:
        """Whether only URLs of the level are released (budgets: the breadth-first order
        decides which pages they keep)."""
        cfg = self.cfg
        return bool(cfg.max_pages or cfg.max_pages_per_host or cfg.max_host_share)

    def frontier_names(self) -> dict:
        """The keys and arguments every frontier script takes (scripts.FRONTIER_KEYS and
        FRONTIER_ARGS), by name."""
        k, cfg = self.keys, self.cfg
        pace = (
            f"{cfg.delay!r} {cfg.host_concurrency} {cfg.delay_factor!r} "
            f"{cfg.max_backoff_delay!r} {RELEASE_GRACE!r} {int(cfg.adaptive_throttle)} "
            f"{self.lead!r}"
        )
        undelivered = f"{cfg.max_undelivered} {cfg.max_undelivered_bytes}"  # stream_full's
        levels = (
            f"{int(cfg.exact_depth)} {int(self.strict)} {cfg.max_ahead} "
            f"{int(self.shards is not None)} {cfg.max_depth} {self.index}"
        )
        return dict(
            counters=k.counters, inflight=k.inflight, ready=k.ready, blocked=k.blocked,
            qkeys=k.qkeys, hosts=k.hosts, later=k.later, parked=k.parked, pending=k.pending,
            spec=k.spec, lowered=k.lowered, items=k.items, outbox=k.outbox, leased=k.leased,
            qprefix=k.qprefix, lprefix=k.lprefix, sprefix=k.sprefix, pace=pace, levels=levels,
            now=repr(time.time()), window=self.cfg.window, undelivered=undelivered,
        )  # fmt: skip

    # -- admission and ending -------------------------------------------------------------

    def seed(self, urls: list[str], priority: int = 0) -> tuple[int, Released]:
        """Admit `urls` at depth 0 and `priority` (budgets apply, trap rules do not) and
        release what is due; returns how many were new to the crawl, and the released
        URLs."""
        self.redis.hsetnx(self.keys.counters, keys.STARTED_AT, repr(time.time()))
        ended = self._end("", Ending({}, None, [(None, u) for u in urls], 0, priority))
        return ended.admitted, ended.released

    def admit_listed(self, children: Children, depth: int, priority: int, source: str) -> Ended:
        """Admit `children` at `depth` and `priority` like a page's links without ending any
        URL: a sitemap's URLs, noted as coming from `source`."""
        return self._end("", Ending({}, None, children, depth, priority), source)

    def hold_sitemaps(
        self, entries: Iterable[tuple[str, str]], priority: int, cap: int
    ) -> tuple[int, Released]:
        """Hold sitemap entries (site, entry) at depth 0 (scripts.HOLD_SITEMAPS: once each,
        at most `cap` per site) and release what is due; returns how many the cap refused,
        and the released URLs."""
        triples = [part for site, e in entries for part in (site, self.key_of(e), e)]
        _, capped, *released = scripts.HOLD_SITEMAPS(
            self.redis, tail_args=triples, sitemaps=self.keys.sitemaps, cap=cap,
            priority=priority, **self.frontier_names(),
        )  # fmt: skip
        return capped, _pairs(released)

    def hold_requisites(self, entries: list[str], depth: int, priority: int) -> Released:
        """Hold requisite entries at `depth` and `priority`, each once per crawl
        (scripts.HOLD_REQUISITES), and release what is due. With shards, those of another
        shard's hosts are not held (counted as cut by the caller): their host's gate lives
        there."""
        mine = [e for e in entries if self.shard_of(e) == self.index]
        if not mine:
            return []
        pairs = [part for e in mine for part in (self.key_of(e), e)]
        _, *released = scripts.HOLD_REQUISITES(
            self.redis, tail_keys=self.bloom.script_keys,
            tail_args=[*pairs, *self.bloom.flat_positions(mine)], depth=depth,
            priority=priority, n=len(mine), shard_bits=self.bloom.shard_bits,
            k=self.bloom.hashes, size=self.bloom.size, **self.frontier_names(),
        )  # fmt: skip
        return _pairs(released)

    def expect_robots_sitemaps(self, sites: Iterable[str], priority: int) -> None:
        """Mark seed `sites` whose robots.txt's sitemaps are to be read (at `priority`), by
        the job that fetches it (Frontier.sitemaps_named); a site marked before keeps its."""
        with self.redis.pipeline(transaction=False) as pipe:
            for site in sites:
                pipe.hsetnx(self.keys.sitemaps, f"robots|{site}", priority)
            pipe.execute()

    def take_robots_sitemaps(self, site: str) -> int | None:
        """The priority of `site`'s mark (expect_robots_sitemaps), taken (deleted, in one
        transaction: once); None when the site has none (not a seed site, or taken). Other
        sites leave nothing behind."""
        with self.redis.pipeline() as pipe:
            pipe.hget(self.keys.sitemaps, f"robots|{site}")
            pipe.hdel(self.keys.sitemaps, f"robots|{site}")
            mark, taken = pipe.execute()
        return int(mark) if taken else None

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

    def finish(self, url: str, ending: Ending) -> Ended:
        """End `url` for good with what `ending` writes (a refused child is recorded once as
        skipped)."""
        return self._end(url, ending)

    def inherited(self, priority: int) -> int:
        """The priority of a page's links: `priority_share` of the page's, rounded toward 0
        (so a seed's priority fades with the clicks from it unless the share is 1)."""
        return int(priority * self.cfg.priority_share)

    def _end(self, done: str, ending: Ending, source: str = "") -> Ended:
        """End `done` (unless '') and admit the children of `ending`, in batches of bounded
        Redis time, the URL ending with the last one (see the module docstring). Links to
        other shards' hosts go to the outbox with the last one."""
        depth = ending.child_depth
        children = [c for c in ending.children if self.known.get(c[1], depth + 1) > depth]
        children, foreign = self._split(children, ending, source)
        parts = list(batches(children, self.bloom.hashes + CHILD_COST)) or [[]]
        admitted, released, sent = 0, [], 0
        for part in parts[:-1]:  # (the last call, which writes the record, checks the digest)
            only = replace(ending, counts={}, record=None, slot=None, links=None, cut=(),
                           digest=b"")  # fmt: skip
            ended = self._finish_call(done, False, only, part, [], source)
            if ended is None:  # a stale job: the URL ended meanwhile, its links are not ours
                return Ended(admitted, released)
            admitted, released = admitted + ended.admitted, released + ended.released
            sent += ended.sent
        last = self._finish_call(done, True, ending, parts[-1], foreign, source)
        if last is None:
            return Ended(admitted, released)
        return replace(last, admitted=admitted + last.admitted,
                       released=released + last.released, sent=sent + last.sent)  # fmt: skip

    def _split(
        self, children: Children, ending: Ending, source: str
    ) -> tuple[Children, list[Outgoing]]:
        """The children of this shard's hosts, and the others for the outbox."""
        if self.shards is None:
            return children, []
        local, foreign = [], []
        for verdict, url in children:
            shard = self.shard_of(url)
            if shard == self.index:
                local.append((verdict, url))
            else:
                depth, priority = ending.child_depth, ending.child_priority
                foreign.append(Outgoing(shard, priority, depth, verdict, url, source, ending.via))
        return local, foreign

    def shard_of(self, url: str) -> int:
        """The shard of the host of `url` (placed by its politeness key)."""
        host = host_of(target(url))
        return self.shards.index_of(host, self.gate_key(host)) if self.shards else self.index

    def _links(self, links: Children | None) -> str:
        """A page's links as the finish step keeps them with a held-back record: a JSON list
        of "shard verdict url" ('' for none)."""
        if not links:
            return ""
        return json.dumps([f"{self.shard_of(u)} {v or '-'} {u}" for v, u in links])

    def _finish_call(
        self,
        done: str,
        final: bool,
        ending: Ending,
        children: Children,
        foreign: list[Outgoing],
        source: str,
    ) -> Ended | None:
        """One run of scripts.FINISH; None if `done` had already ended (a stale job)."""
        urls = [u for _, u in children]
        while True:
            reply = self._finish_script(done, final, ending, children, foreign, source, urls)
            if reply[0] != NEEDS_PAGES:
                break
            self.take_pages(reply[1])  # (then: how many it needs)
        ok, admitted, reap_due, level_up, sent, settling, next_at, dup, *released = reply
        if not ok:  # the script stopped before the Bloom filter (the URL had ended)
            return None
        if self.remembers and not dup:  # (a duplicate's links were not admitted)
            if len(self.known) > KNOWN_MAX:
                self.known.clear()
            depth = ending.child_depth
            for url in [*urls, *(o.url for o in foreign)]:
                self.known[url] = min(self.known.get(url, depth), depth)
        return Ended(
            admitted, _pairs(released), bool(reap_due), bool(level_up), sent, bool(settling),
            float(next_at), dup.decode(),
        )  # fmt: skip

    def _finish_script(
        self,
        done: str,
        final: bool,
        ending: Ending,
        children: Children,
        foreign: list[Outgoing],
        source: str,
        urls: list[str],
    ) -> list:
        """One run of scripts.FINISH, its reply as is."""
        k, record = self.keys, ending.record
        tail: list = []
        for verdict, u in children:
            host = host_of(target(u))
            tail += (verdict or "-", self.gate_key(host), host, u)
        return scripts.FINISH(
            self.redis,
            tail_keys=self.bloom.script_keys,
            tail_args=[*tail, *self.bloom.flat_positions(urls)],
            reap_lock=k.reap_lock, host_pages=k.host_pages, revisiting=k.revisiting,
            sitemapped=k.sitemapped, via=k.via, digests=k.digests, done=done, final=int(final),
            digest=ending.digest,
            marks=ending.marks(),
            increments=" ".join(f"{name} {n}" for name, n in ending.counts.items() if n),
            record=json.dumps(record, separators=(",", ":")) if record else "",
            rec_depth=record["depth"] if record else -1,
            child_depth=ending.child_depth,
            child_priority=ending.child_priority,
            source=source,
            child_via=ending.via,
            links=self._links(ending.links) if final else "",
            cut=self._links(ending.cut) if final else "",
            slot=(ending.slot or Slot(self.key_of(done))).encode() if final and done else "",
            shard_bits=self.bloom.shard_bits,
            k=self.bloom.hashes,
            reap_every=REAP_EVERY,
            max_pages=self.cfg.max_pages,
            max_host_pages=self.cfg.max_pages_per_host,
            max_host_share=repr(self.cfg.max_host_share),
            share_floor=SHARE_FLOOR,
            skip_record=skip_template(ending.child_depth, source),
            skip_prefix=keys.SKIPPED,
            n=len(children),
            size=self.bloom.size,
            foreign=json.dumps([o.encode() for o in foreign]) if foreign else "",
            others=self.admitted_elsewhere(),
            **self.frontier_names(),
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
        """Put URLs due for a revisit (url, depth, priority) back in their keys' queues,
        bypassing the Bloom filter, except those already waiting for their revisit or in
        flight, and release what is due; returns how many were readmitted, and the released
        URLs."""
        entries = [f"{priority} {depth} {self.key_of(url)} {url}" for url, depth, priority in due]
        added, *released = scripts.READMIT(
            self.redis, tail_args=entries, revisiting=self.keys.revisiting,
            **self.frontier_names(),
        )  # fmt: skip
        return added, _pairs(released)

    def cancelled(self) -> bool:
        return bool(self.redis.hexists(self.keys.counters, keys.CANCELLED_AT))

    def pump_due(self, every: float) -> bool:
        """Take the pump's turn unless one ran in the last `every` seconds (any process)."""
        return bool(self.redis.set(self.keys.pump_lock, 1, nx=True, px=int(every * 1000)))

    # -- a job's life ---------------------------------------------------------------------

    def claim(self, url: str, job_id: str, reply: list | None = None) -> Claim:
        """The URL's entry if the job `job_id` is its live attempt and turn (the job then
        takes the URL's lease, and its key's slot if it may make its request now), whether
        the crawl is paused, and the URLs released meanwhile (in the same call, so that busy
        workers keep parked URLs on time). `reply`: the claim's reply already got (the
        recommended worker sends claim_call with the job's start, in its round trip)."""
        if reply is None:
            reply = scripts.CLAIM(self.redis, **self.claim_call(url, job_id))
        raw, paused, identity, due, sitemapped, via, go, lowered, level = reply
        entry = InFlight.parse(raw) if raw is not None else None
        if entry is not None and entry.job_id(self.crawl, url) != job_id:
            entry = None
        if entry is not None and sitemapped:
            entry = replace(entry, source="sitemap")
        if entry is not None and via:
            entry = replace(entry, via=tuple(json.loads(via)))
        go = go.decode() if isinstance(go, bytes) else str(go)
        wait = float(go) if entry is not None and go not in ("0", "1") else None
        return Claim(
            entry, bool(paused), _pairs(due), not self.same_crawl(identity), wait,
            int(lowered) if lowered is not None else None, int(level),
        )  # fmt: skip

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
            sitemapped=k.sitemapped, via=k.via, url=url, key=self.key_of(url), attempt=attempt,
            turn=turn, expiry=repr(now + LEASE), limit=DUE_BATCH, note=int(note),
            **self.frontier_names(),
        )  # fmt: skip

    def same_crawl(self, identity: bytes | None) -> bool:
        """Whether `identity` (the crawl's `started_at`, set once when it is first seeded)
        is this crawl's: a crawl purged and seeded again under the same name has another,
        and a worker must then drop what it kept of the old one (settings, known links).
        The first identity seen is this state's."""
        if self.identity is None:
            self.identity = identity
        return identity is None or identity == self.identity

    def park(
        self, url: str, entry: InFlight, nxt: InFlight, slot: Slot, counter: str = ""
    ) -> Ended | None:
        """Replace the job's `entry` by `nxt`, waiting in `later` until nxt.released_at (a
        deferral, or with counter keys.RETRIES a retry; a time come already: at the head of
        its key's queue), the job's `slot` freed; None if the job was stale, else what that
        released and when the key may go next."""
        ok, next_at, *released = scripts.PARK(
            self.redis, url=url, key=slot.key, expected=entry.encode(), entry=nxt.encode(),
            until_at=repr(nxt.released_at), counter=counter, slot=slot.encode(),
            **self.frontier_names(),
        )  # fmt: skip
        return Ended(0, _pairs(released), next_at=float(next_at)) if ok else None

    def free_slot(self, url: str, slot: Slot) -> Released:
        """Free the slot of a job that did not end its URL (it failed, or was cut short);
        returns what that released."""
        return _pairs(
            scripts.FREE_SLOT(self.redis, url=url, slot=slot.encode(), **self.frontier_names())
        )

    def hop_turn(self, key: str, ended: str, own: bool, holder: str) -> float:
        """0 when a robots.txt redirect hop to politeness key `key` may go now, else when to
        ask again (scripts.HOP_TURN); `ended`: the key of the request that just ended;
        `holder`: the name of the hop's hold of a slot of another key while it waits."""
        at = scripts.HOP_TURN(
            self.redis, key=key, ended=ended, own=int(own), holder=holder, hold_for=HOP_HOLD,
            **self.frontier_names(),
        )  # fmt: skip
        return float(at)

    def hop_ended(self, key: str) -> None:
        """A robots.txt redirect hop to politeness key `key` ended (scripts.HOP_ENDED)."""
        scripts.HOP_ENDED(self.redis, key=key, **self.frontier_names())

    def take_due(self) -> tuple[bool, Released]:
        """Bring parked URLs whose time came back to their keys' queues, go on settling
        held-back records, and release what is due: whether records are left to settle,
        and the released URLs."""
        settling, *released = scripts.DUE(self.redis, limit=DUE_BATCH, **self.frontier_names())
        return bool(settling), _pairs(released)

    def next_due(self) -> float | None:
        """When the next key may go or the next parked URL comes due, if any waits."""
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.zrange(self.keys.ready, 0, 0, withscores=True)
            pipe.zrange(self.keys.later, 0, 0, withscores=True)
            firsts = [found[0][1] for found in pipe.execute() if found]
        return min(firsts) if firsts else None

    def claim_waker(self) -> bool:
        """True for the one caller that is to queue the crawl's waker job (see
        Frontier.ensure_waker): at most one is queued or running at a time."""
        return bool(self.redis.set(self.keys.waker, 1, nx=True, ex=WAKER_TTL))

    def drop_waker(self) -> None:
        """The waker job is done: the next deferral may queue another."""
        self.redis.delete(self.keys.waker)

    def put_back(self, url: str, entry: InFlight) -> bool:
        """For a job whose claim saw the crawl paused: True if the crawl is halted, `url`
        then being given back to its key's queue unfetched (or dropped if cancelled)."""
        return bool(
            scripts.PUT_BACK(
                self.redis, url=url, key=self.key_of(url), expected=entry.encode(),
                **self.frontier_names(),
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
        """Clear the halt and release what is due."""
        self.redis.hdel(self.keys.counters, keys.PAUSED_AT)
        return self.take_due()[1]

    def cancel(self) -> tuple[int, Released] | None:
        """Halt for good and drop the waiting, in-flight and parked URLs in one step (records
        held back are emitted first); None if already cancelled, else how many were waiting
        and the dropped in-flight URLs."""
        k = self.keys
        out = scripts.CANCEL(
            self.redis, revisiting=k.revisiting, sitemapped=k.sitemapped, via=k.via,
            **self.frontier_names(),
        )  # fmt: skip
        if out is None:
            return None
        return out[0], _pairs(out[1:])

    def delete(self) -> int:
        """Delete every key of the crawl (a handful per host: its queue and its slots) and
        unlist it; returns how many keys were deleted."""
        match = glob_escape(self.keys.prefix) + "*"
        names = list(self.redis.scan_iter(match=match, count=1000))
        deleted = self.redis.unlink(*names) if names else 0
        self.redis.srem(keys.CRAWLS, self.crawl)
        return deleted

    # -- several shards (rqcrawl.frontier.levels) -----------------------------------------

    def admit(self, links: list[Outgoing]) -> Ended:
        """Admit links from the outbox (another shard's, or this one's links sent again one
        deeper) as if found here: the Bloom filter makes a second admission a no-op, and
        lowers a known URL found shorter."""
        ended = Ended(0, [])
        by_origin: dict[tuple[int, int, str, str], Children] = {}
        for o in links:
            origin = (o.depth, o.priority, o.source, o.via)
            by_origin.setdefault(origin, []).append((o.verdict, o.url))
        for (depth, priority, source, via), children in by_origin.items():
            step = self._end("", Ending({}, None, children, depth, priority, via), source)
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
            scripts.TRIM_OUTBOX(
                self.redis, outbox=k.outbox, lock=k.outbox_lock, pending=k.pending,
                token=token, n=n,
            )
        )  # fmt: skip

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
        with self.redis.pipeline(transaction=False) as pipe:
            fields = (keys.LEVEL, keys.ADMITTED, keys.PUT_BACK, keys.PAUSED_AT, keys.HELD)
            pipe.hmget(k.counters, *fields)
            pipe.hgetall(k.pending)
            pipe.hlen(k.inflight)
            pipe.llen(k.outbox)
            pipe.hlen(k.spec)
            (level, admitted, put_back, paused, held), pending, flying, outbox, back = (
                pipe.execute()
            )
        depths = [int(d) for d, n in pending.items() if int(n) > 0]
        version = (int(admitted or 0), int(put_back or 0), sum(int(n) for n in pending.values()))
        return LevelView(
            int(level or 0), min(depths, default=None), flying, int(held or 0), outbox, back,
            version, paused is not None,
        )  # fmt: skip

    def advance(self, level: int) -> tuple[bool, Released]:
        """Raise this shard's level to `level` (scripts.ADVANCE) and go on settling: whether
        records are left to settle, and the released URLs."""
        _, settling, *released = scripts.ADVANCE(self.redis, level=level, **self.frontier_names())
        return bool(settling), _pairs(released)

    # -- recovery -------------------------------------------------------------------------

    def recovery_candidates(self, lost_after: float) -> tuple[list[str], Released, Released]:
        """For the recovery pass: URLs whose lease expired though they ended (the lease is
        only to be dropped), in-flight URLs whose lease expired (their worker died), and
        in-flight URLs with no lease, not parked and not back in their key's queue, released
        over `lost_after` seconds ago (their job may have failed or never been enqueued)."""
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
        return orphans, lost, self._not_queued(unleased)

    def _not_queued(self, entries: Released) -> Released:
        """Those of the in-flight `entries` that are not back in their key's queue (a
        parked URL whose time came waits there for its key)."""
        if not entries:
            return []
        with self.redis.pipeline(transaction=False) as pipe:
            for url, _ in entries:
                pipe.zscore(self.keys.qprefix + self.key_of(url), url)
            queued = pipe.execute()
        return [pair for pair, score in zip(entries, queued, strict=True) if score is None]

    def requeue(self, url: str, entry: InFlight | None, nxt: InFlight | None) -> Released | None:
        """Replace `url`'s in-flight `entry` by `nxt`, back at the head of its key's queue,
        unless the URL ended, was requeued or had its lease renewed meanwhile (then None);
        an expired lease is dropped either way (None, None: only that). Returns what was
        released."""
        ok, *released = scripts.REQUEUE(
            self.redis, url=url, key=self.key_of(url), expected=entry.encode() if entry else "",
            entry=nxt.encode() if nxt else "", **self.frontier_names(),
        )  # fmt: skip
        return _pairs(released) if ok else None

    def still_lost(self, url: str, entry: InFlight) -> bool:
        """Whether `url` is still in flight as `entry` with no live lease (before giving it
        up: nobody took it meanwhile)."""
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(self.keys.inflight, url)
            pipe.zscore(self.keys.leased, url)
            current, lease = pipe.execute()
        same = current is not None and InFlight.parse(current) == entry
        return same and (lease is None or lease < time.time())

    def reap_due(self) -> bool:
        """Take the recovery pass's turn unless one ran in the last REAP_EVERY seconds (the
        lock the finish step also takes for workers)."""
        return bool(self.redis.set(self.keys.reap_lock, 1, nx=True, ex=REAP_EVERY))

    # -- reading --------------------------------------------------------------------------

    def undelivered(self) -> tuple[int, int]:
        """Records in the records stream, and their bytes (not yet delivered and trimmed)."""
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.xlen(self.keys.items)
            pipe.hmget(self.keys.counters, keys.RECORD_BYTES, keys.TRIMMED_BYTES)
            length, (appended, trimmed) = pipe.execute()
        return length, int(appended or 0) - int(trimmed or 0)

    def at_bound(self) -> bool:
        """Whether the records stream holds max_undelivered records or max_undelivered_bytes
        bytes: then no URL is released (scripts.FRONTIER_LIB's stream_full) until a follower
        drains it (rqcrawl.ops.follow)."""
        records, size = self.undelivered()
        return records >= self.cfg.max_undelivered or size >= self.cfg.max_undelivered_bytes

    def unfinished(self) -> int:
        """URLs in flight, waiting or in the outbox, and records held back: 0 exactly when
        the crawl has nothing left (cheaper than a snapshot, for polling)."""
        k = self.keys
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hlen(k.inflight)
            pipe.hget(k.counters, keys.HELD)
            pipe.llen(k.outbox)
            pipe.hlen(k.spec)
            flying, held, outbox, back = pipe.execute()
        return flying + int(held or 0) + outbox + back

    def only_robots_waits(self) -> bool:
        """Whether all this shard of the crawl has left to do is URLs of sites whose
        robots.txt is unavailable: every URL in flight (parked) and every host with URLs held
        in its queue one of those, nothing in the outbox (`in flight` holds the window at
        most; hosts with URLs held, the hosts left). Records held back for the level are
        done work: they only wait for those URLs to end. With politeness_by = "ip" a queue's
        key names no site: never."""
        k = self.keys
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hkeys(k.inflight)
            pipe.smembers(k.qkeys)
            pipe.llen(k.outbox)
            flying, queued, outbox = pipe.execute()
        if outbox or (queued and self.cfg.politeness_by != "host"):
            return False
        sites = {site_of(target(url.decode())) for url in flying}
        hosts = [key.decode() for key in queued]
        verdicts = self.robots_verdicts(
            sorted(sites | {f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")})
        )

        def waiting(site: str) -> bool:
            return verdicts.get(site, {}).get("kind") == "unavailable"

        return all(map(waiting, sites)) and all(
            waiting(f"http://{h}") or waiting(f"https://{h}") for h in hosts
        )

    def snapshot(self) -> Snapshot:
        """The crawl's counters and queues in one round trip (rate buckets older than RECENT
        before the last URL's end are pruned here, so the counters hash stays small however
        long the crawl runs, and a finished crawl keeps the rate of its last RECENT s)."""
        k = self.keys
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(k.counters)
            pipe.hkeys(k.inflight)  # at most `window` URLs with jobs, and the parked ones
            pipe.zcard(k.later)
            pipe.hgetall(k.host_pages)
            pipe.hgetall(k.hosts)
            pipe.exists(k.forked)
            pipe.hlen(k.spec)
            pipe.llen(k.outbox)
            raw, flying, deferred, host_pages, pace, forked, back, outbox = pipe.execute()
        counters = {f.decode(): float(v) if b"." in v else int(v) for f, v in raw.items()}
        self._prune_rates(counters)
        return Snapshot(
            counters=counters,
            in_flight=[url.decode() for url in flying],
            held=int(counters.get(keys.HELD, 0)),
            deferred=deferred,
            hosts=_per_host(host_pages),
            # "ready fetch backoff base" (scripts.FRONTIER_LIB)
            pace={key.decode(): tuple(float(x) for x in v.split()) for key, v in pace.items()},
            forked=bool(forked),
            bloom=self.bloom.stats(),
            held_back=back,
            outbox=outbox,
        )

    def _prune_rates(self, counters: dict) -> None:
        last = counters.get(keys.LAST_AT, time.time())
        first = int(last) // RATE_BUCKET - RECENT // RATE_BUCKET
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
        """Where `url` is in this shard, in one round trip."""
        k, key = self.keys, self.key_of(url)
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(k.inflight, url)
            pipe.zscore(k.later, url)
            pipe.zscore(k.leased, url)
            pipe.get(k.retry_reason(url))
            pipe.hmget(k.counters, keys.PAUSED_AT, keys.LEVEL)
            pipe.hget(k.robots, site)
            pipe.exists(k.robots_claim(site))
            pipe.zscore(k.qprefix + key, url)
            pipe.zscore(k.ready, key)
            pipe.sismember(k.blocked, key)
            pipe.hget(k.spec, url)
            (raw, later, lease, why, (paused, level), robots, fetching, score, ready_at,
             blocked, back) = pipe.execute()  # fmt: skip
        return UrlFacts(
            entry=InFlight.parse(raw) if raw is not None else None,
            later_at=later, lease_until=lease,
            held=split_score(score) if score is not None and score >= 0 else None,
            retry_reason=why.decode() if why else None,
            seen=self.bloom.contains_many([url])[0], level=int(level or 0),
            paused=paused is not None, robots=json.loads(robots) if robots else None,
            robots_fetching=bool(fetching), key_ready_at=ready_at, key_blocked=bool(blocked),
            held_back_at=int(back) if back is not None else None,
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
        """Parked URLs per host, and for `hosts` their live requests, the robots.txt
        verdicts of their sites (http and https) and which of those are being fetched, in
        one round trip (`later` holds in-flight URLs only: about the window at most)."""
        k = self.keys
        sites = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.zrange(k.later, 0, -1, withscores=True)
            for site in sites:
                pipe.exists(k.robots_claim(site))
            if sites:
                pipe.hmget(k.robots, sites)
            later, *rest = pipe.execute()
        running = self.running_requests(hosts)
        claims = rest[: len(sites)]
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
        """Hosts whose turn and parked URLs whose time came before `before`, that nobody
        released yet."""
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.zcount(self.keys.later, "-inf", before)
            pipe.zcount(self.keys.ready, "-inf", before)
            return sum(pipe.execute())

    def running_requests(self, hosts: list[str]) -> list[int]:
        """Jobs running per host (live leases of their URLs: a released URL whose job has
        not started yet holds its host's slot, but no lease)."""
        live = self.redis.zrangebyscore(self.keys.leased, time.time(), "+inf")
        running = Counter(host_of(target(url.decode())) for url in live)
        return [running[host] for host in hosts]


DEPTH_UNIT, PRIO_MID = 2_097_152, 1_048_576  # a queue's scores (scripts.FRONTIER_LIB)


def split_score(score: float) -> tuple[int, int]:
    """(priority, depth) of a URL waiting in its key's queue, from its score."""
    depth = int(score // DEPTH_UNIT)
    return PRIO_MID - int(score - depth * DEPTH_UNIT), depth


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
    is told apart from a finished site (stats.thin_crawl)."""
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
    """Per crawl: whether it has URLs in flight or waiting, or records held back, and its
    identity (see same_crawl)."""
    names = list(names)
    with redis.pipeline(transaction=False) as pipe:
        for name in names:
            k = CrawlKeys(name)
            pipe.hlen(k.inflight)
            pipe.hmget(k.counters, keys.STARTED_AT, keys.HELD)
            pipe.hlen(k.spec)
        found = pipe.execute()
    return [
        (name, bool(flying or int(held or 0) or back), identity)
        for name, flying, (identity, held), back in zip(
            names, found[::3], found[1::3], found[2::3], strict=True
        )
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
