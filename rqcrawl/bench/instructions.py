"""`rqcrawl bench --redis-instructions`: the instructions Redis executes a page, counted by
valgrind's callgrind while the recommended workers crawl the bench site.

Why a count and not CPU time: on a shared or virtual machine the CPU's speed moves by
itself (the same crawl of the same code has run at 320 and at 510 pages/s in consecutive
runs), so two versions of a script compare only as a median of many interleaved runs. An
instruction count of the same crawl moves by a few per cent (how many URLs each script call
happens to release), so one run of each shows a 5 % change.

What it is not: Redis under valgrind runs about 30 times slower, so the crawl is Redis-bound
and its pages/s mean nothing; instructions are not cycles (a cache miss costs no more than an
add here). The count covers the server's whole life (start, the Bloom filter's allocation,
the crawl, shutdown) and any child it forked (an AOF rewrite), which a 1,000-page crawl
spreads to under 1 % a page.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import click

from .runs import run_rqcrawl
from .site import SiteSpec

KEPT = Path("redis-callgrind.out")  # the profile of the last run, for callgrind_annotate
TOTALS = re.compile(rb"^totals: (\d+)", re.M)


def count(out_dir: Path) -> int:
    """The instructions of every process callgrind followed (the server, a forked child)."""
    return sum(int(m.group(1)) for f in out_dir.iterdir() if (m := TOTALS.search(f.read_bytes())))


def run(spec: SiteSpec, workers: int, site_procs: int) -> tuple[float, float]:
    """One crawl of `spec`: Redis's instructions and its commands a page."""
    with tempfile.TemporaryDirectory(prefix="rqcrawl-callgrind-") as tmp:
        out = Path(tmp)
        launcher = ("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/redis.%p.out")
        result = run_rqcrawl(spec, 0.0, workers, 1, site_procs, redis_launcher=launcher)
        pages = max(result.pages, 1)
        largest = max(out.iterdir(), key=lambda f: f.stat().st_size)
        shutil.copyfile(largest, KEPT)
        return count(out) / pages, result.redis["commands"] / pages


def report(spec: SiteSpec, workers: int, site_procs: int, repeat: int) -> None:
    if not shutil.which("valgrind"):
        raise click.ClickException("--redis-instructions needs valgrind (apt install valgrind)")
    per_page, commands = [], []
    for i in range(repeat):
        click.echo(f"rqcrawl {workers}x1 with Redis under callgrind, run {i + 1}/{repeat}...",
                   err=True)  # fmt: skip
        instructions, cmds = run(spec, workers, site_procs)
        per_page.append(instructions)
        commands.append(cmds)
    runs = ", ".join(f"{n / 1e6:.3f}" for n in per_page)
    click.echo(
        f"site: {spec.pages} pages; rqcrawl, {workers} worker process(es); Redis under "
        f"valgrind's callgrind\n"
        f"Redis instructions a page: {sorted(per_page)[len(per_page) // 2] / 1e6:.3f} M "
        f"(median; runs: {runs} M); commands a page {sorted(commands)[len(commands) // 2]:.1f}\n"
        f"profile of the last run: {KEPT} (callgrind_annotate --inclusive=yes {KEPT})\n"
        f"reproduce: rqcrawl bench --redis-instructions --pages {spec.pages} "
        f"--workers {workers} --repeat {repeat} --site-procs {site_procs}"
    )
