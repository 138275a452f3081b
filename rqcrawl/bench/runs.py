"""The measured runs of `rqcrawl bench`, which every mode of the benchmark shares: one crawl
by rqcrawl's workers or by Scrapy on a fresh site server and a fresh private Redis, and the
accounting of its CPU, memory and Redis work (see command.py for what the table shows).
"""

from __future__ import annotations

import importlib.util
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

from rqcrawl import api
from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import configs, scripts
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.ops import stats
from rqcrawl.parse.urls import canonicalize
from rqcrawl.workers.embedded import EmbeddedRedis
from rqcrawl.workers.runner import WORKER_CLASS, LocalWorkers

from .report import NATIVE, PRELOADED, STOCK, Result
from .site import SiteServer, SiteSpec
from .tree import TreeSpec

CRAWL = "bench"
SCRAPY_CONCURRENCY = 16  # the spider's CONCURRENT_REQUESTS (and per domain) unless told
CLK_TCK = os.sysconf("SC_CLK_TCK")

# The crawl settings of every rqcrawl run. Politeness is off, as in the Scrapy spider: no delay
# between requests (Scrapy's DOWNLOAD_DELAY 0), robots.txt not fetched (ROBOTSTXT_OBEY
# False), and no per-host concurrency cap beyond the workers' number, except in the runs
# compared with Scrapy, which get Scrapy's per-domain cap (CONCURRENT_REQUESTS_PER_DOMAIN,
# set to CONCURRENT_REQUESTS). The depth limit and the user agent are the spider's too.
BENCH_SETTINGS: dict = {
    "max_depth": 1000,  # the whole site: the spider's DEPTH_LIMIT
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


def redis_cpu_s(conn: Redis) -> float:
    """Redis's CPU seconds so far, user and system."""
    cpu = conn.info("cpu")
    return cpu["used_cpu_sys"] + cpu["used_cpu_user"]


def redis_numbers(conn: Redis) -> dict:
    """The Redis counters the bench takes deltas of."""
    st = conn.info("stats")
    return {
        "cpu_s": redis_cpu_s(conn),
        "commands": st["total_commands_processed"],
        "rss": conn.info("memory")["used_memory_rss"],
        "commandstats": conn.info("commandstats"),
    }


def time_every_call(conn: Redis) -> None:
    """From now on, SLOWLOG every call (a profiled run's: Redis spends some CPU on it), for
    script_times; the last SLOWLOG_KEPT calls are kept."""
    conn.config_set("slowlog-max-len", SLOWLOG_KEPT)
    conn.config_set("slowlog-log-slower-than", 0)
    conn.slowlog_reset()


# SLOWLOG entries kept: a page sends about 60 calls, its script calls with up to 32
# arguments of up to 128 bytes each, so a crawl of `--pages 20000` (the default) logged
# whole would hold hundreds of MB in the bench's Redis; this many is tens of MB at most.
SLOWLOG_KEPT = 200_000


def script_times(conn: Redis) -> dict:
    """`scripts`: script name -> [calls, µs] of the calls SLOWLOG kept since
    time_every_call, the commands inside a script counted in its time (Redis logs the
    EVALSHA, not them); `slowlog_whole`: whether it kept every call."""
    names = scripts.names_by_sha()
    kept = conn.slowlog_len()
    found: dict[str, list[int]] = {}
    for entry in conn.slowlog_get(kept):
        verb, sha, *_ = entry["command"].split(b" ", 2) + [b""]  # (arguments may be binary)
        if verb.upper() == b"EVALSHA":
            name = names.get(sha.decode("ascii", "replace"), "unknown script")
            totals = found.setdefault(name, [0, 0])
            totals[0] += 1
            totals[1] += entry["duration"]
    return {"scripts": found, "slowlog_whole": kept < SLOWLOG_KEPT}


def key_bytes(conn: Redis, names: list[str]) -> int:
    return sum(conn.memory_usage(n, samples=0) or 0 for n in names)


# The worker of the stock rows: RQ's default, forking one job at a time.
STOCK_WORKER_CLASS = "rq.worker.Worker"
LEDGER_WORKER_CLASS = "rqcrawl.bench.ledger.LedgerWorker"  # the recommended one, probed


def run_rqcrawl(
    spec: SiteSpec | TreeSpec,
    latency: float,
    workers: int,
    threads: int,
    site_procs: int,
    crawler: str = "rqcrawl",
    bloom_module: str | None = None,
    host_concurrency: int = SCRAPY_CONCURRENCY,
    ledger_dir: Path | None = None,
    http_client: str = "requests",
    redis_launcher: tuple[str, ...] = (),
) -> Result:
    """Crawl the site (or tree) with `workers` local worker processes (of `threads` workers
    each) of the `crawler`'s kind (the recommended worker, or stock ones; NATIVE: the
    recommended worker on the native Bloom filter of `bloom_module`) against a private Redis,
    at most `host_concurrency` requests at a time (Scrapy's per-domain cap). With
    `ledger_dir`, the recommended worker runs with the probes of `--profile` (ledger.py),
    and Redis times every script call (script_times).
    `http_client` is the crawl's setting of that name; Redis runs under `redis_launcher`
    (instructions.py's valgrind), if given."""
    server = SiteServer(spec, latency, site_procs).start()
    native = crawler == NATIVE
    with tempfile.TemporaryDirectory(prefix="rqcrawl-bench-") as tmp:
        module = ("--loadmodule", str(bloom_module)) if native else ()
        redis_server = EmbeddedRedis(Path(tmp), extra=module, launcher=redis_launcher).start()
        conn = Redis.from_url(redis_server.url)
        stock = crawler in (STOCK, PRELOADED)
        recommended = LEDGER_WORKER_CLASS if ledger_dir else WORKER_CLASS
        pool = LocalWorkers(
            redis_server.url,
            workers,
            threads,
            worker_class=STOCK_WORKER_CLASS if stock else recommended,
            rq_config="rqcrawl.workers.preload" if crawler == PRELOADED else None,
            env={"RQCRAWL_LEDGER": str(ledger_dir)} if ledger_dir else None,
        )
        try:
            wait_for_workers(conn, pool)
            cpu0 = sum(proc_cpu_s(p.pid) for p in pool.procs)
            site0 = sum(proc_cpu_s(pid) for pid in server.pids)
            before = redis_numbers(conn)
            if ledger_dir:
                time_every_call(conn)
            cfg = replace(
                crawl_config(server, host_concurrency=host_concurrency, http_client=http_client),
                bloom_filter="native" if native else "lua",
            )
            configs.save(conn, CRAWL, cfg)
            Frontier(conn, CRAWL, cfg).seed([canonicalize(server.origin + spec.start)])
            wait_finished(conn, pool)
            cpu = sum(proc_cpu_s(p.pid) for p in pool.procs) - cpu0
            rss = sum(proc_peak_rss_kb(p.pid) for p in pool.procs)
            site_cpu = sum(proc_cpu_s(pid) for pid in server.pids) - site0
            after = redis_numbers(conn)
            timed = script_times(conn) if ledger_dir else {}
            final = stats.status(conn, CRAWL)
            pool.stop()
            answered = page_set(conn, server.origin)
            drop_finished_jobs(conn)
            memory = redis_memory(conn, cfg, final, spec.urls_at(server.origin))
        finally:
            pool.stop()
            redis_server.stop()
            server.stop()
    return Result(
        crawler,
        workers,
        threads,
        latency,
        len(answered),
        final["elapsed_s"],
        cpu,
        rss,
        site_cpu,
        redis_deltas(before, after) | memory | timed,
        answered,
    )


def crawl_config(server: SiteServer, **settings) -> CrawlConfig:
    """BENCH_SETTINGS on `server`'s host, with `settings` over them."""
    scope = {"scope_hosts": [f"127.0.0.1:{server.port}"]}
    return CrawlConfig.from_dict(BENCH_SETTINGS | scope | settings)


def page_set(conn: Redis, origin: str) -> frozenset[str]:
    """The URLs the crawl had an answer for (a page, another type, an error status), without
    the redirects (which Scrapy follows inside its downloader, out of its spider's sight),
    without their origin (each crawl has a server, and a port, of its own)."""
    return frozenset(
        r["url"].removeprefix(origin)
        for r in api.records(conn, CRAWL)
        if r.get("status") is not None and r.get("outcome") != "redirected"
    )


def wait_for_workers(
    conn: Redis, *pools: LocalWorkers, shard: int = 0, timeout: float = 60
) -> None:
    """Start timing only once every RQ worker of the `pools` on `conn` (shard `shard`, each
    slot of each process) has registered (Python start-up is not crawling)."""
    deadline = time.monotonic() + timeout
    count = sum(pool.rq_workers(shard) for pool in pools)
    while Worker.count(connection=conn) < count:
        if any(p.alive() < len(p.procs) for p in pools) or time.monotonic() > deadline:
            raise click.ClickException("rq workers did not start")
        time.sleep(0.1)


def wait_finished(conn: Redis, pool: LocalWorkers, crawl: str = CRAWL) -> None:
    """Poll what says `finished` (cheaper than a full status, which counts bits)."""
    state = Frontier(conn, crawl, CrawlConfig())
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
    bloom = Frontier(conn, CRAWL, cfg).bloom
    sized_bloom = Frontier(conn, "pending-all", pending_config(len(urls), 0)).bloom
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
    configs.save(conn, crawl, cfg)
    frontier = Frontier(conn, crawl, cfg)
    before = conn.info("memory")["used_memory"]
    frontier.seed(urls)
    grown = conn.info("memory")["used_memory"] - before
    return (grown - key_bytes(conn, frontier.bloom.keys)) / len(urls)


def pending_config(urls: int, window: int) -> CrawlConfig:
    """window 0 holds every URL: refused for a crawl (which it would stall), but what the
    measure of held URLs needs, so it is set past the checks."""
    cfg = CrawlConfig.from_dict({"allow_private": True, "bloom_capacity": urls})
    return replace(cfg, window=window)


def run_scrapy(
    spec: SiteSpec | TreeSpec, latency: float, concurrency: int, threads: int, site_procs: int
) -> Result:
    """Crawl the site (or tree) with the equivalent Scrapy spider, in its own process (one
    thread), with rqcrawl's depth limit and user agent."""
    server = SiteServer(spec, latency, site_procs).start()
    with tempfile.TemporaryDirectory(prefix="rqcrawl-bench-") as tmp:
        result_path, items_path = Path(tmp) / "scrapy.json", Path(tmp) / "items.jsonl"
        try:
            site0 = sum(proc_cpu_s(pid) for pid in server.pids)
            proc = subprocess.run(
                [
                    sys.executable, "-m", "rqcrawl.bench.spider", server.origin + spec.start,
                    str(result_path), "--concurrency", str(concurrency),
                    "--depth-limit", str(BENCH_SETTINGS["max_depth"]),
                    "--user-agent", CrawlConfig().agent, "--items", str(items_path),
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
        with items_path.open() as fh:
            answered = frozenset(
                canonicalize(json.loads(line)["url"]).removeprefix(server.origin) for line in fh
            )
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
        page_set=answered,
    )


def installed(package: str) -> bool:
    """Whether a peer crawler's package ("scrapy", "crawlee": the bench extra) is installed,
    without importing it."""
    return importlib.util.find_spec(package) is not None
