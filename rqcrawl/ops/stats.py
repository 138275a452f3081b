"""A crawl's state and numbers, derived from counters that change atomically with admissions."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from dataclasses import dataclass, field

from redis import Redis

from rqcrawl import config
from rqcrawl.defaults import (
    DELAYS_READ,
    GAP_CAP,
    HOSTS_SHOWN,
    IDLE_WARN,
    RATE_BUCKET,
    RECENT,
    RECENT_ENDS,
)
from rqcrawl.fetch.robots import Robots
from rqcrawl.frontier import configs, keys, sitemaps
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.levels import settled
from rqcrawl.frontier.messages import HostPace
from rqcrawl.frontier.outage import TableUnavailable
from rqcrawl.frontier.state import LATENCY_BUCKETS, Snapshot, all_shards
from rqcrawl.ops.stalls import STUCK, WORKER_HINT, live_workers, robots_waits, stalled
from rqcrawl.parse.urls import host_of


def failure_reason(reason: str, status: int | None) -> str:
    """One short, stable word per kind of failure (`http_404`, `http_5xx`, `timeout`, `dns`,
    `connection_refused`, `tls`, `bad_response`...), for the counters, `status` and
    `rqcrawl failures`: a FetchError's own reason (fetch.clients.base.failure_kind for connection
    errors) is too fine for 5xx and timeouts."""
    if reason == "retry_after_too_long":  # a 429/503 asking to wait over max_retry_after
        return reason
    if status is not None and status >= 500:
        return "http_5xx"
    if status is not None and status >= 400:
        return f"http_{status}"
    if reason in ("timeout", "download_timeout"):
        return "timeout"
    return reason


def status(redis: Redis, crawl: str) -> dict | None:
    """The crawl's state and counters, or None when Redis holds no such crawl.

    `finished` means nothing of the crawl is waiting, queued, parked or running, and no record
    is held back (see rqcrawl.frontier.state for why that is exact). A
    crawl with revisits is then `idle` until its next visit (from the task table), never finished.
    A crawl over several shards is read from all of them (from any one): it is finished when
    they all are and no link waits to go from one to another (levels.settled).
    """
    cfg = configs.load(redis, crawl, fresh=True)
    if cfg is None:
        return None
    states = [Frontier(conn, crawl, cfg) for conn in all_shards(redis, crawl)]
    snap = combined([s.snapshot() for s in states])
    now = time.time()
    left = snap.in_flight or snap.held or snap.held_back or snap.outbox
    done = not left and (len(states) == 1 or settled(states))
    over = done and not cfg.revisit  # a crawl with revisits goes on while idle
    seen = host_readings(states, cfg, snap, now, done)
    hosts = host_rows(states, cfg, snap, seen)
    robots = robots_waits(states, cfg, sorted(seen.deferred_until), now)
    bloom = snap.bloom
    waiting = len(snap.in_flight) - snap.deferred
    thin = thin_crawl(snap, cfg) if over and keys.CANCELLED_AT not in snap.counters else None
    workers = live_workers(states) if not done else []
    halted = keys.PAUSED_AT in snap.counters or keys.CANCELLED_AT in snap.counters
    stall = None if done or halted else stalled(states, cfg, snap, hosts, len(workers), now)
    undelivered = [s.undelivered() for s in states]
    return {
        "crawl": crawl,
        "shards": len(states),
        "state": state(snap.counters, done, bool(cfg.revisit)),
        **counts(snap),
        **depth_status(cfg, snap, done),
        "links_dropped": snap.family(keys.LINKS),
        **documents(snap),
        **speed(snap, now, over),
        "eta_s": 0.0 if done else eta(hosts, len(workers), stall),
        "workers": len(workers),
        "stall": stall,
        "hosts": hosts[:HOSTS_SHOWN],
        "robots_waits": robots,
        "host_count": len(hosts),
        "bytes": snap.count(keys.BYTES),
        "fetch_latency": latency(snap),
        "bloom_fill_ratio": bloom["fill_ratio"],
        "bloom_false_positive_rate": bloom["estimated_false_positive_rate"],
        "bloom": bloom,
        **revisit_status(crawl, cfg, snap),
        "thin_crawl": thin,
        "undelivered": sum(records for records, _ in undelivered),
        "undelivered_bytes": sum(size for _, size in undelivered),
        "warnings": bloom_warnings(bloom)
        + (bound_warnings(crawl, cfg, undelivered) if not done else [])
        + ([thin] if thin else [])
        + (forked_warnings() if snap.forked else [])
        + (warnings(redis) if not done else [])
        + ([stall["message"]] if stall else [])
        + (idle_warnings(snap.counters, waiting) if not done and not stall else []),
    }


def counts(snap: Snapshot) -> dict:
    """The crawl's URLs by what became of them, and those not ended yet."""
    skipped = snap.family(keys.SKIPPED)
    return {
        "admitted": snap.count(keys.ADMITTED),
        "fetched": snap.count(keys.FETCHED),
        "failed": snap.count(keys.FAILED),
        "failed_by_reason": snap.family(keys.FAILED_BY),
        "skipped": skipped,
        "skipped_total": sum(skipped.values()),
        "retries": snap.count(keys.RETRIES),
        "hook_errors": snap.count(keys.HOOK_ERRORS),
        "recovered": snap.count(keys.RECOVERED),
        "dropped": snap.count(keys.DROPPED),
        "in_flight": len(snap.in_flight),
        "deferred": snap.deferred,
        "held": snap.held,
    }


