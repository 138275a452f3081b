"""`rqcrawl bench --render`: what rendering costs, on a site that only JavaScript builds
(bench.jssite) beside plain fetching of the same site's server-side twin.

Rows: the server-side site fetched by plain workers; the same site under render = "auto"
(the rule's cost: nothing is rendered); the script-built site with a `render` pattern (every
page straight to the browser) and under "auto" (an HTTP fetch, then the browser). Measured:
wall time from the seed to the last page, pages/s, CPU per page of the worker processes and
of everything they started (the browser's driver and Chromium's processes), and the peak
memory (RSS) of a render worker with its browser, sampled every half second.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import click
import psutil
from redis import Redis

from rqcrawl import api
from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import keys
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.ops import stats
from rqcrawl.parse.urls import canonicalize
from rqcrawl.workers.embedded import EmbeddedRedis
from rqcrawl.workers.runner import RENDER_WORKER_CLASS, LocalWorkers

from .jssite import JSSite, serve
from .runs import BENCH_SETTINGS, proc_cpu_s, wait_for_workers

SAMPLE_S = 0.5


@dataclass(frozen=True)
class Row:
    label: str
    pages: int
    rendered: int
    wall_s: float
    cpu_s: float
    peak_mb: float  # a render worker and its browser (0: no render worker)

    def cells(self) -> tuple[str, ...]:
        rate = self.pages / self.wall_s if self.wall_s else 0.0
        per_page = 1000 * self.cpu_s / self.pages if self.pages else 0.0
        peak = f"{self.peak_mb:.0f}" if self.peak_mb else "-"
        return (self.label, str(self.pages), str(self.rendered), f"{self.wall_s:.1f}",
                f"{rate:.2f}", f"{per_page:.0f}", peak)  # fmt: skip


def tree_cpu_s(pool: LocalWorkers) -> float:
    """CPU seconds of the pool's processes (with their reaped children) and of their live
    descendants (a browser's processes)."""
    total = sum(proc_cpu_s(p.pid) for p in pool.procs if p.poll() is None)
    for p in pool.procs:
        try:
            for child in psutil.Process(p.pid).children(recursive=True):
                times = child.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
        except psutil.Error:
            continue
    return total


def tree_mb(pid: int) -> float:
    """RSS of a process and its descendants, in MB."""
    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0
    for proc in family:
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total / 1e6


def crawl(conn: Redis, name: str, base: str, render: list[str], pools: list[LocalWorkers]) -> Row:
    """Crawl the site at `base` to the end with `render`; a Row without its label."""
    settings = BENCH_SETTINGS | {"render": render, "scope_hosts": [base.split("//", 1)[1]]}
    cpu0 = sum(tree_cpu_s(p) for p in pools)
    api.start(conn, [canonicalize(base + "/p0")], name, CrawlConfig.from_dict(settings))
    state = Frontier(conn, name, CrawlConfig())
    renderers = [p for p in pools if p is not pools[0]]
    peak = 0.0
    while state.unfinished():
        for pool in renderers:
            peak = max([peak] + [tree_mb(p.pid) for p in pool.procs])
        if not all(p.alive() for p in pools):
            raise click.ClickException("a worker exited")
        time.sleep(SAMPLE_S)
    final = stats.status(conn, name)
    records = io.StringIO()
    api.export(conn, name, records, "jsonl")
    rendered = sum(
        json.loads(line).get("rendered") is True for line in records.getvalue().split("\n") if line
    )
    return Row("", final["fetched"], rendered, final["elapsed_s"],
               sum(tree_cpu_s(p) for p in pools) - cpu0, peak)  # fmt: skip


def measure(pages: int, workers: int, render_workers: int) -> list[Row]:
    js, ssr = JSSite(pages, seed=1), JSSite(pages, seed=1, server_side=True)
    (js_server, js_base), (ssr_server, ssr_base) = serve(js), serve(ssr)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rqcrawl-bench-") as tmp:
        redis_server = EmbeddedRedis(Path(tmp)).start()
        conn = Redis.from_url(redis_server.url)
        plain = LocalWorkers(redis_server.url, workers)
        renderers = LocalWorkers(
            redis_server.url, render_workers, worker_class=RENDER_WORKER_CLASS,
            queue=keys.RENDER_QUEUE,
        )  # fmt: skip
        try:
            wait_for_workers(conn, plain, renderers)
            runs = (
                ("server-side site, plain fetch", ssr_base, [], [plain]),
                ('server-side site, render = "auto"', ssr_base, ["auto"], [plain, renderers]),
                ("script-built site, render pattern", js_base, ["127.0.0.1"], [plain, renderers]),
                ('script-built site, render = "auto"', js_base, ["auto"], [plain, renderers]),
            )
            for n, (label, base, render, pools) in enumerate(runs):
                click.echo(f"{label}...", err=True)
                row = crawl(conn, f"render-bench-{n}", base, render, pools)
                rows.append(Row(label, *[getattr(row, f) for f in Row.__dataclass_fields__][1:]))
        finally:
            plain.stop()
            renderers.stop()
            redis_server.stop()
            js_server.shutdown()
            ssr_server.shutdown()
    return rows


def report(pages: int, workers: int, render_workers: int) -> None:
    load = os.getloadavg()[0]
    rows = measure(pages, workers, render_workers)
    click.echo(
        f"site: {pages} pages (bench.jssite); {workers} plain worker(s), {render_workers} render "
        f"worker(s) (Chromium {render_workers and 'one per worker'}); {os.cpu_count()} CPUs; "
        f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    header = ("crawl", "pages", "rendered", "wall s", "pages/s", "CPU ms/page",
              "render worker peak MB")  # fmt: skip
    table = [header, *(r.cells() for r in rows)]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        cells = [r[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)
        ]
        click.echo("  ".join(cells))
    click.echo(
        f"reproduce: rqcrawl bench --render --pages {pages} --workers {workers} "
        f"--render-workers {render_workers}"
    )
