"""`rqcrawl bench`: rqcrawl against Scrapy on the same generated local site, in the same run.

Each crawl gets a fresh site server and (for rqcrawl) a fresh private Redis (the embedded one
of `rqcrawl crawl`: Unix socket, append-only file), runs to the end, and is measured: wall
time from the seed to the last page, CPU and peak RSS of every crawler process (from /proc for
rqcrawl's workers, from `resource` inside the Scrapy process), Redis CPU and commands (INFO
deltas) and Redis bytes per pending job, per held URL and per seen URL.
Timings on a shared machine are noisy: compare rows of one run, and use --repeat for medians.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import click
from redis import Redis
from rq import Worker

from .. import config, stats
from ..config import CrawlConfig
from ..embedded import EmbeddedRedis
from ..frontier import PUMP_BATCH, Frontier
from ..keys import CrawlKeys
from ..runner import WORKER_CLASS, LocalWorkers
from ..state import CrawlState
from ..urls import canonicalize
from .report import NATIVE, PRELOADED, STOCK, Result, median_result, notes, table
from .site import ChainSpec, FanSpec, SiteServer, SiteSpec, page_path

CRAWL = "bench"
CLK_TCK = os.sysconf("SC_CLK_TCK")

# The crawl settings of every rqcrawl run. Politeness is off, as in the Scrapy spider: no delay
# between requests (Scrapy's DOWNLOAD_DELAY is 0 by default), no per-host concurrency cap
# beyond the workers' number (Scrapy's CONCURRENT_REQUESTS_PER_DOMAIN is set to
# CONCURRENT_REQUESTS), robots.txt not fetched (ROBOTSTXT_OBEY is False).
BENCH_SETTINGS: dict = {
    "max_depth": 1000,  # the whole site, like Scrapy's DEPTH_LIMIT 0
    "allow_private": True,  # the site is on 127.0.0.1
    "delay": 0.0,
    "host_concurrency": 10_000,
    "obey_robots": False,
}


def proc_cpu_s(pid: int) -> float:
    """utime + stime of a process and of its reaped children, in seconds."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / CLK_TCK


def proc_peak_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def redis_numbers(conn: Redis) -> dict:
    """The Redis counters the bench takes deltas of."""
    cpu, st = conn.info("cpu"), conn.info("stats")
    return {
        "cpu_s": cpu["used_cpu_sys"] + cpu["used_cpu_user"],
        "commands": st["total_commands_processed"],
        "rss": conn.info("memory")["used_memory_rss"],
        "commandstats": conn.info("commandstats"),
    }


def key_bytes(conn: Redis, names: list[str]) -> int:
    return sum(conn.memory_usage(n, samples=0) or 0 for n in names)


def site_urls(server: SiteServer, count: int) -> list[str]:
    return [canonicalize(server.origin + page_path(i)) for i in range(count)]


# The worker of the stock rows: RQ's default, forking one job at a time.
STOCK_WORKER_CLASS = "rq.worker.Worker"


def run_rqcrawl(
    spec: SiteSpec,
    latency: float,
    workers: int,
    threads: int,
    site_procs: int,
    crawler: str = "rqcrawl",
    bloom_module: str | None = None,
) -> Result:
    """Crawl the site with `workers` local worker processes (of `threads` workers each)
    of the `crawler`'s kind (the recommended worker, or stock ones; NATIVE: the recommended
    worker on the native Bloom filter of `bloom_module`) against a private Redis."""
    server = SiteServer(spec, latency, site_procs).start()
    native = crawler == NATIVE
    with tempfile.TemporaryDirectory(prefix="rqcrawl-bench-") as tmp:
        module = ("--loadmodule", str(bloom_module)) if native else ()
        redis_server = EmbeddedRedis(Path(tmp), extra=module).start()
        conn = Redis.from_url(redis_server.url)
        stock = crawler in (STOCK, PRELOADED)
        pool = LocalWorkers(
            redis_server.url,
            workers,
            threads,
            worker_class=STOCK_WORKER_CLASS if stock else WORKER_CLASS,
            rq_config="rqcrawl.preload" if crawler == PRELOADED else None,
        )
        try:
            wait_for_workers(conn, pool, workers * threads)
            cpu0 = sum(proc_cpu_s(p.pid) for p in pool.procs)
            site0 = sum(proc_cpu_s(pid) for pid in server.pids)
            before = redis_numbers(conn)
            cfg = replace(crawl_config(server), bloom_filter="native" if native else "lua")
            config.save(conn, CRAWL, cfg)
            Frontier(conn, CRAWL, cfg).seed([canonicalize(server.origin + "/p0.html")])
            wait_finished(conn, pool)
            cpu = sum(proc_cpu_s(p.pid) for p in pool.procs) - cpu0
            rss = sum(proc_peak_rss_kb(p.pid) for p in pool.procs)
            site_cpu = sum(proc_cpu_s(pid) for pid in server.pids) - site0
            after = redis_numbers(conn)
            final = stats.status(conn, CRAWL)
            pool.stop()
            drop_finished_jobs(conn)
            memory = redis_memory(conn, cfg, final, site_urls(server, spec.pages))
        finally:
            pool.stop()
            redis_server.stop()
            server.stop()
    return Result(
        crawler,
        workers,
        threads,
        latency,
        final["fetched"],
        final["elapsed_s"],
        cpu,
        rss,
        site_cpu,
        redis_deltas(before, after) | memory,
    )