def depth_status(cfg: config.CrawlConfig, snap: Snapshot, done: bool) -> dict:
    """How deep the crawl is: with exact depth, the settled level (every level once nothing
    is left); none with first-found depth."""
    return {
        "exact_depth": cfg.exact_depth,
        "level": (cfg.max_depth if done else min(snap.count(keys.LEVEL), cfg.max_depth))
        if cfg.exact_depth
        else None,
        "held_back": snap.held_back,
        "max_depth": cfg.max_depth,
    }


def documents(snap: Snapshot) -> dict:
    """The sitemaps read, and what pages load, archived with them (rqcrawl.frontier.requisites)."""
    return {
        "sitemaps": {
            "read": snap.count(keys.SITEMAPS),
            "urls": snap.count(keys.SITEMAP_URLS),
            "lastmod_due": snap.count(keys.SITEMAP_LASTMOD),
            "problems": snap.family(keys.SITEMAP_PROBLEMS),
        },
        "requisites": {
            "admitted": snap.count(keys.REQUISITES),
            "archived": snap.count(keys.REQUISITES_ARCHIVED),
            "bytes": snap.count(keys.REQUISITE_BYTES),
            "cut": snap.count(keys.REQUISITES_CUT),
            "problems": snap.family(keys.REQUISITE_PROBLEMS),
        },
    }


def speed(snap: Snapshot, now: float, over: bool) -> dict:
    """Time and pages per second since the start and lately; an `over` crawl's up to its
    last end."""
    started = snap.counters.get(keys.STARTED_AT, now)
    end = snap.counters.get(keys.LAST_AT, started) if over else now
    fetched = snap.count(keys.FETCHED)
    recent = recent_rate(snap.family(keys.RATE), started, end)  # a finished crawl's last
    return {
        "elapsed_s": round(end - started, 3),
        "pages_per_s": round(fetched / (end - started), 2) if end > started else 0.0,
        "recent_pages_per_s": round(recent, 2),
    }


# Counters of several shards that are not added up: the earliest, the latest, the lowest.
_EARLIEST = (keys.STARTED_AT, keys.PAUSED_AT, keys.CANCELLED_AT, keys.PURGING_AT)
_LATEST = (keys.LAST_AT, keys.LAST_CLAIM_AT)


def combined(snaps: list[Snapshot]) -> Snapshot:
    """The snapshots of a crawl's shards as one: counts added up, the crawl's level the
    lowest shard's, its start the earliest, its last end the latest; the Bloom filter shown
    is the fullest shard's (each shard has one of bloom_capacity)."""
    if len(snaps) == 1:
        return snaps[0]
    counters: dict[str, int | float] = {}
    for snap in snaps:
        for name, value in snap.counters.items():
            if name in _EARLIEST:
                counters[name] = min(counters.get(name, value), value)
            elif name in _LATEST:
                counters[name] = max(counters.get(name, value), value)
            else:
                counters[name] = counters.get(name, 0) + value
    counters[keys.LEVEL] = min(snap.count(keys.LEVEL) for snap in snaps)
    counters[keys.SETTLED] = min(snap.count(keys.SETTLED) for snap in snaps)
    counters.pop(keys.SHARD, None)
    return Snapshot(
        counters=counters,
        in_flight=[url for snap in snaps for url in snap.in_flight],
        held=sum(snap.held for snap in snaps),
        deferred=sum(snap.deferred for snap in snaps),
        hosts={host: n for snap in snaps for host, n in snap.hosts.items()},
        pace={host: p for snap in snaps for host, p in snap.pace.items()},
        forked=any(snap.forked for snap in snaps),
        bloom=max((snap.bloom for snap in snaps), key=lambda b: b["fill_ratio"]),
        held_back=sum(snap.held_back for snap in snaps),
        outbox=sum(snap.outbox for snap in snaps),
    )


