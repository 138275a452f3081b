"""A crawl's state and numbers, derived from counters that change atomically with admissions."""

from __future__ import annotations

import time
from collections import Counter

from redis import Redis
from rq import Queue
from rq.registry import ScheduledJobRegistry
from rq.scheduler import RQScheduler

from . import config, keys, sitemaps
from .levels import settled
from .shards import all_shards
from .state import LATENCY_BUCKETS, RATE_BUCKET, RECENT, CrawlState, Snapshot
from .urls import host_of

OVERDUE = 10  # seconds a scheduled job may be late before `status` warns
IDLE_WARN = 60  # seconds URLs may wait in RQ with no job of the crawl started before a warning
HOSTS_SHOWN = 10  # hosts in `status`, those with the most time left first

# Words in a connection error's message that tell what went wrong (requests and urllib3
# name the same failures differently across versions and platforms).
_CONNECTION_KINDS = (
    ("dns", ("name or service not known", "nodename nor servname", "name resolution",
             "failed to resolve", "getaddrinfo", "no address associated")),
    ("connection_refused", ("connection refused", "econnrefused", "errno 111")),
    ("tls", ("ssl", "certificate", "tls")),
    ("connection_reset", ("connection reset", "connection aborted", "remote end closed")),
)  # fmt: skip


def failure_reason(reason: str, message: str, status: int | None) -> str:
    """One short, stable word per kind of failure (`http_404`, `http_5xx`, `timeout`, `dns`,
    `connection_refused`, `tls`...), for the counters, `status` and `rqcrawl failures`: a
    FetchError's own reason is too fine for 5xx and too coarse for connection errors."""
    if status is not None and status >= 500:
        return "http_5xx"
    if status is not None and status >= 400:
        return f"http_{status}"
    if reason in ("timeout", "download_timeout"):
        return "timeout"
    if reason in ("connection", "read_error"):
        text = message.lower()
        for kind, words in _CONNECTION_KINDS:
            if any(w in text for w in words):
                return kind
    return reason


def status(redis: Redis, crawl: str) -> dict | None:
    """The crawl's state and counters, or None when Redis holds no such crawl.

    `finished` means nothing of the crawl is held, queued, scheduled or running: the inflight
    hash and the held list are both empty (see rqcrawl.state for why that is exact). A crawl
    with revisits is then `idle` until its next visit (from the task table), never finished.
    A crawl over several shards is read from all of them (from any one): it is finished when
    they all are and no link waits to go from one to another (levels.settled).
    """
    cfg = config.load(redis, crawl, fresh=True)
    if cfg is None:
        return None
    states = [CrawlState(conn, crawl, cfg) for conn in all_shards(redis, crawl)]
    snap = combined([s.snapshot() for s in states])
    now = time.time()
    in_flight = len(snap.in_flight)
    done = in_flight == 0 and snap.held == 0 and (len(states) == 1 or settled(states))
    over = done and not cfg.revisit  # a crawl with revisits goes on while idle
    started = snap.counters.get(keys.STARTED_AT, now)
    end = snap.counters.get(keys.LAST_AT, started) if over else now
    fetched = snap.count(keys.FETCHED)
    recent = recent_rate(snap.family(keys.RATE), started, now) if not over else 0.0
    hosts = host_rows(states, cfg, snap, now)
    remaining = sum(h["remaining"] for h in hosts)
    skipped = snap.family(keys.SKIPPED)
    bloom = snap.bloom
    waiting = in_flight - snap.deferred
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
        "level": snap.count(keys.LEVEL) if cfg.exact_depth else None,  # no levels: no barrier
        "max_depth": cfg.max_depth,
        "links_dropped": snap.family(keys.LINKS),
        "sitemaps": {
            "read": snap.count(keys.SITEMAPS),
            "urls": snap.count(keys.SITEMAP_URLS),
            "lastmod_due": snap.count(keys.SITEMAP_LASTMOD),
            "problems": snap.family(keys.SITEMAP_PROBLEMS),
        },
        "elapsed_s": round(end - started, 3),
        "pages_per_s": round(fetched / (end - started), 2) if end > started else 0.0,
        "recent_pages_per_s": round(recent, 2),
        "eta_s": eta(hosts, remaining, recent) if not done else 0.0,
        "hosts": hosts[:HOSTS_SHOWN],
        "host_count": len(hosts),
        "bytes": snap.count(keys.BYTES),
        "fetch_latency": latency(snap),
        "bloom_fill_ratio": bloom["fill_ratio"],
        "bloom_false_positive_rate": bloom["estimated_false_positive_rate"],
        "bloom": bloom,
        **revisit_status(crawl, cfg, snap),
        "warnings": bloom_warnings(bloom)
        + (forked_warnings() if snap.forked else [])
        + (warnings(redis) + idle_warnings(snap.counters, waiting) if not done else []),
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
    )


