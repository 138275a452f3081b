"""A crawl's state and numbers, derived from counters that change atomically with admissions."""

from __future__ import annotations

import itertools
import socket
import time
from collections import Counter

from redis import Redis
from rq import Queue, Worker

from rqcrawl import config
from rqcrawl.defaults import (
    DELAYS_READ,
    GAP_CAP,
    HOSTS_SHOWN,
    IDLE_WARN,
    OVERDUE,
    RATE_BUCKET,
    RECENT,
    RECENT_ENDS,
)
from rqcrawl.fetch.politeness import pace_of
from rqcrawl.fetch.robots import Robots, patience
from rqcrawl.frontier import configs, keys, sitemaps
from rqcrawl.frontier.levels import settled
from rqcrawl.frontier.outage import TableUnavailable
from rqcrawl.frontier.state import LATENCY_BUCKETS, CrawlState, Snapshot, all_shards
from rqcrawl.parse.urls import host_of
from rqcrawl.processes import alive

# The recommended worker (runner.WORKER_CLASS; the runner imports this module).
WORKER_HINT = f"RQ_WORKER_CLASS=rqcrawl.workers.CrawlWorker rq worker {keys.QUEUE_NAME}"


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
    states = [CrawlState(conn, crawl, cfg) for conn in all_shards(redis, crawl)]
    snap = combined([s.snapshot() for s in states])
    now = time.time()
    in_flight = len(snap.in_flight)
    left = in_flight or snap.held or snap.held_back or snap.outbox
    done = not left and (len(states) == 1 or settled(states))
    over = done and not cfg.revisit  # a crawl with revisits goes on while idle
    started = snap.counters.get(keys.STARTED_AT, now)
    end = snap.counters.get(keys.LAST_AT, started) if over else now
    fetched = snap.count(keys.FETCHED)
    recent = recent_rate(snap.family(keys.RATE), started, end)  # a finished crawl's last
    pace = observed_pace(states, now) if not done else {}
    until = {h: t for s in states for h, t in s.host_facts([]).deferred_until.items()}
    delays = host_delays(states, cfg, snap)
    hosts = host_rows(states, cfg, snap, now, delays, observed=pace, deferred_until=until)
    robots = robots_waits(states, cfg, sorted(until), now)
    skipped = snap.family(keys.SKIPPED)
    bloom = snap.bloom
    waiting = in_flight - snap.deferred
    thin = thin_crawl(snap, cfg) if over and keys.CANCELLED_AT not in snap.counters else None
    workers = live_workers(states) if not done else []
    halted = keys.PAUSED_AT in snap.counters or keys.CANCELLED_AT in snap.counters
    stall = None if done or halted else stalled(states, cfg, snap, hosts, len(workers), now)
    undelivered = [s.undelivered() for s in states]
    return {
        "crawl": crawl,
        "shards": len(states),
        "state": state(snap.counters, done, bool(cfg.revisit)),
        "admitted": snap.count(keys.ADMITTED),
        "fetched": fetched,
        "failed": snap.count(keys.FAILED),
        "failed_by_reason": snap.family(keys.FAILED_BY),
        "skipped": skipped,
        "skipped_total": sum(skipped.values()),
        "retries": snap.count(keys.RETRIES),
        "hook_errors": snap.count(keys.HOOK_ERRORS),
        "recovered": snap.count(keys.RECOVERED),
        "dropped": snap.count(keys.DROPPED),
        "in_flight": in_flight,
        "deferred": snap.deferred,
        "held": snap.held,
        "exact_depth": cfg.exact_depth,
        # the settled level (every level once nothing is left); none with first-found depth
        "level": (cfg.max_depth if done else min(snap.count(keys.LEVEL), cfg.max_depth))
        if cfg.exact_depth
        else None,
        "held_back": snap.held_back,
        "max_depth": cfg.max_depth,
        "links_dropped": snap.family(keys.LINKS),
        "sitemaps": {
            "read": snap.count(keys.SITEMAPS),
            "urls": snap.count(keys.SITEMAP_URLS),
            "lastmod_due": snap.count(keys.SITEMAP_LASTMOD),
            "problems": snap.family(keys.SITEMAP_PROBLEMS),
        },
        "requisites": {  # what pages load, archived with them (rqcrawl.frontier.requisites)
            "admitted": snap.count(keys.REQUISITES),
            "archived": snap.count(keys.REQUISITES_ARCHIVED),
            "bytes": snap.count(keys.REQUISITE_BYTES),
            "cut": snap.count(keys.REQUISITES_CUT),
            "problems": snap.family(keys.REQUISITE_PROBLEMS),
        },
        "elapsed_s": round(end - started, 3),
        "pages_per_s": round(fetched / (end - started), 2) if end > started else 0.0,
        "recent_pages_per_s": round(recent, 2),
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


def host_rows(
    states: list[CrawlState],
    cfg: config.CrawlConfig,
    snap: Snapshot,
    now: float,
    delays: dict[str, tuple[float, str]] | None = None,
    shown: int = HOSTS_SHOWN,
    observed: dict[str, list[float]] | None = None,
    deferred_until: dict[str, float] | None = None,
) -> list[dict]:
    """Per host: URLs admitted, fetched, failed, skipped, remaining, of which in flight and
    held, requests running now (for the first `shown`), when its next request may start, the
    delay in force and where it comes from (`delays`: host_delays; else the setting), its
    pace (host_pace, or the age of a request running longer; or the time between its URLs'
    ends lately, `observed`, if longer: the jobs' own latency) and the time its remaining
    URLs need at that pace; the hosts with URLs in flight and the most time left first."""
    delays = delays or {}
    flying = Counter(host_of(sitemaps.target(url)) for url in snap.in_flight)
    rows = []
    for host, n in snap.hosts.items():
        gate = snap.pace.get(host, ())
        in_force = pace_of(gate, cfg)  # the host's pace: slowed down by its answers?
        delay, source = delays.get(host, (cfg.delay, "setting"))
        if in_force.delay > delay:
            delay, source = in_force.delay, in_force.why
        request_s, per_url = host_pace(n, in_force.fetch_s)
        url_s = url_seconds(request_s, per_url, delay, cfg.host_concurrency)
        url_s = paced(url_s, (observed or {}).get(host, []))
        remaining = max(0, n.get(keys.ADMITTED, 0) - _ended(n))
        rows.append(
            {
                "host": host,
                "admitted": n.get(keys.ADMITTED, 0),
                "fetched": n.get(keys.FETCHED, 0),
                "failed": n.get(keys.FAILED, 0),
                "skipped": n.get(keys.HOST_SKIPPED, 0),
                "remaining": remaining,
                "in_flight": flying[host],
                "held": max(0, remaining - flying[host]),
                "next_in_s": round(max(0.0, in_force.ready - now), 3),
                "delay_s": delay,
                "delay_source": source,
                "request_s": round(request_s, 3),
                "requests_per_url": round(per_url, 3),
                "url_s": round(url_s, 3),
                "eta_s": round(
                    host_eta(remaining, url_s, (deferred_until or {}).get(host), now), 1
                ),
            }
        )
    rows.sort(key=_urgency)
    head = rows[:shown]
    per_shard = [s.running_requests([r["host"] for r in head]) for s in states]
    running = [sum(column) for column in zip(*per_shard, strict=True)]
    for r, n in zip(head, running, strict=True):
        r["running"] = n
        if n:  # a request running longer than the host's mean so far: the pace is slower
            ready = snap.pace.get(r["host"], (now,))[0]  # it started after its last turn
            _slower(r, now - ready, cfg.host_concurrency)
    rows.sort(key=_urgency)
    return rows


def _urgency(row: dict) -> tuple:
    """The hosts with URLs in flight first (where the crawl is now), then those with the
    most time left."""
    return -row["in_flight"], -row["eta_s"], -row["remaining"], row["host"]


def observed_pace(states: list[CrawlState], now: float) -> dict[str, list[float]]:
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
    timed, requests = counts.get(keys.HOST_TIMED, 0), counts.get(keys.HOST_REQUESTS, 0)
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
    states: list[CrawlState], cfg: config.CrawlConfig, snap: Snapshot
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


def robots_waits(
    states: list[CrawlState], cfg: config.CrawlConfig, hosts: list[str], now: float
) -> list[dict]:
    """The hosts (of `hosts`: those with parked URLs) whose pages wait for their unavailable
    robots.txt: since when, its asks and last error, the next ask, and when the pages fail
    at the latest (the first failed ask after robots_patience; after robots_patience_idle
    once they are all the crawl has left), in seconds from `now`."""
    sites = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    verdicts = {}
    for s in states:
        verdicts.update(s.robots_verdicts(sites))
    waits = []
    for site, v in sorted(verdicts.items()):
        if v["kind"] != "unavailable":
            continue
        waits.append({
            "site": site,
            "down_s": round(max(0.0, now - v["since"]), 1),  # `now` read before the verdict
            "asks": v["attempts"],
            "error": v["error"],
            "next_ask_in_s": round(max(0.0, v["retry_at"] - now), 1),
            "gives_up_in_s": round(max(0.0, v["since"] + patience(cfg) - now), 1),
            "idle_gives_up_in_s": round(max(0.0, v["since"] + patience(cfg, True) - now), 1),
        })  # fmt: skip
    return waits


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


# Stalls after which the crawl cannot move by itself (its ETA is then unknown).
STUCK = ("no_worker", "unreleased", "silent")


def live_workers(states: list[CrawlState]) -> list[Worker]:
    """The RQ workers registered on the crawl's queue of every shard, but those of this
    machine whose process is gone (a killed worker stays registered for its worker_ttl,
    minutes; one elsewhere is trusted until then)."""
    here = socket.gethostname()
    found = []
    for s in states:
        for w in Worker.all(queue=Queue(keys.QUEUE_NAME, connection=s.redis)):
            if w.hostname != here or w.pid is None or alive(w.pid):
                found.append(w)
    return found


def stalled(
    states: list[CrawlState],
    cfg: config.CrawlConfig,
    snap: Snapshot,
    hosts: list[dict],
    workers: int,
    now: float,
) -> dict | None:
    """Why no URL ended for `stall_after` seconds although URLs wait, or None: no worker
    alive; deferred URLs overdue that no worker released; URLs queued in RQ but the
    workers alive start none and run no request; every URL in flight waiting for its time;
    every URL in flight of one host, whose pace holds the others back; else requests are
    running, slowly. {reason, since_s, message}."""
    waiting = sum(h["remaining"] for h in hosts)
    last = max(snap.count(keys.LAST_AT), snap.count(keys.STARTED_AT))
    since = now - last
    if not waiting or (workers and since < cfg.stall_after):
        return None  # (no worker at all is a fact, not a guess: said at once)
    reason, why = _stall_reason(states, cfg, snap, hosts, workers, now)
    head = (
        f"stalled: no URL ended for {since:.0f} s although {waiting} wait: "
        if workers
        else f"{waiting} URL(s) wait and nothing serves them: "
    )
    return {"reason": reason, "since_s": round(since, 1), "message": head + why}


def _stall_reason(
    states: list[CrawlState],
    cfg: config.CrawlConfig,
    snap: Snapshot,
    hosts: list[dict],
    workers: int,
    now: float,
) -> tuple[str, str]:
    if not workers:
        return "no_worker", (
            f"no worker is alive on queue '{keys.QUEUE_NAME}'; start one: {WORKER_HINT}"
        )
    late = sum(s.overdue(now - OVERDUE) for s in states)
    if late:
        return "unreleased", (
            f"{late} host(s) or parked URL(s) are overdue and no worker released them (a "
            "stock worker's waker job is gone, or every worker is busy); `rqcrawl status` "
            "releases them now, and the recommended worker's release thread always does: "
            f"{WORKER_HINT}"
        )
    running = sum(h.get("running", 0) for h in hosts)
    queued = len(snap.in_flight) - snap.deferred - running
    claimed = snap.count(keys.LAST_CLAIM_AT) or snap.count(keys.STARTED_AT)
    if queued > 0 and not running and now - claimed >= cfg.stall_after:
        return "silent", (
            f"{workers} worker(s) alive but none started a job of this crawl for "
            f"{now - claimed:.0f} s and no request is running: busy with other queues' jobs, "
            "or stuck? (`rq info`, the workers' logs)"
        )
    if not queued and not running:
        due = min(filter(None, (s.next_due() for s in states)), default=now)
        return "deferred", (
            f"every URL waits for its time (a retry, robots.txt or its host's pace); the "
            f"next is due in {max(0.0, due - now):.0f} s: `rqcrawl inspect`, `rqcrawl hosts`"
        )
    busy = [h for h in hosts if h["in_flight"]]
    if len(busy) == 1:
        h = busy[0]
        others = sum(r["remaining"] for r in hosts if r is not h)
        held = f"; {others} URL(s) of other hosts wait for their own turn" if others else ""
        return "one_host", (
            f"every URL in flight is of {h['host']}, which takes {h['url_s']:.1f} s per URL "
            f"(requests of {h['request_s']:.1f} s, delay {h['delay_s']:g} s from "
            f"{h['delay_source']}){held}: `rqcrawl hosts` shows it"
        )
    return "slow", "jobs start but their requests take long: `rqcrawl hosts` shows the pace"


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


def bloom_line(bloom: dict) -> str:
    """The filter in use and how full it is (rqcrawl.frontier.bloom)."""
    rate = f"est. false-positive rate {bloom['estimated_false_positive_rate']:.3g}"
    if bloom["kind"] == "native":
        return (
            f"native (BF.*): {bloom['estimated_items']:,} URLs of capacity "
            f"{bloom['capacity']:,} in {bloom['filters']} filter(s), {bloom['bytes']:,} bytes, "
            + rate
        )
    return f"lua: fill {bloom['fill_ratio']:.6f}, {rate}"


def render(s: dict) -> str:
    """Human-readable status, one fact per line."""
    dropped = ", ".join(f"{k} {v}" for k, v in sorted(s["links_dropped"].items())) or "none"
    return "\n".join(
        [
            f"crawl      {s['crawl']}: {s['state']}"
            + (f" (over {s['shards']} shards)" if s["shards"] > 1 else "")
            + (f" ({s['dropped']} URLs dropped)" if s["state"] == "cancelled" else "")
            + (f" ({next_visit(s)})" if s["state"] == "idle" else ""),
            *revisit_lines(s),
            f"admitted   {s['admitted']}",
            f"fetched    {s['fetched']} ({s['bytes']:,} bytes)",
            f"failed     {s['failed']}" + (f" ({reasons(s)})" if s["failed"] else ""),
            f"skipped    {s['skipped_total']} ({skip_reasons(s) or 'none'})",
            f"retries    {s['retries']} (+{s['recovered']} jobs recovered from dead workers)",
            f"in flight  {s['in_flight']} (queued, scheduled, running or deferred; "
            f"{s['deferred']} deferred for politeness)",
            *depth_lines(s),
            f"links      dropped: {dropped}",
            f"sitemaps   {sitemap_line(s['sitemaps'])}",
            f"hook       {s['hook_errors']} error(s)",
            f"speed      {s['pages_per_s']} pages/s over {s['elapsed_s']} s, "
            f"{s['recent_pages_per_s']} pages/s in "
            + (f"its last {RECENT} s" if s["state"] in OVER else f"the last {RECENT} s"),
            f"eta        {duration(s['eta_s'])}"
            + (" for the URLs admitted so far" if s["eta_s"] is not None else ""),
            f"bloom      {bloom_line(s['bloom'])}",
            *host_table(s),
            *robots_lines(s),
            *(f"WARNING    {w}" for w in s["warnings"]),
        ]
    )


def sitemap_line(maps: dict) -> str:
    problems = ", ".join(f"{k} {v}" for k, v in sorted(maps["problems"].items())) or "none"
    due = (
        f", {maps['lastmod_due']} revisits brought forward by <lastmod>"
        if maps["lastmod_due"]
        else ""
    )
    return f"{maps['read']} read, {maps['urls']} URLs listed{due}; not read: {problems}"


def depth_lines(s: dict) -> list[str]:
    """Waiting URLs and the depth: the settled level and the records held back until it
    moves on (exact depth), or first-found depth."""
    if s["exact_depth"]:
        return [
            f"held       {s['held']} (admitted, waiting for their host's turn)",
            f"level      {level_line(s)}; {s['held_back']} record(s) held back until it moves on",
        ]
    return [
        f"held       {s['held']} (admitted, waiting for their host's turn)",
        f"depth      first found, up to max depth {s['max_depth']}",
    ]


def level_line(s: dict) -> str:
    """The settled level L in words: the pages of depth < L have ended, so every URL of
    depth <= L + 1 (no deeper than max depth) is known at its shortest depth
    (rqcrawl.frontier.levels); once nothing is left, every depth is done."""
    level, deepest = s["level"], s["max_depth"]
    if s["state"] in ("finished", "idle"):
        return f"every depth done, 0 to max depth {deepest}"
    doing = "cancelled at" if s["state"] == "cancelled" else "being crawled:"
    return (
        f"{doing} depth {level} of 0-{deepest} (the pages above it have ended; every URL "
        f"to depth {min(level + 1, deepest)} is at its shortest depth)"
    )


def depth_progress(s: dict) -> str:
    """The depth part of a progress line: the level being crawled, when there are levels."""
    if s["exact_depth"]:
        return f"depth {s['level']}/{s['max_depth']}"
    return f"max depth {s['max_depth']}"


def next_visit(s: dict) -> str:
    at = s["next_visit_at"]
    if at is None:
        return "no visit scheduled"
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))
    return f"next visit at {when}, in {duration(max(0.0, at - time.time()))}"