def revisit_status(crawl: str, cfg: config.CrawlConfig, snap: Snapshot) -> dict:
    """A crawl with revisits: its interval, URLs readmitted so far, known to the task table,
    due now / within the next hour / day, and the time of the next visit."""
    if not cfg.revisit:
        return {"revisit_s": 0.0}
    from rqcrawl.frontier.tasks import (
        TaskTable,  # SQLAlchemy only for crawls with revisits (see frontier)
    )

    table = TaskTable(cfg.db)
    seen = {"revisit_s": cfg.revisit, "revisits": snap.count(keys.REVISITS), "table_error": None}
    try:
        return seen | {
            "known": table.known(crawl),
            "due": table.due_counts(crawl),
            "next_visit_at": table.next_visit(crawl),
        }
    except TableUnavailable as exc:  # the crawl waits for it (rqcrawl.frontier.outage): say so
        return seen | {"known": None, "due": None, "next_visit_at": None, "table_error": str(exc)}


def recent_rate(buckets: dict[str, int], started: float, now: float) -> float:
    """Pages per second fetched over the last RECENT seconds (or since the start, if later),
    from the rate buckets (pages by bucket number); the current one counts for the part of it
    that has passed."""
    first = int(now) // RATE_BUCKET - RECENT // RATE_BUCKET
    pages = sum(n for b, n in buckets.items() if int(b) >= first)
    since = max(first * RATE_BUCKET, started)
    return pages / (now - since) if now > since else 0.0


@dataclass
class HostReadings:
    """What host_rows reads besides the snapshot, at `now`: the delays in force and their
    source (host_delays), the time between a host's URLs' ends lately (observed_pace), and
    when its deferred URLs are due."""

    now: float
    delays: dict[str, tuple[float, str]] = field(default_factory=dict)
    observed: dict[str, list[float]] = field(default_factory=dict)
    deferred_until: dict[str, float] = field(default_factory=dict)


def host_readings(
    states: list[Frontier],
    cfg: config.CrawlConfig,
    snap: Snapshot,
    now: float,
    done: bool = False,
) -> HostReadings:
    """The readings of `status` and `hosts` (no observed pace for a crawl that is done)."""
    return HostReadings(
        now,
        observed=observed_pace(states, now) if not done else {},
        deferred_until={h: t for s in states for h, t in s.host_facts([]).deferred_until.items()},
        delays=host_delays(states, cfg, snap),
    )


def host_rows(
    states: list[Frontier],
    cfg: config.CrawlConfig,
    snap: Snapshot,
    seen: HostReadings,
    shown: int = HOSTS_SHOWN,
) -> list[dict]:
    """Per host: URLs admitted, fetched, failed, skipped, remaining, of which in flight and
    held, requests running now (for the first `shown`), when its next request may start, the
    delay in force and where it comes from (`seen.delays`: host_delays; else the setting), its
    pace (host_pace, or the age of a request running longer; or the time between its URLs'
    ends lately, `seen.observed`, if longer: the jobs' own latency) and the time its remaining
    URLs need at that pace; the hosts with URLs in flight and the most time left first."""
    now = seen.now
    flying = Counter(host_of(sitemaps.target(url)) for url in snap.in_flight)
    rows = [host_row(host, n, flying[host], cfg, snap, seen) for host, n in snap.hosts.items()]
    rows.sort(key=_urgency)
    head = rows[:shown]
    per_shard = [s.running_requests([r["host"] for r in head]) for s in states]
    running = [sum(column) for column in zip(*per_shard, strict=True)]
    for r, n in zip(head, running, strict=True):
        r["running"] = n
        if n:  # a request running longer than the host's mean so far: the pace is slower
            ready = snap.pace.get(r["host"], HostPace(ready=now)).ready  # after its last turn
            _slower(r, now - ready, cfg.host_concurrency)
    rows.sort(key=_urgency)
    return rows


