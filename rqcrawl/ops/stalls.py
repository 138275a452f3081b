"""What a crawl with URLs waiting waits for: why it stopped moving (no worker, URLs no worker
released, workers that start nothing, every URL waiting for its time, or one host's pace),
and the robots.txt files that hold pages back."""

from __future__ import annotations

import socket

from rq import Queue, Worker

from rqcrawl import config
from rqcrawl.defaults import OVERDUE
from rqcrawl.fetch.robots import patience
from rqcrawl.frontier import keys
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.state import Snapshot
from rqcrawl.processes import alive

# The recommended worker (runner.WORKER_CLASS; the runner imports this module).
WORKER_HINT = f"RQ_WORKER_CLASS=rqcrawl.workers.CrawlWorker rq worker {keys.QUEUE_NAME}"


# Stalls after which the crawl cannot move by itself (its ETA is then unknown).
STUCK = ("no_worker", "unreleased", "silent")


def live_workers(states: list[Frontier]) -> list[Worker]:
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
    states: list[Frontier],
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
    states: list[Frontier],
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


def robots_waits(
    states: list[Frontier], cfg: config.CrawlConfig, hosts: list[str], now: float
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