def crawl_config(server: SiteServer) -> CrawlConfig:
    return CrawlConfig.from_dict(BENCH_SETTINGS | {"scope_hosts": [f"127.0.0.1:{server.port}"]})


def wait_for_workers(conn: Redis, pool: LocalWorkers, count: int, timeout: float = 60) -> None:
    """Start timing only once every worker has registered (Python start-up is not crawling)."""
    deadline = time.monotonic() + timeout
    while Worker.count(connection=conn) < count:
        if pool.alive() < len(pool.procs) or time.monotonic() > deadline:
            raise click.ClickException("rq workers did not start")
        time.sleep(0.1)


def wait_finished(conn: Redis, pool: LocalWorkers, crawl: str = CRAWL) -> None:
    """Poll what says `finished` (cheaper than a full status, which counts bits)."""
    state = CrawlState(conn, crawl, CrawlConfig())
    while True:
        if state.unfinished() == 0:
            return
        if pool.alive() == 0:
            raise click.ClickException("every rq worker exited")
        time.sleep(0.1)


def redis_deltas(before: dict, after: dict) -> dict:
    def delta(field: str) -> dict[str, int]:
        old = before["commandstats"]
        return {
            name.removeprefix("cmdstat_"): v[field] - old.get(name, {}).get(field, 0)
            for name, v in after["commandstats"].items()
        }

    calls, usec = delta("calls"), delta("usec")
    return {
        "cpu_s": after["cpu_s"] - before["cpu_s"],
        "commands": after["commands"] - before["commands"],
        "rss": after["rss"],
        "calls": {k: v for k, v in calls.items() if v},
        "usec": {k: v for k, v in usec.items() if calls[k]},
    }


def drop_finished_jobs(conn: Redis) -> None:
    """Delete the crawl's finished RQ jobs and their results now: left to expire (result_ttl)
    they would be freed while the pending bytes are measured and skew them."""
    for pattern in ("rq:job:*", "rq:results:*"):
        found = list(conn.scan_iter(match=pattern, count=1000))
        if found:
            conn.delete(*found)


def redis_memory(conn: Redis, cfg: CrawlConfig, final: dict, urls: list[str]) -> dict:
    """Bytes per seen URL (Bloom filter, items stream) of the finished crawl, and bytes per
    pending URL, measured with the workers stopped by seeding three more crawls with the
    site's URLs: one whose URLs all become RQ jobs, one whose URLs all wait in the held list
    (window 0), and one with the default window (a frontier as a crawl of this size has it:
    `window` RQ jobs, the rest held)."""
    bloom = CrawlState(conn, CRAWL, cfg).bloom
    sized_bloom = CrawlState(conn, "pending-all", pending_config(len(urls), 0)).bloom
    return {
        "seen": final["admitted"],
        "bloom_bytes": key_bytes(conn, bloom.keys),
        "bloom_optimum_bytes": bloom.bits / 8,
        "bloom_capacity": cfg.bloom_capacity,
        "items_bytes": key_bytes(conn, [CrawlKeys(CRAWL).items]),
        "job_bytes": pending_bytes(conn, "pending-jobs", urls[:2000], window=2000),
        "held_bytes": pending_bytes(conn, "pending-held", urls[:2000], window=0),
        "frontier_urls": len(urls),
        "frontier_bytes": pending_bytes(conn, "pending-all", urls, window=CrawlConfig.window),
        "sized_bloom_bytes": key_bytes(conn, sized_bloom.keys),
        "sized_bloom_optimum_bytes": sized_bloom.bits / 8,
    }


def pending_bytes(conn: Redis, crawl: str, urls: list[str], window: int) -> float:
    """Redis bytes per URL seeded into a new crawl (its Bloom filter, sized to the URLs, not
    counted)."""
    cfg = pending_config(len(urls), window)
    config.save(conn, crawl, cfg)
    frontier = Frontier(conn, crawl, cfg)
    before = conn.info("memory")["used_memory"]
    frontier.seed(urls)
    grown = conn.info("memory")["used_memory"] - before
    return (grown - key_bytes(conn, frontier.state.bloom.keys)) / len(urls)