def revisit_status(crawl: str, cfg: config.CrawlConfig, snap: Snapshot) -> dict:
    """A crawl with revisits: its interval, URLs readmitted so far, known to the task table,
    due now / within the next hour / day, and the time of the next visit."""
    if not cfg.revisit:
        return {"revisit_s": 0.0}
    from .tasks import TaskTable  # SQLAlchemy only for crawls with revisits (see frontier)

    table = TaskTable(cfg.db)
    return {
        "revisit_s": cfg.revisit,
        "revisits": snap.count(keys.REVISITS),
        "known": table.known(crawl),
        "due": table.due_counts(crawl),
        "next_visit_at": table.next_visit(crawl),
    }


def recent_rate(buckets: dict[str, int], started: float, now: float) -> float:
    """Pages per second fetched over the last RECENT seconds (or since the start, if later),
    from the rate buckets (pages by bucket number); the current one counts for the part of it
    that has passed."""
    first = int(now) // RATE_BUCKET - RECENT // RATE_BUCKET
    pages = sum(n for b, n in buckets.items() if int(b) >= first)
    since = max(first * RATE_BUCKET, started)
    return pages / (now - since) if now > since else 0.0


def host_rows(
    states: list[CrawlState], cfg: config.CrawlConfig, snap: Snapshot, now: float
) -> list[dict]:
    """Per host: URLs admitted, fetched, failed, skipped, remaining, of which in flight and
    held, requests running now, when its next request may start, and the time its remaining
    URLs need at the politeness pace (remaining x spacing / host_concurrency); the hosts that
    dominate the time left first."""
    flying = Counter(host_of(sitemaps.target(url)) for url in snap.in_flight)
    rows = []
    for host, n in snap.hosts.items():
        ended = n.get(keys.FETCHED, 0) + n.get(keys.FAILED, 0) + n.get(keys.HOST_SKIPPED, 0)
        # booked is the last slot promised, not the next (politeness.py)
        ready, _, step = snap.pace.get(host, (0.0, 0.0, 0.0))
        spacing = max(step, cfg.delay)
        remaining = max(0, n.get(keys.ADMITTED, 0) - ended)
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
                "next_in_s": round(max(0.0, ready - now), 3),
                "eta_s": round(remaining * spacing / cfg.host_concurrency, 1),
            }
        )
    rows.sort(key=lambda r: (-r["eta_s"], -r["remaining"], r["host"]))
    shown = rows[:HOSTS_SHOWN]
    per_shard = [s.running_requests([r["host"] for r in shown]) for s in states]
    running = [sum(column) for column in zip(*per_shard, strict=True)]
    for r, n in zip(shown, running, strict=True):
        r["running"] = n
    return rows


def eta(hosts: list[dict], remaining: int, recent: float) -> float | None:
    """Seconds until the URLs admitted so far have ended: the slowest host at its politeness
    pace, or all of them at the recent rate, whichever is longer; None when nothing moves."""
    by_pace = max((h["eta_s"] for h in hosts), default=0.0)
    if remaining and not recent:
        return by_pace or None
    return round(max(by_pace, remaining / recent if recent else 0.0), 1)


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
        "slower in our runs; run `RQ_WORKER_CLASS=rqcrawl.worker.CrawlWorker rq worker crawl "
        "--with-scheduler` instead"
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
    registry = ScheduledJobRegistry(queue=Queue(keys.QUEUE_NAME, connection=redis))
    late = redis.zcount(registry.key, 0, time.time() - OVERDUE)
    if late and not redis.exists(RQScheduler.get_locking_key(keys.QUEUE_NAME)):
        found.append(
            f"{late} scheduled job(s) (retries, wake-ups) are overdue and no RQ scheduler "
            "is running: start a worker with --with-scheduler"
        )
    memory = redis.info("memory")
    policy = memory.get("maxmemory_policy", "noeviction")
    if policy != "noeviction" and memory.get("maxmemory", 0):
        found.append(
            f"this Redis evicts keys when full (maxmemory-policy {policy}): it may drop crawl "
            "state and lose URLs; set maxmemory-policy noeviction"
        )
    return found


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
    """The filter in use and how full it is (rqcrawl.bloom)."""
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
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(s["skipped"].items())) or "none"
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
            f"skipped    {s['skipped_total']} ({skipped})",
            f"retries    {s['retries']} (+{s['recovered']} jobs recovered from dead workers)",
            f"in flight  {s['in_flight']} (queued, scheduled, running or deferred; "
            f"{s['deferred']} deferred for politeness)",
            *depth_lines(s),
            f"links      dropped: {dropped}",
            f"sitemaps   {sitemap_line(s['sitemaps'])}",
            f"hook       {s['hook_errors']} error(s)",
            f"speed      {s['pages_per_s']} pages/s over {s['elapsed_s']} s, "
            f"{s['recent_pages_per_s']} pages/s in the last {RECENT} s",
            f"eta        {duration(s['eta_s'])} for the URLs admitted so far",
            f"bloom      {bloom_line(s['bloom'])}",
            *host_table(s),
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
    """Held URLs and the depth: by level with the level barrier, first-found without."""
    if s["exact_depth"]:
        return [
            f"held       {s['held']} (admitted, waiting for their level)",
            f"level      {s['level']} of max depth {s['max_depth']}",
        ]
    return [
        f"held       {s['held']} (admitted, waiting for room in the window)",
        f"depth      first found, up to max depth {s['max_depth']} (no level barrier)",
    ]


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


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown (nothing fetched lately)"
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
