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

CrawlState is carved by concern: admission (rqcrawl.frontier.admission), pacing
(rqcrawl.frontier.pacing), leases (rqcrawl.frontier.leases) and records
(rqcrawl.frontier.records) each hold its part of the class, and its Lua in frontier/lua/;
this module holds the rest (the keys and arguments every script takes, the operators'
steps, the reads). The messages between Python and Lua are rqcrawl.frontier.messages'.
Key names and counter fields are spelled in rqcrawl.frontier.keys, the Lua loaded by
rqcrawl.frontier.scripts. The one face of a crawl's frontier is rqcrawl.frontier.dispatch's
Frontier: this class with its RQ side (jobs of released URLs, wake-ups, and the recovery
pass of rqcrawl.frontier.recovery). A step here that releases URLs is named `X_step` and
returns them; Frontier's `X` queues their jobs.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from redis import Redis

from rqcrawl.config import CrawlConfig
from rqcrawl.defaults import (
    RATE_BUCKET,
    RECENT,
    RELEASE_GRACE,
    REPLICA_WAIT_MS,
)
from rqcrawl.fetch.politeness import GateKeys
from rqcrawl.fetch.robots import site_of
from rqcrawl.frontier import keys, scripts
from rqcrawl.frontier.admission import Admission
from rqcrawl.frontier.bloom import BloomFilter, NativeBloomFilter
from rqcrawl.frontier.configs import load as load_config
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.frontier.leases import Leases
from rqcrawl.frontier.messages import (
    HostPace,
    InFlight,
    LevelArgs,
    PaceArgs,
    Released,
    pairs,
)
from rqcrawl.frontier.pacing import Pacing
from rqcrawl.frontier.records import Records
from rqcrawl.frontier.rules import SentLinks
from rqcrawl.frontier.shards import connect, shard_map
from rqcrawl.frontier.sitemaps import target
from rqcrawl.parse.urls import host_of
from rqcrawl.redisurl import behind_sentinel

# Upper bounds (seconds) of the fetch-latency histogram, Prometheus style (+Inf implied).
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True)
class Snapshot:
    """Everything `status`, `list`, the progress bar, the metrics and the bench read of a
    crawl, in one round trip."""

    counters: dict[str, int | float]
    in_flight: list[str]  # URLs (at most `window` with jobs, and the parked ones)
    held: int
    deferred: int
    hosts: dict[str, dict[str, int]]  # host -> admitted, fetched, failed, skipped
    pace: dict[str, HostPace]  # key -> its pace, as the scripts keep it
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


class CrawlState(Admission, Pacing, Leases, Records):
    """One crawl's state in Redis, as seen from a seeding client, an operator or a worker."""

    def __init__(self, redis: Redis, crawl: str, cfg: CrawlConfig):
        self.redis = redis
        self.crawl = crawl
        self.cfg = cfg
        self.keys = CrawlKeys(crawl)
        self.known = SentLinks()  # the links this process sent
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
        pace = PaceArgs(
            cfg.delay, cfg.host_concurrency, cfg.delay_factor, cfg.max_backoff_delay,
            RELEASE_GRACE, cfg.adaptive_throttle, self.lead,
        ).encode()  # fmt: skip
        undelivered = f"{cfg.max_undelivered} {cfg.max_undelivered_bytes}"  # stream_full's
        levels = LevelArgs(
            cfg.exact_depth, self.strict, cfg.max_ahead, self.shards is not None, cfg.max_depth,
            self.index,
        ).encode()  # fmt: skip
        return dict(
            counters=k.counters, inflight=k.inflight, ready=k.ready, blocked=k.blocked,
            qkeys=k.qkeys, hosts=k.hosts, later=k.later, parked=k.parked, pending=k.pending,
            spec=k.spec, lowered=k.lowered, items=k.items, outbox=k.outbox, leased=k.leased,
            qprefix=k.qprefix, lprefix=k.lprefix, sprefix=k.sprefix, pace=pace, levels=levels,
            now=repr(time.time()), window=self.cfg.window, undelivered=undelivered,
        )  # fmt: skip

    # -- operators ------------------------------------------------------------------------

    def cancelled(self) -> bool:
        return bool(self.redis.hexists(self.keys.counters, keys.CANCELLED_AT))

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

    def resume_step(self) -> Released:
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
        return out[0], pairs(out[1:])

    def delete(self) -> int:
        """Delete every key of the crawl (a handful per host: its queue and its slots) and
        unlist it; returns how many keys were deleted."""
        match = glob_escape(self.keys.prefix) + "*"
        names = list(self.redis.scan_iter(match=match, count=1000))
        deleted = self.redis.unlink(*names) if names else 0
        self.redis.srem(keys.CRAWLS, self.crawl)
        return deleted

    # -- several shards (rqcrawl.frontier.levels) -----------------------------------------

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

    # -- reading --------------------------------------------------------------------------

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
            pace={key.decode(): HostPace.parse(v) for key, v in pace.items()},
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
            pipe.exists(k.robots_fetcher(site))
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

    def host_facts(self, hosts: list[str]) -> HostFacts:
        """Parked URLs per host, and for `hosts` their live requests, the robots.txt
        verdicts of their sites (http and https) and which of those are being fetched, in
        one round trip (`later` holds in-flight URLs only: about the window at most)."""
        k = self.keys
        sites = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.zrange(k.later, 0, -1, withscores=True)
            for site in sites:
                pipe.exists(k.robots_fetcher(site))
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


DEPTH_UNIT, PRIO_MID = 2_097_152, 1_048_576  # a queue's scores (lua/frontier.lua)


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
        if attempts > 1:
            out[keys.per_host(keys.HOST_RETRIED, host)] = attempts - 1
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