def pending_config(urls: int, window: int) -> CrawlConfig:
    """window 0 holds every URL: refused for a crawl (which it would stall), but what the
    measure of held URLs needs, so it is set past the checks."""
    cfg = CrawlConfig.from_dict({"allow_private": True, "bloom_capacity": urls})
    return replace(cfg, window=window)


def run_scrapy(
    spec: SiteSpec, latency: float, concurrency: int, threads: int, site_procs: int
) -> Result:
    """Crawl the site with the equivalent Scrapy spider, in its own process (one thread)."""
    server = SiteServer(spec, latency, site_procs).start()
    with tempfile.TemporaryDirectory(prefix="rqcrawl-bench-") as tmp:
        result_path = Path(tmp) / "scrapy.json"
        try:
            site0 = sum(proc_cpu_s(pid) for pid in server.pids)
            proc = subprocess.run(
                [
                    sys.executable, "-m", "rqcrawl.bench.spider", server.origin + "/p0.html",
                    str(result_path), "--concurrency", str(concurrency),
                ],
                capture_output=True,
                text=True,
            )  # fmt: skip
            site_cpu = sum(proc_cpu_s(pid) for pid in server.pids) - site0
        finally:
            server.stop()
        if proc.returncode != 0 or not result_path.exists():
            raise click.ClickException(f"the Scrapy crawl failed:\n{proc.stderr[-2000:]}")
        r = json.loads(result_path.read_text())
    return Result(
        "scrapy",
        concurrency,
        threads,
        latency,
        r["pages"],
        r["wall_s"],
        r["cpu_s"],
        r["peak_rss_kb"],
        site_cpu,
    )


def scrapy_available() -> bool:
    try:
        import scrapy  # noqa: F401
    except ImportError:
        return False
    return True


def parse_list(kind):
    """A click callback for comma-separated lists such as `--workers 1,2`."""

    def parse(ctx, param, value: str | None) -> list:
        if value is None:  # an option without a default, not given
            return []
        try:
            return [kind(v) for v in value.split(",") if v.strip()]
        except ValueError:
            raise click.BadParameter(f"expected a comma-separated list: {value!r}") from None

    return parse


@click.command()
@click.option("--pages", type=click.IntRange(min=10), default=20_000, show_default=True)
@click.option("--workers", default="1,2", show_default=True, callback=parse_list(int),
              help="rqcrawl worker counts to run, comma-separated.")  # fmt: skip
@click.option("--latency", default="0", show_default=True, callback=parse_list(float),
              help="Seconds added to every response, comma-separated (e.g. 0,0.1).")  # fmt: skip
@click.option("--threads", default="1", show_default=True, callback=parse_list(int),
              help="rqcrawl workers per process (threads), comma-separated.")  # fmt: skip
@click.option("--scrapy/--no-scrapy", "with_scrapy", default=True,
              help="Also crawl with Scrapy, when installed (rqcrawl[bench]).")  # fmt: skip
@click.option("--concurrency", default="16", show_default=True, callback=parse_list(int),
              help="Scrapy CONCURRENT_REQUESTS values, comma-separated.")  # fmt: skip
@click.option("--stock/--no-stock", default=False,
              help="Also crawl with stock forking `rq worker crawl` workers (same counts), "
                   "without and with RQ_CONFIG=rqcrawl.preload.")  # fmt: skip
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Runs of each configuration; the table shows medians.")  # fmt: skip
@click.option("--site-procs", type=click.IntRange(min=1), default=2, show_default=True,
              help="Processes serving the site.")  # fmt: skip
@click.option("--revisit-memory", type=click.IntRange(min=10), metavar="N",
              help="Instead: bytes per known URL of a crawl with revisits of N pages, in its "
                   "SQLite task table and in Redis.")  # fmt: skip
@click.option("--db-url", "--db", "db_url", metavar="URL",
              help="With --revisit-memory: also measure the task table in this PostgreSQL "
                   "(postgresql://...); with --task-table: the database to build in.")  # fmt: skip
@click.option("--task-table", type=click.IntRange(min=PUMP_BATCH * 5), metavar="N",
              help="Instead: time one pump batch in a task table of N rows built in --db "
                   "(0.1 % and 100 % due).")  # fmt: skip
@click.option("--skewed", is_flag=True,
              help="Instead: exact depth against --no-exact-depth on a skewed two-host site "
                   "(one host's pages at one level under a Crawl-delay, the other's a chain), "
                   "with the largest --workers and --threads values.")  # fmt: skip
@click.option("--fan-pages", type=click.IntRange(min=1), default=40, show_default=True,
              help="With --skewed: the slow host's pages (all at depth 1).")  # fmt: skip
@click.option("--crawl-delay", type=click.FloatRange(min=0, max=60), default=0.5,
              show_default=True, help="With --skewed: the slow host's Crawl-delay.")  # fmt: skip