def host_row(
    host: str,
    n: dict[str, int],
    flying: int,
    cfg: config.CrawlConfig,
    snap: Snapshot,
    seen: HostReadings,
) -> dict:
    """One host's row of host_rows, of its counters `n` and its URLs in flight (`flying`)."""
    in_force = snap.pace.get(host, HostPace())  # its pace: slowed down by its answers?
    delay, source = seen.delays.get(host, (cfg.delay, "setting"))
    if in_force.delay > delay:
        delay, source = in_force.delay, in_force.why
    request_s, per_url = host_pace(n, in_force.fetch_s)
    url_s = url_seconds(request_s, per_url, delay, cfg.host_concurrency)
    url_s = paced(url_s, seen.observed.get(host, []))
    remaining = max(0, n.get(keys.ADMITTED, 0) - _ended(n))
    return {
        "host": host,
        "admitted": n.get(keys.ADMITTED, 0),
        "fetched": n.get(keys.FETCHED, 0),
        "failed": n.get(keys.FAILED, 0),
        "skipped": n.get(keys.HOST_SKIPPED, 0),
        "remaining": remaining,
        "in_flight": flying,
        "held": max(0, remaining - flying),
        "next_in_s": round(max(0.0, in_force.ready - seen.now), 3),
        "delay_s": delay,
        "delay_source": source,
        "request_s": round(request_s, 3),
        "requests_per_url": round(per_url, 3),
        "url_s": round(url_s, 3),
        "eta_s": round(host_eta(remaining, url_s, seen.deferred_until.get(host), seen.now), 1),
    }


def _urgency(row: dict) -> tuple:
    """The hosts with URLs in flight first (where the crawl is now), then those with the
    most time left."""
    return -row["in_flight"], -row["eta_s"], -row["remaining"], row["host"]


def observed_pace(states: list[Frontier], now: float) -> dict[str, list[float]]:
    """Per host, the seconds between two ends of its URLs over the last RECENT seconds (of
    the newest RECENT_ENDS records per shard): what a host's URLs really take, the fleet's
    latency (dispatch, deferrals) included."""
    ends: dict[str, list[float]] = {}
    for s in states:
        for at, url in s.recent_ends(now - RECENT, RECENT_ENDS):
            ends.setdefault(host_of(sitemaps.target(url)), []).append(at)
    return {h: [b - a for a, b in itertools.pairwise(sorted(t))] for h, t in ends.items()}


def paced(url_s: float, gaps: list[float]) -> float:
    """A host's seconds per URL: its model's (`url_s`), or the mean time between its URLs'
    ends lately if longer (at least 2 gaps), each gap counted as at most GAP_CAP x url_s:
    a level barrier or an empty window leaves a host idle for a while, which says nothing
    of its pace."""
    if len(gaps) < 2:
        return url_s
    return max(url_s, sum(min(g, GAP_CAP * url_s) for g in gaps) / len(gaps))


def host_eta(remaining: int, url_s: float, deferred_until: float | None, now: float) -> float:
    """A host's time left: its URLs at its pace, and at least until its latest deferral ends
    (a Retry-After, a retry's back-off) and that URL is fetched."""
    waited = deferred_until - now + url_s if deferred_until and deferred_until > now else 0.0
    return max(remaining * url_s, waited)


def _slower(row: dict, running_s: float, concurrency: int) -> None:
    """Take a running request's age as the host's request time if it is longer."""
    if running_s > row["request_s"]:
        row["request_s"] = round(running_s, 3)
        url_s = url_seconds(running_s, row["requests_per_url"], row["delay_s"], concurrency)
        row["url_s"] = round(url_s, 3)
        row["eta_s"] = max(row["eta_s"], round(row["remaining"] * url_s, 1))


def host_pace(counts: dict[str, int], fetch_s: float) -> tuple[float, float]:
    """(seconds a request to the host takes, requests per URL) from what its ended URLs
    measured: their requests' mean duration, timeouts included (before any has ended: its
    smoothed fetch time, `fetch_s`), and their attempts (retries)."""
    timed = counts.get(keys.HOST_TIMED, 0)
    requests = timed + counts.get(keys.HOST_RETRIED, 0)
    if requests:
        request_s = counts.get(keys.HOST_BUSY_MS, 0) / 1000 / requests
    else:
        request_s = fetch_s
    return request_s, requests / timed if timed else 1.0


