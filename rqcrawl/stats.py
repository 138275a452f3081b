"""A crawl's state and numbers, derived from counters that change atomically with admissions."""

from __future__ import annotations

import time

from redis import Redis
from rq import Queue
from rq.registry import ScheduledJobRegistry
from rq.scheduler import RQScheduler

from . import config, keys
from .bloom import BloomFilter

OVERDUE = 10  # seconds a scheduled job may be late before `status` warns
IDLE_WARN = 60  # seconds URLs may wait in RQ with no job of the crawl started before a warning


def status(redis: Redis, crawl: str) -> dict | None:
    """The crawl's state and counters, or None when Redis holds no such crawl.

    `finished` means nothing of the crawl is held, queued, scheduled or running: the inflight
    hash and the held list are both empty (see frontier.py for why that is exact).
    """
    cfg = config.load(redis, crawl)
    if cfg is None:
        return None
    with redis.pipeline(transaction=False) as pipe:
        pipe.hgetall(keys.key(crawl, "counters"))
        pipe.hlen(keys.key(crawl, "inflight"))
        pipe.llen(keys.key(crawl, "held"))
        pipe.zcard(keys.key(crawl, "later"))
        raw, in_flight, held, deferred = pipe.execute()
    counters = {k.decode(): float(v) if b"." in v else int(v) for k, v in raw.items()}
    bloom = BloomFilter(
        redis, keys.key(crawl, "bloom"), cfg.bloom_capacity, cfg.bloom_error_rate
    ).stats()
    skipped = {k.split(":", 1)[1]: v for k, v in counters.items() if k.startswith("skipped:")}
    links = {k.split(":", 1)[1]: v for k, v in counters.items() if k.startswith("links:")}
    done = in_flight == 0 and held == 0
    started = counters.get("started_at", time.time())
    end = counters.get("last_at", started) if done else time.time()
    fetched = counters.get("fetched", 0)
    return {
        "crawl": crawl,
        "state": state(counters, done),
        "admitted": counters.get("admitted", 0),
        "fetched": fetched,
        "failed": counters.get("failed", 0),
        "skipped": skipped,
        "skipped_total": sum(skipped.values()),
        "retries": counters.get("retries", 0),
        "hook_errors": counters.get("hook_errors", 0),
        "recovered": counters.get("recovered", 0),
        "dropped": counters.get("dropped", 0),
        "in_flight": in_flight,
        "deferred": deferred,
        "held": held,
        "level": counters.get("level", 0),
        "max_depth": cfg.max_depth,
        "links_dropped": links,
        "elapsed_s": round(end - started, 3),
        "pages_per_s": round(fetched / (end - started), 2) if end > started else 0.0,
        "bloom_fill_ratio": bloom["fill_ratio"],
        "bloom_false_positive_rate": bloom["estimated_false_positive_rate"],
        "bloom": bloom,
        "warnings": bloom_warnings(bloom)
        + (warnings(redis) + idle_warnings(counters, in_flight - deferred) if not done else []),
    }


OVER = ("finished", "cancelled")  # states in which no worker will touch the crawl again


def state(counters: dict, done: bool) -> str:
    """`cancelled` for good; `finished` when nothing is left; `paused` while halted with work
    left (see control.py); else `running`."""
    if "cancelled_at" in counters:
        return "cancelled"
    if done:
        return "finished"
    return "paused" if "paused_at" in counters else "running"


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
    last = counters.get("last_claim_at", counters.get("started_at", time.time()))
    idle = time.time() - last
    if waiting <= 0 or idle < IDLE_WARN or "paused_at" in counters:
        return []
    return [
        f"{waiting} URL(s) in flight but no worker has started a job of this crawl for "
        f"{idle:.0f} s: are workers running on queue '{keys.QUEUE_NAME}'? (see their logs)"
    ]


def bloom_warnings(bloom: dict) -> list[str]:
    """A filter filled past its capacity takes more new URLs for seen ones than asked, and
    skips them without a trace: say so, also once the crawl is over."""
    items = bloom["estimated_items"]  # -1: every bit is set, too many to estimate
    if 0 <= items <= bloom["capacity"]:
        return []
    held = f"about {items:,} URLs" if items >= 0 else "too many URLs to count"
    return [
        f"the Bloom filter holds {held}, past its bloom_capacity {bloom['capacity']:,}: about "
        f"{bloom['estimated_false_positive_rate']:.2%} of new URLs are taken for seen ones and "
        f"skipped (asked: {bloom['error_rate']:.2%}); give the next crawl a larger bloom_capacity"
    ]


def render(s: dict) -> str:
    """Human-readable status, one fact per line."""
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(s["skipped"].items())) or "none"
    dropped = ", ".join(f"{k} {v}" for k, v in sorted(s["links_dropped"].items())) or "none"
    return "\n".join(
        [
            f"crawl      {s['crawl']}: {s['state']}"
            + (f" ({s['dropped']} URLs dropped)" if s["state"] == "cancelled" else ""),
            f"admitted   {s['admitted']}",
            f"fetched    {s['fetched']}",
            f"failed     {s['failed']}",
            f"skipped    {s['skipped_total']} ({skipped})",
            f"retries    {s['retries']} (+{s['recovered']} jobs recovered from dead workers)",
            f"in flight  {s['in_flight']} (queued, scheduled, running or deferred; "
            f"{s['deferred']} deferred for politeness)",
            f"held       {s['held']} (admitted, waiting for their level)",
            f"level      {s['level']} of max depth {s['max_depth']}",
            f"links      dropped: {dropped}",
            f"hook       {s['hook_errors']} error(s)",
            f"speed      {s['pages_per_s']} pages/s over {s['elapsed_s']} s",
            f"bloom      fill {s['bloom_fill_ratio']:.6f}, "
            f"est. false-positive rate {s['bloom_false_positive_rate']:.3g}",
            *(f"WARNING    {w}" for w in s["warnings"]),
        ]
    )


def summary(s: dict) -> str:
    """One line per refresh of `rqcrawl status --watch` when the output is not a terminal."""
    return (
        f"{s['crawl']}  {s['state']}  {s['fetched']}/{s['admitted']} fetched/admitted  "
        f"{s['pages_per_s']} pages/s  {s['failed']} failed  {s['in_flight']} in flight  "
        f"{s['held']} held"
    )


def table(rows: list[dict]) -> str:
    """`rqcrawl list`: one aligned row per crawl."""
    header = ("CRAWL", "STATE", "FETCHED/ADMITTED", "PAGES/S")
    cells = [header] + [
        (s["crawl"], s["state"], f"{s['fetched']}/{s['admitted']}", str(s["pages_per_s"]))
        for s in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )
