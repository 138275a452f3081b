"""The commands that crawl on this machine: `crawl` (an embedded Redis, local workers, the
export as it goes) and `demo`."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import redis
from rq.utils import import_attribute

from rqcrawl import api, config
from rqcrawl.cli.control import started_crawl
from rqcrawl.cli.exporting import following_records
from rqcrawl.cli.group import main
from rqcrawl.cli.options import (
    configured_redis_url,
    connect,
    fresh_option,
    redis_option,
    setting_flags,
    shards_option,
)
from rqcrawl.config import ConfigError
from rqcrawl.defaults import DEFAULT_SLOTS, MAX_SLOTS
from rqcrawl.demo import DemoSite
from rqcrawl.ops import explain, statustext
from rqcrawl.ops.timings import Timings, crawl_moments
from rqcrawl.options import gathered
from rqcrawl.untrusted import printable_lines
from rqcrawl.workers.embedded import EmbeddedRedis
from rqcrawl.workers.runner import RENDER_WORKER_CLASS, WORKER_CLASS, LocalWorkers, preload, watch
from rqcrawl.workers.stopping import Stop, StopAsked

# `crawl` forks its workers once it has imported their modules (LocalWorkers, fork): on Linux,
# where a fork without exec is safe for what a worker loads (on macOS it is not).
FORK_WORKERS = sys.platform == "linux"


@dataclass
class LocalCrawl:
    """`crawl`'s options of the run on this machine (the crawl's settings are its flags)."""

    output: str
    fmt: str | None
    workers: int
    threads: int
    render_workers: int | None
    data_dir: str
    wacz_out: str | None
    show_timings: bool


@main.command()
@click.argument("urls", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(), required=True, help="Output file.")
@click.option(
    "--format", "fmt", metavar="FORMAT", default=None, help="As `export`'s; written as it goes."
)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True)
@click.option(
    "--threads",
    type=click.IntRange(min=1, max=MAX_SLOTS),
    default=DEFAULT_SLOTS,
    show_default=True,
    help="Requests in flight per worker process (threads): the network, not the CPU, is "
    "what a crawler waits for.",
)
@click.option(
    "--render-workers",
    type=click.IntRange(min=0),
    default=None,
    help="Browser workers of the render queue [default: 1 if `render` is set, else 0].",
)
@click.option("--crawl", "name", default=None, help="Crawl name (default: from the command).")
@shards_option
@fresh_option
@setting_flags
@click.option(
    "--data-dir",
    type=click.Path(),
    default=".rqcrawl",
    show_default=True,
    help="Where the embedded Redis keeps its data and local workers their logs.",
)
@click.option(
    "--wacz",
    "wacz_out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also pack the crawl as this WACZ web archive when it ends (or is stopped): its "
    "WARC files (in --warc DIR, else in FILE's name + '-warc' beside it) and the records "
    "of OUTPUT (JSON lines).",
)
@click.option(
    "--timings",
    "show_timings",
    is_flag=True,
    help="At the end, print to stderr when each phase happened: imports, Redis, workers, "
    "robots.txt, the last URL, the end seen, export and shutdown.",
)
@redis_option
@gathered(LocalCrawl, "run")
def crawl(urls, name, fresh, config_file, url, run: LocalCrawl, **flags) -> None:
    """Crawl on this machine until done and write OUTPUT: seed, run local workers, show
    progress. Uses an embedded Redis unless a Redis URL is configured; with --shards, those
    servers, with --workers processes for each. Running the same command again after an
    interruption resumes the crawl."""
    clock = Timings()
    clock.mark("imports done")
    planned = checked_plan(urls, name, config_file, run, flags)
    clock.mark("settings checked")
    # SIGTERM (kill, a service manager) stops the crawl as Ctrl-C does: workers and the
    # embedded Redis are in sessions of their own and would otherwise outlive us. Either
    # only asks: the stop is taken between two steps (rqcrawl.workers.stopping).
    stop = Stop(signal.SIGINT, signal.SIGTERM)
    shards = planned.cfg.shards
    target = shards[0] if shards else configured_redis_url(url)
    server = None if target else EmbeddedRedis(Path(run.data_dir))
    try:
        target = server_ready(server, run.threads, clock) if server else target
        # Seeded before the workers start: their release thread then knows the crawl from
        # its first look (it reads the running crawls once a second), and releases its
        # deferred URLs when due, not up to a second later.
        conn = connect(target)
        started = started_crawl(conn, planned, fresh)
        clock.mark("crawl seeded")
        # The records go to OUTPUT as they are written (a resumed crawl's file is appended
        # to): a crawl stopped halfway leaves the records of its pages so far. They leave
        # Redis then: the seeds' own are kept aside, to explain a crawl that fetched nothing.
        seeds, wanted = [], set(planned.seeds)

        def seen(records: list[dict]) -> None:
            seeds.extend(r for r in records if r["depth"] == 0 and r["url"] in wanted)

        # The workers are forked before the follower's thread starts: a fork copies a lock
        # another thread holds at that moment, held for ever in the child (a worker hung in
        # lxml on its first page while the follower validated the crawl's field selectors).
        # run_local stops them before the follower's last read.
        resumed = started.resumed or bool(started.table)
        packing = packed_at_end(planned.name, planned.cfg.warc_dir, run.output, run.wacz_out)
        with packing, local_fleet(
            shards or [target], run.workers, run.threads, Path(run.data_dir) / "workers",
            run.render_workers,
        ) as fleet, following_records(
            conn, planned.name, run.output, run.fmt, append=resumed, drain=True, seen=seen
        ) as following:  # fmt: skip
            clock.mark(f"{len(fleet[0].procs)} worker process(es) started")
            final = run_local(conn, planned, fleet, clock, stop, following.failure)
        clock.mark("export written")
        if not planned.cfg.revisit and final["fetched"] == 0:
            explain_seeds(planned.name, seeds)
        if final.get("thin_crawl"):  # a one-page crawl is not a finished site
            click.echo(f"warning: {final['thin_crawl']}", err=True)
    finally:
        if server:
            server.stop()
            clock.mark("embedded Redis stopped")
        if run.show_timings:
            click.echo(clock.show(), err=True)
        stop.exiting()


def server_ready(server: EmbeddedRedis, threads: int, clock: Timings) -> str:
    """The embedded Redis launched, and waited for once the workers' modules are imported
    (where they are forked, see FORK_WORKERS): its URL."""
    target = api.embedded_redis(server)
    if FORK_WORKERS:
        preload(threads, WORKER_CLASS)
        clock.mark("workers' modules imported")
    api.embedded_redis(server, ready=True)
    clock.mark("embedded Redis ready")
    return target


def checked_plan(urls, name, config_file, run: LocalCrawl, flags: dict) -> api.Plan:
    """The crawl planned and its run checked before anything starts: OUTPUT and the WACZ
    writable, the export's format and the render extra loaded, the WARC directory made
    (`run.render_workers` decided: 1 if the crawl renders, else 0, unless given)."""
    output, data_dir, wacz_out = run.output, run.data_dir, run.wacz_out
    planned = api.plan(
        urls, name, config_file=config_file, stable_name=True, task_dir=data_dir, **flags
    )
    writable_output(output)
    exporter = api.output_exporter(planned.cfg, output, run.fmt)  # a format it cannot write
    if wacz_out:
        writable_output(wacz_out)
        if exporter.extension != ".jsonl" or output == "-":
            raise click.UsageError("--wacz reads the records back from OUTPUT: a JSON lines file")
        if not planned.cfg.warc_dir:  # (the crawl's name, from its settings, says so)
            flags["warc_dir"] = str(Path(wacz_out).with_suffix("")) + "-warc"
            planned = api.plan(
                urls, name, config_file=config_file, stable_name=True, task_dir=data_dir,
                **flags,
            )  # fmt: skip
    if run.render_workers is None:
        run.render_workers = 1 if planned.cfg.render else 0
    if run.render_workers:  # without the render extra: one line now, before anything is seeded
        import_attribute(RENDER_WORKER_CLASS)
    if planned.cfg.warc_dir:
        try:
            config.check_writable_dir(planned.cfg.warc_dir)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None
    return planned


@main.command()
@click.option("-o", "--output", type=click.Path(), default="pages.jsonl", show_default=True)
@click.option("--max-depth", type=click.IntRange(min=0), default=3, show_default=True)
@click.pass_context
def demo(ctx: click.Context, output: str, max_depth: int) -> None:
    """Crawl a small demo web that this command serves on 127.0.0.1 (two sites, a robots.txt,
    a sitemap, a broken link), at default settings: a first crawl that needs no internet.
    It is `rqcrawl crawl` with --allow-private, which loopback sites need."""
    site = DemoSite().start()
    click.echo(f"demo sites on this machine: {' and '.join(site.origins())}", err=True)
    data_dir = Path(tempfile.mkdtemp(prefix="rqcrawl-demo-"))
    try:
        ctx.invoke(
            crawl,
            urls=site.urls,
            output=output,
            max_depth=max_depth,
            allow_private=True,
            name="demo",
            data_dir=str(data_dir),
        )
    finally:
        site.stop()
        keep_only_logs(data_dir)


def keep_only_logs(data_dir: Path) -> None:
    """The demo's Redis data goes when it ends; its workers' logs stay where the crawl said
    they are (`workers/` in the temporary directory, which the system clears)."""
    for entry in data_dir.iterdir():
        if entry.name != "workers":
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()


def writable_output(output: str) -> None:
    """The export is written once the crawl is over: fail now, in one line, if it cannot be."""
    if output == "-":
        return
    path = Path(output)
    folder = path.parent
    if path.is_dir():
        raise click.ClickException(f"cannot write {output}: it is a directory")
    if not folder.is_dir():
        raise click.ClickException(f"cannot write {output}: no directory {folder}")
    if not os.access(path if path.exists() else folder, os.W_OK):
        raise click.ClickException(f"cannot write {output}: permission denied")


@contextlib.contextmanager
def packed_at_end(name: str, warc_dir: str, records: str, out: str | None) -> Iterator[None]:
    """Pack crawl `name` as the WACZ `out` (when asked) once what runs inside is over (its
    workers stopped, its records delivered to `records`), also when it was stopped halfway:
    the pages so far. Then a packing error is one more line, the stop's own stays the exit."""
    if out is None:
        yield
        return
    try:
        yield
    except BaseException:
        try:
            _pack(name, warc_dir, records, out, " (the pages so far)")
        except api.CrawlError as exc:
            click.echo(f"error: {exc}", err=True)
        raise
    _pack(name, warc_dir, records, out)