def url_seconds(request_s: float, per_url: float, delay: float, concurrency: int) -> float:
    """Seconds per URL of a host at the politeness pace: the gate starts a request `delay`
    after the previous start and after the previous end (politeness.py), so one request
    holds the host for its duration + delay, and `concurrency` of them overlap at most,
    started `delay` apart."""
    return per_url * max(delay, (request_s + delay) / concurrency)


def host_delays(
    states: list[Frontier], cfg: config.CrawlConfig, snap: Snapshot
) -> dict[str, tuple[float, str]]:
    """The delay in force and its source (delay_in_force) of the hosts with URLs in flight
    and of the DELAYS_READ others with the most URLs left, from their sites' robots.txt
    verdicts on their shard (a verdict holds the whole file: not read for every host of a
    broad crawl; the others count at the `delay` setting)."""
    flying = {host_of(sitemaps.target(url)) for url in snap.in_flight}
    left = {h: n.get(keys.ADMITTED, 0) - _ended(n) for h, n in snap.hosts.items()}
    others = sorted((h for h, n in left.items() if n > 0 and h not in flying), key=left.get)
    read = sorted(flying) + others[::-1][:DELAYS_READ]
    sites = [f"{scheme}://{h}" for h in read for scheme in ("http", "https")]
    verdicts = {}
    for s in states:
        verdicts.update(s.robots_verdicts(sites))
    return {
        h: delay_in_force(cfg, verdicts.get(f"http://{h}") or verdicts.get(f"https://{h}"))
        for h in read
    }


def _ended(n: dict[str, int]) -> int:
    return n.get(keys.FETCHED, 0) + n.get(keys.FAILED, 0) + n.get(keys.HOST_SKIPPED, 0)


def delay_in_force(
    cfg: config.CrawlConfig, robots: dict | None, backoff: float = 0.0
) -> tuple[float, str]:
    """The delay between two requests to a host (as Politeness.delay_for decides it) and
    where it comes from: "setting" (`delay`), "crawl-delay" (the site's robots.txt, capped at
    max_crawl_delay) or "back-off": the hook for a pace that the host's answers slowed down
    (adaptive throttling passes the host's current delay as `backoff`)."""
    crawl_delay = Robots(**robots).crawl_delay(cfg.agent) if robots else None
    delay, source = cfg.delay, "setting"
    capped = min(crawl_delay or 0.0, cfg.max_crawl_delay)
    if capped > delay:
        delay, source = capped, "crawl-delay"
    if backoff > delay:
        delay, source = backoff, "back-off"
    return delay, source


def eta(hosts: list[dict], workers: int, stall: dict | None = None) -> float | None:
    """Seconds until the URLs admitted so far have ended: the slowest host at its pace
    (host_pace), or the requests left shared by the live workers if that takes longer
    (a deferred URL does not hold a worker: only the requests do). None when the crawl
    cannot move (a stall that needs a worker or a scheduler)."""
    if stall and stall["reason"] in STUCK:
        return None
    slowest = max((h["eta_s"] for h in hosts), default=0.0)
    work = sum(h["remaining"] * h["request_s"] for h in hosts)
    return round(max(slowest, work / workers if workers else 0.0), 1)


def latency(snap: Snapshot) -> dict:
    """The fetch-latency histogram: counts per upper bound (not cumulative), sum, count."""
    buckets = {str(b): 0 for b in LATENCY_BUCKETS} | {"inf": 0}
    buckets.update(snap.family(keys.LATENCY_LE))
    return {
        "buckets": buckets,
        "sum_s": snap.count(keys.LATENCY_MS) / 1000,
        "count": sum(buckets.values()),
    }


def forked_warnings() -> list[str]:
    return [
        "jobs of this crawl ran on forking RQ workers in the last minute (a stock `rq worker`):"
        " each job then pays a fork, the crawler's imports and new connections, 3-35x "
        f"slower in our runs; run `{WORKER_HINT}` instead"
    ]


OVER = ("finished", "cancelled")  # states in which no worker will touch the crawl again


def state(counters: dict, done: bool, revisits: bool = False) -> str:
    """`cancelled` for good; when nothing is left, `idle` (until its next visit) for a crawl
    with revisits, else `finished`; `paused` while halted with work left (see control.py);
    else `running`."""
    if keys.CANCELLED_AT in counters:
        return "cancelled"
    if done:
        return "idle" if revisits else "finished"
    return "paused" if keys.PAUSED_AT in counters else "running"


