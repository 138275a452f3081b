"""`rqcrawl bench --skewed`: exact depth against first-found depth on a skewed two-host site.

One host has many pages at depth 1 and a robots.txt Crawl-delay (site.FanSpec), the other a
long chain of pages (site.ChainSpec). With exact depth (the level barrier) the chain waits
for the slow host's level to end before its second page; with `exact_depth = false` the two
hosts progress side by side and the crawl takes about as long as the slow host alone. Each
mode crawls both hosts, then the slow host alone and the chain alone, with the same settings,
local workers and a private Redis; printed: wall time (seed to last page), pages/s, the slow
host alone, the chain alone and the ratio, medians over `repeat` runs.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import click
from redis import Redis

from rqcrawl import api
from rqcrawl.config import CrawlConfig
from rqcrawl.ops import stats
from rqcrawl.parse.urls import canonicalize, host_of
from rqcrawl.workers.embedded import EmbeddedRedis
from rqcrawl.workers.runner import LocalWorkers

from .runs import BENCH_SETTINGS, wait_finished, wait_for_workers
from .site import ChainSpec, FanSpec, SiteServer

# Politeness as a crawl has it (robots.txt obeyed, one request at a time per host), with no
# delay of our own: the slow host is slow by its Crawl-delay only.
SKEWED_SETTINGS = BENCH_SETTINGS | {"obey_robots": True, "host_concurrency": 1}


@dataclass(frozen=True)
class Timing:
    """One crawl: pages fetched and wall seconds from the seed to the last page."""

    pages: int
    wall_s: float

    @property
    def rate(self) -> float:
        return self.pages / self.wall_s if self.wall_s else 0.0


def crawl(
    conn: Redis, pool: LocalWorkers, name: str, servers: list[SiteServer], exact: bool,
    max_depth: int,
) -> Timing:  # fmt: skip
    """Crawl the hosts of `servers` (their specs' start pages as seeds) to the end."""
    seeds = [canonicalize(s.origin + s.spec.start) for s in servers]
    settings = SKEWED_SETTINGS | {
        "max_depth": max_depth,
        "scope_hosts": [host_of(seed) for seed in seeds],
        "exact_depth": exact,
    }
    # Started as `rqcrawl seed` does: a listed crawl, whose deferred URLs the workers' tender
    # releases on time (an unlisted one gets only RQ's whole-second wake-ups).
    api.start(conn, seeds, name, CrawlConfig.from_dict(settings))
    wait_finished(conn, pool, name)
    final = stats.status(conn, name)
    return Timing(final["fetched"], final["elapsed_s"])


def measure(
    fan: FanSpec, chain: ChainSpec, workers: int, threads: int, repeat: int
) -> dict[tuple[bool, str], list[Timing]]:
    """Per (exact, "both" | "slow alone" | "chain"): the timings of `repeat` runs, on one fleet
    and one private Redis (each crawl under its own name, so with its own robots.txt
    verdicts and politeness state)."""
    runs: dict[tuple[bool, str], list[Timing]] = {}
    with tempfile.TemporaryDirectory(prefix="rqcrawl-bench-") as tmp:
        redis_server = EmbeddedRedis(Path(tmp)).start()
        conn = Redis.from_url(redis_server.url)
        slow, other = SiteServer(fan, procs=1).start(), SiteServer(chain, procs=1).start()
        pool = LocalWorkers(redis_server.url, workers, threads)
        try:
            wait_for_workers(conn, pool)
            for i in range(repeat):
                for exact in (True, False):
                    shapes = (("both", [slow, other]), ("slow alone", [slow]), ("chain", [other]))
                    for shape, servers in shapes:
                        label = f"{'exact' if exact else 'first-found'} depth, {shape}"
                        click.echo(f"{label}, run {i + 1}/{repeat}...", err=True)
                        name = f"skewed-{int(exact)}-{shape.replace(' ', '-')}-{i}"
                        timing = crawl(conn, pool, name, servers, exact, chain.pages)
                        runs.setdefault((exact, shape), []).append(timing)
        finally:
            pool.stop()
            slow.stop()
            other.stop()
            redis_server.stop()
    return runs


def report(fan: FanSpec, chain: ChainSpec, workers: int, threads: int, repeat: int) -> None:
    """Print both modes side by side and the command that measured them."""
    load = os.getloadavg()[0]
    runs = measure(fan, chain, workers, threads, repeat)
    click.echo(
        f"skewed site: slow host {fan.pages} pages at depth 1, Crawl-delay {fan.crawl_delay:g} s;"
        f" other host a chain of {chain.pages} pages (depth 0 to {chain.pages - 1}); "
        f"{workers} worker(s) x {threads} thread(s); {os.cpu_count()} CPUs; load average "
        f"{load:.2f} before, {os.getloadavg()[0]:.2f} after; medians of {repeat} run(s)"
    )
    click.echo(table(runs))
    click.echo(
        f"reproduce: rqcrawl bench --skewed --fan-pages {fan.pages} --crawl-delay "
        f"{fan.crawl_delay:g} --chain-pages {chain.pages} --workers {workers} --threads "
        f"{threads} --repeat {repeat}"
    )


def table(runs: dict[tuple[bool, str], list[Timing]]) -> str:
    """One row per mode: both hosts, the slow host alone, the chain alone (the chain must be
    the faster of the two for the ratio to say what the barrier costs), and the ratio of the
    times of both hosts and of the slow host alone."""
    rows = [
        ("mode", "both: pages", "wall s", "pages/s", "slow alone: pages", "wall s", "pages/s",
         "chain alone: wall s", "both / slow alone")
    ]  # fmt: skip
    for exact, mode in ((True, "exact depth"), (False, "--no-exact-depth")):
        both, alone = median(runs[(exact, "both")]), median(runs[(exact, "slow alone")])
        chain = median(runs[(exact, "chain")])
        rows.append(
            (
                mode, str(both.pages), f"{both.wall_s:.2f}", f"{both.rate:.1f}",
                str(alone.pages), f"{alone.wall_s:.2f}", f"{alone.rate:.1f}",
                f"{chain.wall_s:.2f}", f"{both.wall_s / alone.wall_s:.2f}",
            )
        )  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            [r[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)]
        )
        for r in rows
    )


def median(timings: list[Timing]) -> Timing:
    return Timing(
        int(statistics.median(t.pages for t in timings)),
        statistics.median(t.wall_s for t in timings),
    )
