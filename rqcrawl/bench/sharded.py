"""`rqcrawl bench --shards 1,2`: the same crawl on 1, 2, ... Redis servers (shards), for the
capacity model (docs/explanation/capacity.md): per page, the workers' CPU, every shard's Redis
CPU and commands, and the links that crossed shards (their outboxes).

For each shard count N: N private embedded Redis servers, the generated site spread over
`hosts` hosts 127.0.0.x (site.start_hosts: page i on host i % hosts, links across hosts),
the same number of worker processes in total, as many on each shard (runner.LocalWorkers:
each started on its shard's URL, as `rq worker` is in a fleet), one crawl seeded with
`shards` = the N URLs (a plain crawl for N = 1: what one Redis runs). Timed from the seed
to the last page; CPU and commands as deltas over the crawl.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import click
from redis import Redis

from rqcrawl import api
from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import keys
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.frontier.levels import settled
from rqcrawl.ops import stats
from rqcrawl.parse.urls import canonicalize
from rqcrawl.workers.embedded import EmbeddedRedis
from rqcrawl.workers.runner import LocalWorkers

from .runs import BENCH_SETTINGS, CRAWL, proc_cpu_s, redis_numbers, wait_for_workers
from .site import SiteServer, SiteSpec, start_hosts


@dataclass(frozen=True)
class ShardRun:
    """One crawl over `shards` Redis servers; per-shard lists are in shard order."""

    shards: int
    workers: int
    pages: int
    wall_s: float
    worker_cpu_s: float
    redis_cpu_s: list[float]
    redis_commands: list[int]
    outboxed: list[int]
    fetched: list[int]


def run(spec: SiteSpec, hosts: int, shards: int, workers: int) -> ShardRun:
    """Crawl the site spread over `hosts` hosts with `workers` processes in all, as many on
    each of `shards` Redis servers."""
    servers = start_hosts(spec, hosts)
    pool = None
    with tempfile.TemporaryDirectory(prefix="rqcrawl-bench-") as tmp:
        redises: list[EmbeddedRedis] = []
        try:
            for i in range(shards):
                (Path(tmp) / str(i)).mkdir()
                redises.append(EmbeddedRedis(Path(tmp) / str(i)).start())
            conns = [Redis.from_url(r.url) for r in redises]
            pool = LocalWorkers([r.url for r in redises], workers // shards)
            for shard, conn in enumerate(conns):
                wait_for_workers(conn, pool, shard=shard)
            return measure(servers, conns, [r.url for r in redises], pool)
        finally:
            if pool is not None:
                pool.stop()
            for r in redises:
                r.stop()
            for server in servers:
                server.stop()


def measure(
    servers: list[SiteServer], conns: list[Redis], urls: list[str], pool: LocalWorkers
) -> ShardRun:
    procs = pool.procs
    cpu0 = sum(proc_cpu_s(p.pid) for p in procs)
    before = [redis_numbers(c) for c in conns]
    hosts = [s.origin.removeprefix("http://") for s in servers]
    settings = BENCH_SETTINGS | {"scope_hosts": hosts}
    if len(urls) > 1:  # host i on shard i % N: an even split, the same in every run
        rules = {host: urls[i % len(urls)] for i, host in enumerate(hosts)}
        settings |= {"shards": urls, "shard_rules": rules}
    cfg = CrawlConfig.from_dict(settings)
    api.start(conns[0], [canonicalize(servers[0].origin + "/p0.html")], CRAWL, cfg)
    wait_settled([Frontier(c, CRAWL, cfg) for c in conns], pool)
    cpu = sum(proc_cpu_s(p.pid) for p in procs) - cpu0
    after = [redis_numbers(c) for c in conns]
    final = stats.status(conns[0], CRAWL)
    return ShardRun(
        len(conns),
        len(procs),
        final["fetched"],
        final["elapsed_s"],
        cpu,
        [a["cpu_s"] - b["cpu_s"] for a, b in zip(after, before, strict=True)],
        [a["commands"] - b["commands"] for a, b in zip(after, before, strict=True)],
        [int(c.hget(CrawlKeys(CRAWL).counters, keys.OUTBOXED) or 0) for c in conns],
        [int(c.hget(CrawlKeys(CRAWL).counters, keys.FETCHED) or 0) for c in conns],
    )


def wait_settled(states: list[Frontier], pool: LocalWorkers) -> None:
    """Poll the double read that says a crawl over shards is over (levels.settled), which
    reads only counters and lengths (a full status counts the Bloom filter's bits)."""
    while not settled(states):
        if pool.alive() == 0:
            raise click.ClickException("every rq worker exited")
        time.sleep(0.1)


def median_run(runs: list[ShardRun]) -> ShardRun:
    """Medians of every number over repeats (per shard for the per-shard lists)."""

    def med(get):
        return statistics.median(get(r) for r in runs)

    def per_shard(get) -> list:
        return [med(lambda r, i=i: get(r)[i]) for i in range(runs[0].shards)]

    return ShardRun(
        runs[0].shards,
        runs[0].workers,
        int(med(lambda r: r.pages)),
        med(lambda r: r.wall_s),
        med(lambda r: r.worker_cpu_s),
        per_shard(lambda r: r.redis_cpu_s),
        per_shard(lambda r: r.redis_commands),
        per_shard(lambda r: r.outboxed),
        per_shard(lambda r: r.fetched),
    )


COLUMNS = (
    "shards", "workers", "pages", "wall s", "pages/s", "worker CPU ms/pg",
    "Redis CPU ms/pg", "per shard", "pages per shard", "Redis cmd/pg", "outbox/pg",
)  # fmt: skip


def row(r: ShardRun) -> list[str]:
    pages = max(r.pages, 1)
    return [
        str(r.shards),
        "+".join([str(r.workers // r.shards)] * r.shards),
        str(r.pages),
        f"{r.wall_s:.1f}",
        f"{r.pages / r.wall_s if r.wall_s else 0.0:.1f}",
        f"{r.worker_cpu_s * 1000 / pages:.2f}",
        f"{sum(r.redis_cpu_s) * 1000 / pages:.2f}",
        "/".join(f"{c * 1000 / pages:.2f}" for c in r.redis_cpu_s),
        "/".join(str(int(f)) for f in r.fetched),
        f"{sum(r.redis_commands) / pages:.1f}",
        f"{sum(r.outboxed) / pages:.2f}",
    ]


def table(results: list[ShardRun]) -> str:
    rows = [list(COLUMNS)] + [row(r) for r in results]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def report(spec: SiteSpec, hosts: int, shard_counts: list[int], workers: int, repeat: int) -> None:
    """Run and print the table, with the machine's load before and after, and the command."""
    uneven = next((n for n in shard_counts if workers % n), None)
    if uneven:
        raise click.UsageError(f"--shards {uneven} needs --workers a multiple of {uneven}")
    before = load()
    results = []
    for n in shard_counts:
        runs = []
        for i in range(repeat):
            click.echo(f"{n} shard(s), {workers} workers, run {i + 1}/{repeat}...", err=True)
            runs.append(run(spec, hosts, n, workers))
        results.append(median_run(runs))
    click.echo(
        f"site: {spec.pages} pages over {hosts} hosts; {os.cpu_count()} CPUs; "
        f"medians of {repeat} run(s); load average before {before}, after {load()}"
    )
    click.echo(table(results))
    click.echo(
        "per shard: Redis CPU ms per page of the whole crawl, shard by shard (host i on shard "
        "i % N, by placement rules: the same split every run); outbox/pg: links sent to another "
        "shard per page; N = 1 is a plain crawl on one Redis"
    )
    click.echo(
        f"reproduce: rqcrawl bench --shards {','.join(map(str, shard_counts))} "
        f"--pages {spec.pages} --hosts {hosts} --workers {workers} --repeat {repeat}"
    )