def revisit_lines(s: dict) -> list[str]:
    if not s["revisit_s"]:
        return []
    if s["table_error"]:
        return [f"revisits   every {duration(s['revisit_s'])}; {s['table_error']}"]
    due = s["due"]
    return [
        f"revisits   every {duration(s['revisit_s'])} (adaptive); {s['known']} URLs known, "
        f"{s['revisits']} revisits so far",
        f"due        {due['now']} now, {due['hour']} within an hour, {due['day']} within a day",
    ]


def reasons(s: dict) -> str:
    """`http_404 3, timeout 1`: the failures by reason, most frequent first."""
    found = sorted(s["failed_by_reason"].items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{k} {v}" for k, v in found)


def skip_reasons(s: dict) -> str:
    """`robots_disallowed 1, redirected 2`: the skipped URLs by reason ("" if none)."""
    return ", ".join(f"{k} {v}" for k, v in sorted(s["skipped"].items()))


def skip_summary(s: dict) -> str:
    """`3 skipped (redirected 2, robots_disallowed 1)`: how many, and why."""
    why = skip_reasons(s)
    return f"{s['skipped_total']} skipped" + (f" ({why})" if why else "")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown: the crawl cannot move (see the warning)"
    minutes, sec = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{sec:02d}s" if hours else f"{minutes}m{sec:02d}s"


def host_table(s: dict) -> list[str]:
    """The hosts with the most time left (status's `hosts`), one aligned row each."""
    if not s["hosts"]:
        return []
    header = (
        "HOST", "ADMITTED", "FETCHED", "FAILED", "IN FLIGHT", "HELD", "RUNNING", "NEXT IN", "ETA"
    )  # fmt: skip
    rows = [header] + [
        (
            h["host"], str(h["admitted"]), str(h["fetched"]), str(h["failed"]),
            str(h["in_flight"]), str(h["held"]), str(h["running"]), f"{h['next_in_s']:.1f}s",
            duration(h["eta_s"]),
        )
        for h in s["hosts"]
    ]  # fmt: skip
    more = s["host_count"] - len(s["hosts"])
    title = f"hosts      {s['host_count']}" + (f" ({more} not shown)" if more > 0 else "")
    return [title, *("           " + line for line in aligned(rows))]


def robots_lines(s: dict) -> list[str]:
    """What the crawl waits for besides its hosts' pace: robots.txt files that do not
    answer, and until when at the latest."""
    return [
        f"robots.txt {w['site']} unavailable for {w['down_s']:.0f} s ({w['asks']} asks, "
        f"{w['error']}): asked again in {w['next_ask_in_s']:.0f} s; its pages fail at the "
        f"first failed ask after {w['gives_up_in_s']:.0f} s, after "
        f"{w['idle_gives_up_in_s']:.0f} s once they are all the crawl has left"
        for w in s["robots_waits"]
    ]


def aligned(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def summary(s: dict) -> str:
    """One line per refresh of `rqcrawl status --watch` when the output is not a terminal."""
    return (
        f"{s['crawl']}  {s['state']}  {s['fetched']}/{s['admitted']} fetched/admitted  "
        f"{s['pages_per_s']} pages/s ({s['recent_pages_per_s']} recent)  {s['failed']} failed  "
        f"{s['in_flight']} in flight  {s['held']} held  eta {duration(s['eta_s'])}"
    )


def table(rows: list[dict]) -> str:
    """`rqcrawl list`: one aligned row per crawl."""
    header = ("CRAWL", "STATE", "FETCHED/ADMITTED", "PAGES/S", "FAILED")
    cells = [header] + [
        (
            s["crawl"],
            s["state"],
            f"{s['fetched']}/{s['admitted']}",
            str(s["pages_per_s"]),
            f"{s['failed']} ({reasons(s)})" if s["failed"] else "0",
        )
        for s in rows
    ]
    return "\n".join(aligned(cells))