@click.option("--chain-pages", type=click.IntRange(min=2), default=300, show_default=True,
              help="With --skewed: the other host's chain of pages.")  # fmt: skip
@click.option("--shards", "shard_counts", callback=parse_list(int), metavar="N,...",
              help="Instead: the crawl over N Redis servers (shards) for each N, with "
                   "the largest --workers in total, on the site over --hosts hosts.")  # fmt: skip
@click.option("--hosts", type=click.IntRange(min=1, max=254), default=8, show_default=True,
              help="With --shards: hosts (127.0.0.1, .2, ...) of the site.")  # fmt: skip
@click.option("--bloom-module", type=click.Path(exists=True, dir_okay=False),
              help="RedisBloom's redisbloom.so: also crawl with the native Bloom filter "
                   f"(rows {NATIVE}), the module loaded into the bench's Redis.")  # fmt: skip
@click.option(
    "--render",
    "render",
    is_flag=True,
    help="Instead: rendering in a browser on a script-built site beside plain "
    "fetching of its server-side twin (--pages, --workers, --render-workers).",
)
@click.option("--render-workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --render: render worker processes (one browser each).")  # fmt: skip
def bench(
    pages, workers, threads, latency, with_scrapy, concurrency, stock, repeat, site_procs,
    revisit_memory, db_url, task_table, skewed, fan_pages, crawl_delay, chain_pages,
    shard_counts, hosts, bloom_module, render, render_workers,
) -> None:  # fmt: skip
    """Benchmark rqcrawl against Scrapy on a generated local site and print one table."""
    if task_table:
        from .tasktable import report as table_report  # SQLAlchemy only for this one

        if not db_url:
            raise click.BadParameter("a database URL is needed", param_hint="--db")
        table_report(task_table, db_url)
        return
    if render:
        from .rendered import report as render_report  # it builds on this module

        render_report(pages, max(workers), render_workers)
        return
    if shard_counts:
        from .sharded import report as sharded_report  # it builds on this module

        if min(shard_counts) < 1:
            raise click.BadParameter("shard counts must be at least 1", param_hint="--shards")
        sharded_report(SiteSpec(pages=pages), hosts, shard_counts, max(workers), repeat)
        return
    if revisit_memory:
        from .revisit import report  # it builds on this module

        report(revisit_memory, db_url)
        return
    if skewed:
        from .skewed import report as skewed_report  # it builds on this module

        fan, chain = FanSpec(fan_pages, crawl_delay), ChainSpec(chain_pages)
        skewed_report(fan, chain, max(workers), max(threads), repeat)
        return
    if with_scrapy and not scrapy_available():
        click.echo("Scrapy is not installed: rqcrawl only (pip install 'rqcrawl[bench]')", err=True)
        with_scrapy = False
    spec = SiteSpec(pages=pages)
    runs = [("rqcrawl", n, t, lat) for lat in latency for t in threads for n in workers]
    if bloom_module:
        runs += [(NATIVE, n, t, lat) for lat in latency for t in threads for n in workers]
    if stock:
        runs += [(k, n, 1, lat) for k in (STOCK, PRELOADED) for lat in latency for n in workers]
    if with_scrapy:
        runs += [("scrapy", c, 1, lat) for lat in latency for c in concurrency]
    results = []
    for crawler, procs, per_proc, lat in runs:
        reps = []
        for i in range(repeat):
            click.echo(
                f"{crawler} {procs}x{per_proc} @ {lat * 1000:.0f} ms, run {i + 1}/{repeat}...",
                err=True,
            )
            if crawler == "scrapy":
                reps.append(run_scrapy(spec, lat, procs, per_proc, site_procs))
            else:
                reps.append(
                    run_rqcrawl(spec, lat, procs, per_proc, site_procs, crawler, bloom_module)
                )
        results.append(median_result(reps))
    command = (
        f"rqcrawl bench --pages {pages} --workers {','.join(map(str, workers))} "
        f"--threads {','.join(map(str, threads))} "
        f"--latency {','.join(map(str, latency))} --{'' if with_scrapy else 'no-'}scrapy "
        f"--concurrency {','.join(map(str, concurrency))} --{'' if stock else 'no-'}stock "
        f"--repeat {repeat} "
        f"--site-procs {site_procs}" + (f" --bloom-module {bloom_module}" if bloom_module else "")
    )
    click.echo(
        f"site: {pages} pages of {spec.min_bytes // 1000}-{spec.max_bytes // 1000} KB, "
        f"{spec.links} links each; {os.cpu_count()} CPUs; medians of {repeat} run(s)"
    )
    click.echo(table(results))
    for line in notes(results):
        click.echo(line)
    click.echo(f"reproduce: {command}")
