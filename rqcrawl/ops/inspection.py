"""Where one URL of a crawl is and why (`rqcrawl inspect`), and every host's pace
(`rqcrawl hosts`): the questions of a user whose crawl seems stuck, answered from the same
state reads as `status` (rqcrawl.ops.stats), which this module builds on.
"""

from __future__ import annotations

import time

from redis import Redis
from rq.exceptions import NoSuchJobError
from rq.job import Job

from rqcrawl import config
from rqcrawl.defaults import HOSTS_LIMIT, RECORDS_SEARCHED
from rqcrawl.fetch.politeness import GateKeys
from rqcrawl.fetch.robots import site_of
from rqcrawl.frontier import configs, shards, sitemaps
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.shards import shard_map
from rqcrawl.frontier.state import all_shards
from rqcrawl.ops.stats import (
    combined,
    delay_in_force,
    host_readings,
    host_rows,
)
from rqcrawl.ops.statustext import aligned, duration
from rqcrawl.parse.urls import host_of


def url_status(redis: Redis, crawl: str, url: str) -> dict:
    """Where `url` is in crawl `crawl` and why, from the shard of its host (URLFrontier's
    GetURLStatus): `where` is held, queued, running, deferred, due, ended, seen or unknown;
    `why` says it in words. A crawl with revisits adds the URL's task-table row."""
    cfg = configs.load(redis, crawl, fresh=True)
    if cfg is None:
        raise LookupError(f"no crawl named {crawl!r} in this Redis")
    host = host_of(sitemaps.target(url))
    placed = shard_map(cfg)
    index = placed.index_of(host, GateKeys(cfg)(host)) if placed else 0
    conn = shards.connect(cfg.shards[index]) if placed else redis
    state = Frontier(conn, crawl, cfg)
    facts = state.url_facts(url, site_of(sitemaps.target(url)))
    now = time.time()
    out = {"crawl": crawl, "url": url, "host": host, "shard": index, "seen": facts.seen}
    if facts.entry is not None:
        out |= _in_flight(state, url, facts, now)
    elif facts.held is not None:
        priority, depth = facts.held
        out |= {
            "where": "held",
            "depth": depth,
            "priority": priority,
            "why": f"held at depth {depth}, priority {priority}: {_turn(facts, host, now)}"
            + (" (the crawl is paused)" if facts.paused else ""),
        }
    elif facts.held_back_at is not None:
        out |= {
            "where": "ended",
            "depth": facts.held_back_at,
            "why": f"ended at depth {facts.held_back_at}; its record waits until the crawl's "
            f"level ({facts.level}) is past depth {facts.held_back_at - 2}, when no shorter "
            "path can turn up",
        }
    else:
        out |= _not_in_flight(state, url, facts)
    if cfg.revisit:
        from rqcrawl.frontier.tasks import TaskTable  # SQLAlchemy only for crawls with revisits

        out["task"] = TaskTable(cfg.db).row(crawl, url)
    return out


def _turn(facts, host: str, now: float) -> str:
    """When a waiting URL's host takes it: its place in its host's queue, and the host's."""
    if facts.key_blocked:
        return f"its host {host} waits for the crawl's level ({facts.level}) to move on"
    if facts.key_ready_at is not None:
        return f"its host {host} takes a request in {max(0.0, facts.key_ready_at - now):.1f} s"
    return f"its host {host} is busy with other URLs (first in its queue go first)"