def warnings(redis: Redis) -> list[str]:
    """Conditions under which the crawl cannot progress by itself."""
    found = []
    memory = redis.info("memory")
    policy = memory.get("maxmemory_policy", "noeviction")
    if policy != "noeviction" and memory.get("maxmemory", 0):
        found.append(
            f"this Redis evicts keys when full (maxmemory-policy {policy}): it may drop crawl "
            "state and lose URLs; set maxmemory-policy noeviction"
        )
    return found


def bound_warnings(
    crawl: str, cfg: config.CrawlConfig, undelivered: list[tuple[int, int]]
) -> list[str]:
    """A shard whose records stream reached max_undelivered records or max_undelivered_bytes
    releases no URL (the bound that keeps Redis from filling with records nobody takes,
    rqcrawl.ops.follow). `undelivered`: each shard's records and bytes."""
    records = max((n for n, _ in undelivered), default=0)
    size = max((b for _, b in undelivered), default=0)
    if records >= cfg.max_undelivered:
        reached = f"{records} record(s)", f"max_undelivered = {cfg.max_undelivered}"
    elif size >= cfg.max_undelivered_bytes:
        reached = f"{size} bytes of records", f"max_undelivered_bytes = {cfg.max_undelivered_bytes}"
    else:
        return []
    return [
        f"held: {reached[0]} not yet delivered, the bound {reached[1]}; no new URL is "
        f"released until a follower takes them (`rqcrawl export {crawl} --follow -o DIR/`) "
        "or the bound is raised"
    ]


def idle_warnings(counters: dict, waiting: int) -> list[str]:
    """URLs released as RQ jobs (not deferred) while no worker started a job of the crawl
    for IDLE_WARN seconds: the workers are gone, stuck, or serve other queues."""
    last = counters.get(keys.LAST_CLAIM_AT, counters.get(keys.STARTED_AT, time.time()))
    idle = time.time() - last
    if waiting <= 0 or idle < IDLE_WARN or keys.PAUSED_AT in counters:
        return []
    return [
        f"{waiting} URL(s) in flight but no worker has started a job of this crawl for "
        f"{idle:.0f} s: are workers running on queue '{keys.QUEUE_NAME}'? (see their logs)"
    ]


THIN_CAUSES = (
    "likely causes: links out of scope (scope_hosts), refused by robots.txt or a budget, or "
    "dropped by link rules (see skipped and links dropped above), a nofollow directive, or "
    "pages whose links are not in <a href> (built by JavaScript, or not HTML); check the "
    "export's outlinks column"
)


def thin_crawl(snap: Snapshot, cfg: config.CrawlConfig) -> str | None:
    """Why a crawl that is over may not be a finished site: its fetched pages had no links
    at all, or its seeds had none, or no page beyond the seeds was fetched. A one-page crawl
    must not pass for a finished site (a site whose links the crawler cannot see ends the
    same way). None when the crawl went past its seeds, or was asked not to (max_depth 0)."""
    fetched, seeds = snap.count(keys.FETCHED), snap.count(keys.SEED_PAGES)
    if cfg.max_depth == 0 or not fetched:
        return None
    if not snap.count(keys.OUTLINKS):
        found = f"the {fetched} fetched page(s) had no links at all"
    elif seeds and not snap.count(keys.SEED_OUTLINKS):
        found = f"the seed page(s) had no links ({fetched} page(s) fetched)"
    elif seeds and fetched == seeds:
        found = (
            f"the seed page(s) had {snap.count(keys.SEED_OUTLINKS)} link(s) but no page "
            "beyond them was fetched"
        )
    else:
        return None
    return f"crawl over after {found}: {THIN_CAUSES}"


def bloom_warnings(bloom: dict) -> list[str]:
    """A filter filled past its capacity takes more new URLs for seen ones than asked, and
    skips them without a trace: say so, also once the crawl is over."""
    items = bloom["estimated_items"]  # -1: every bit is set, too many to estimate
    if bloom["kind"] == "native" or 0 <= items <= bloom["capacity"]:  # native ones grow
        return []
    held = f"about {items:,} URLs" if items >= 0 else "too many URLs to count"
    return [
        f"the Bloom filter holds {held}, past its bloom_capacity {bloom['capacity']:,}: about "
        f"{bloom['estimated_false_positive_rate']:.2%} of new URLs are taken for seen ones and "
        f"skipped (asked: {bloom['error_rate']:.2%}); give the next crawl a larger bloom_capacity"
    ]