def _pack(name: str, warc_dir: str, records: str, out: str, note: str = "") -> None:
    done = api.pack_wacz(name, warc_dir, records, out)
    click.echo(f"{out}: {done.pages} page(s), {done.captures} capture(s){note}", err=True)


@contextlib.contextmanager
def local_fleet(
    targets: list[str], workers: int, threads: int, log_dir: Path, render_workers: int
) -> Iterator[tuple[LocalWorkers, LocalWorkers]]:
    """The crawl's local fleet (api.local_fleet, forked where that is safe), said."""
    per = f" per shard ({len(targets)})" if len(targets) > 1 else ""
    also = f" and {render_workers} render worker(s)" if render_workers else ""
    click.echo(f"{workers} local worker(s){also}{per}, logs in {log_dir}", err=True)
    with api.local_fleet(
        targets, workers, threads, log_dir, render_workers, fork=FORK_WORKERS
    ) as fleet:
        yield fleet


def run_local(
    conn: redis.Redis,
    planned: api.Plan,
    fleet: tuple[LocalWorkers, LocalWorkers],
    clock: Timings,
    stop: Stop,
    failure: Callable[[], str | None],
) -> dict:
    """Run the planned crawl with the local `fleet` until it is over, and return its final
    status; a continuous one (revisits) never is: Ctrl-C or SIGTERM (`stop`) ends it, and
    its export is written all the same. A `failure` of the export (its follower) stops the
    crawl with one line: it can be resumed."""
    name, continuous = planned.name, bool(planned.cfg.revisit)
    pool, renderers = fleet
    try:
        final = watch(conn, name, pool, stop=stop, failure=failure)
        clock.mark("crawl over seen")
        for at in pool.registered(conn):  # read before the workers stop
            clock.mark("a worker ready (registered with RQ)", at)
        for what, at in crawl_moments(conn, name, planned.seeds):
            clock.mark(what, at)
    except StopAsked:
        click.echo("\ninterrupted: letting the workers finish their current page...", err=True)
        pool.stop()
        if not continuous:
            raise click.ClickException(
                f"crawl {name} stopped; run the same command again to resume it"
            ) from None
        final = api.status(conn, name, recover=False)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        pool.stop()
        renderers.stop()
        clock.mark("workers stopped")
    click.echo(
        f"crawl {name} {final['state']}: {final['fetched']} fetched, {final['failed']} failed, "
        f"{statustext.skip_summary(final)} in {final['elapsed_s']:.1f} s",
        err=True,
    )
    return final


def explain_seeds(name: str, ended: list[dict]) -> None:
    """When no page was fetched: each seed's reason (`ended`: the seeds' records) and what
    would change it, and a non-zero exit if every seed failed or was refused (a first crawl
    must not end quietly on "0 fetched")."""
    if not ended or any(r["outcome"] == "fetched" for r in ended):
        return
    for rec in ended:
        click.echo(printable_lines(explain.seed_problem(rec)), err=True)
    raise click.ClickException(f"crawl {name}: no seed could be crawled (reasons above)")