def _in_flight(state: Frontier, url: str, facts, now: float) -> dict:
    """A released URL: running (a live lease), deferred or due (in `later`), else queued."""
    entry = facts.entry
    job_id = entry.job_id(state.crawl, url)
    out = {
        "depth": entry.depth,
        "priority": entry.priority,
        "attempt": entry.attempt + 1,
        "turn": entry.turn,
        "job_id": job_id,
    }
    if facts.lease_until is not None and facts.lease_until > now:
        job = _job(state.redis, job_id)
        worker = (job or {}).get("worker_name") or "a worker"
        since = (job or {}).get("started_at")
        at = f" since {_clock(since.timestamp())}" if since else ""
        started = since.timestamp() if since else None
        return out | {
            "where": "running",
            "worker": worker,
            "started_at": started,
            "why": f"running on {worker}{at} (attempt {entry.attempt + 1})",
        }
    if facts.later_at is not None:
        until = facts.later_at
        kind, why = _deferral(state, url, facts)
        if until > now:
            return out | {
                "where": "deferred",
                "until": until,
                "because": kind,
                "why": f"deferred until {_clock(until)} (in {until - now:.1f} s): {why}",
            }
        waiting = (
            "by a recommended worker's release thread, the crawl's waker job (stock "
            "workers), or the next job a worker claims"
        )
        return out | {
            "where": "due",
            "until": until,
            "because": kind,
            "why": f"due since {_clock(until)} ({now - until:.0f} s ago; {why}), "
            f"to be released {waiting}",
        }
    job = _job(state.redis, job_id)
    if job is None:
        return out | {
            "where": "queued",
            "job_status": None,
            "why": "in flight but its RQ job is missing: the recovery pass "
            "(`rqcrawl status` runs it) queues it again",
        }
    status = job["status"]
    return out | {
        "where": "queued",
        "job_status": status,
        "why": f"queued in RQ (job {job_id}, {status}): waiting for a worker"
        + (" (the crawl is paused)" if facts.paused else ""),
    }


def _deferral(state: Frontier, url: str, facts) -> tuple[str, str]:
    """Why a URL waits in `later`: a retry (its error, back-off or Retry-After), its site's
    robots.txt (being fetched, or unavailable for now), else its host's politeness."""
    entry = facts.entry
    if entry.turn == 0 and entry.attempt > 0:
        return "retry", f"attempt {entry.attempt + 1}, " + (facts.retry_reason or "a retry")
    if facts.robots_fetching:
        return "robots", "its site's robots.txt is being fetched by another job"
    robots = facts.robots
    if (
        robots
        and robots.get("kind") == "unavailable"
        and robots.get("retry_at", 0) >= facts.later_at - 1
    ):
        return (
            "robots",
            f"its site's robots.txt is unavailable ({robots.get('error')}), tried again then",
        )
    host = host_of(sitemaps.target(url))
    delay, source = delay_in_force(state.cfg, robots)
    return (
        "politeness",
        f"politeness of {host} (delay {delay:g} s from {source}, one request at a time)",
    )


def _not_in_flight(state: Frontier, url: str, facts) -> dict:
    """An ended URL (its record), or one this shard does not hold."""
    found = state.ended_record(url, RECORDS_SEARCHED)
    if found is not None:
        detail = ", ".join(
            f"{k} {found[k]}" for k in ("status", "reason", "error") if found.get(k) is not None
        )
        attempts = found.get("attempts") or 0
        return {
            "where": "ended",
            "outcome": found.get("outcome"),
            "attempts": attempts,
            "record": found,
            "why": f"ended: {found.get('outcome')} after {attempts} attempt(s)"
            + (f" ({detail})" if detail else ""),
        }
    if facts.seen:
        return {
            "where": "seen",
            "why": "not in the crawl's state nor in its newest "
            f"{RECORDS_SEARCHED:,} records, but the Bloom filter has seen it (admitted "
            "long ago, or a false positive of the filter)",
        }
    return {
        "where": "unknown",
        "why": "unknown to this crawl: the Bloom filter has not seen it (not linked from a "
        "crawled page, refused by scope or rules before admission, or spelled otherwise)",
    }


def _job(redis: Redis, job_id: str) -> dict | None:
    """An RQ job's status, worker and start time, if it still exists."""
    try:
        job = Job.fetch(job_id, connection=redis)
    except NoSuchJobError:
        return None
    return {
        "status": str(job.get_status(refresh=False) or ""),
        "worker_name": job.worker_name,
        "started_at": job.started_at,
    }


def _clock(epoch: float) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(epoch))


def render_url(s: dict) -> str:
    """`rqcrawl inspect`: the URL's place and why, then its task row with revisits."""
    lines = [
        f"{s['url']} (crawl {s['crawl']}, host {s['host']}, shard {s['shard']})",
        f"  {s['why']}",
    ]
    task = s.get("task")
    if task:
        nxt = task["next_visit"]
        lines.append(
            f"  task row: {task['state']}, {task['visits']} visit(s), next visit "
            + (f"at {_clock(nxt)} (in {duration(max(0.0, nxt - time.time()))})" if nxt else "none")
            + f", interval {duration(task['interval_s'])}, {task['failures']} failure(s) in a row"
        )
    elif "task" in s:
        lines.append("  task row: none yet (written when its first visit ends)")
    return "\n".join(lines)


# -- rqcrawl hosts ------------------------------------------------------------------------


def hosts_report(redis: Redis, crawl: str, limit: int = HOSTS_LIMIT) -> dict:
    """Per host of the crawl (every shard's: URLFrontier's ListQueues), the `limit` with the
    most time left first: URLs waiting (held, queued or deferred), in flight, deferred,
    running, fetched, failed, the delay in force and its source, its pace, the next slot,
    and the state of its robots.txt."""
    cfg = configs.load(redis, crawl, fresh=True)
    if cfg is None:
        raise LookupError(f"no crawl named {crawl!r} in this Redis")
    states = [Frontier(conn, crawl, cfg) for conn in all_shards(redis, crawl)]
    snap = combined([s.snapshot() for s in states])
    now = time.time()
    rows = host_rows(states, cfg, snap, host_readings(states, cfg, snap, now), shown=limit)
    shown = rows[:limit]
    facts = [s.host_facts([r["host"] for r in shown]) for s in states]
    for r in shown:
        deferred = sum(f.deferred.get(r["host"], 0) for f in facts)
        r["deferred"] = deferred
        r["queued"] = max(0, r["in_flight"] - deferred - r["running"])
        r["waiting"] = max(0, r["remaining"] - r["running"])
        r["next_slot_at"] = now + r["next_in_s"]
        r["robots"] = robots_state(cfg, r["host"], facts, now)
    return {"crawl": crawl, "host_count": len(rows), "hosts": shown}


def robots_state(cfg: config.CrawlConfig, host: str, facts: list, now: float) -> str:
    """The host's robots.txt in words: off, being fetched, not fetched yet, rules, allow
    (no usable file), or unavailable (since when, and when it is asked again)."""
    if not cfg.obey_robots:
        return "off"
    sites = [f"{scheme}://{host}" for scheme in ("http", "https")]
    if any(site in f.robots_fetching for f in facts for site in sites):
        return "being fetched"
    verdict = next((f.robots[site] for f in facts for site in sites if site in f.robots), None)
    if verdict is None:
        return "not fetched yet"
    kind = verdict["kind"]
    if kind == "unavailable":
        down = max(0.0, now - verdict.get("since", now))  # `now` read before the verdict
        retry = max(0.0, verdict["retry_at"] - now)
        return f"unavailable for {down:.0f} s ({verdict['attempts']} asks), retry in {retry:.0f} s"
    return "rules" if kind == "rules" else "allow (no usable file)"


def render_hosts(report: dict) -> str:
    """`rqcrawl hosts`: one aligned row per host, the ones with the most time left first."""
    if not report["hosts"]:
        return f"crawl {report['crawl']}: no hosts yet"
    header = ("HOST", "WAITING", "IN FLIGHT", "DEFERRED", "RUNNING", "FETCHED", "FAILED",
              "DELAY", "PER URL", "NEXT IN", "ETA", "ROBOTS.TXT")  # fmt: skip
    rows = [header] + [
        (
            h["host"], str(h["waiting"]), str(h["in_flight"]), str(h["deferred"]),
            str(h["running"]), str(h["fetched"]), str(h["failed"]),
            f"{h['delay_s']:g}s ({h['delay_source']})", f"{h['url_s']:.2f}s",
            f"{h['next_in_s']:.1f}s", duration(h["eta_s"]), h["robots"],
        )
        for h in report["hosts"]
    ]  # fmt: skip
    more = report["host_count"] - len(report["hosts"])
    tail = [f"({more} more hosts: --limit N shows more)"] if more > 0 else []
    return "\n".join(aligned(rows) + tail)
