"""The `export` command: records to a file, once or as they come (a follower)."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import click
import redis

from rqcrawl import api
from rqcrawl.cli.group import main
from rqcrawl.cli.options import CrawlRedis, crawl_redis, records_option
from rqcrawl.defaults import FOLLOW_STOP_CHECK
from rqcrawl.options import gathered
from rqcrawl.workers.stopping import Stop, StopAsked


@dataclass(frozen=True)
class Export:
    """`export`'s options but the crawl's name and its Redis."""

    output: str
    fmt: str | None
    since: str | None
    changes: str
    raw_csv: bool
    skip_noindex: bool
    warc_dir: str | None
    records_file: str | None
    following: bool
    rotate_records: int
    rotate_bytes: int

    def feed(self) -> dict:
        """The records wanted and their CSV form, as api.export takes them."""
        return {
            "since": self.since, "changes": self.changes, "raw_csv": self.raw_csv,
            "skip_noindex": self.skip_noindex,
        }  # fmt: skip


@main.command()
@click.argument("name")
@click.option(
    "-o", "--output", "output", type=click.Path(), required=True, help="File ('-': stdout)."
)
@click.option(
    "--format",
    "fmt",
    metavar="FORMAT",
    default=None,
    help=f"One of {', '.join(api.export_formats())}, wacz, or a format of the `exporters` "
    "setting. Default: from the file name, else jsonl. wacz: the crawl's WARC files with their "
    "index and its pages (docs/howto/export.md).",
)
@click.option(
    "--since",
    metavar="TIME",
    default=None,
    help="Only records since TIME: ISO-8601 (UTC unless it says) or a duration ago (1h, 2d).",
)
@click.option(
    "--change",
    "changes",
    metavar="KINDS",
    default="",
    help="Only records whose change is one of KINDS: new,changed,unchanged,gone.",
)
@click.option(
    "--raw-csv",
    is_flag=True,
    help="CSV cells as recorded: no quote before cells starting with = + - @ (formulas).",
)
@click.option(
    "--skip-noindex",
    is_flag=True,
    help="Leave out the pages that asked not to be indexed (meta robots, X-Robots-Tag).",
)
@click.option(
    "--warc",
    "warc_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="wacz: where the crawl's WARC files are [default: its warc_dir].",
)
@records_option
@click.option(
    "--follow",
    "following",
    is_flag=True,
    help="Deliver records as they are written, until the crawl ends (or Ctrl-C), and trim "
    "them from Redis; OUTPUT is a file appended to, or a directory of numbered files.",
)
@click.option(
    "--rotate-records",
    type=click.IntRange(min=0),
    default=0,
    help="With --follow into a directory: a new file after this many records (0: none).",
)
@click.option(
    "--rotate-bytes",
    type=click.IntRange(min=0),
    default=0,
    help="With --follow into a directory: a new file past this size (0: none).",
)
@crawl_redis
@gathered(Export, "run")
def export(name: str, where: CrawlRedis, run: Export) -> None:
    """Write every recorded URL of crawl NAME not yet delivered to a follower to a file, one
    row per visit; with --since and --change, a change feed; with --follow, as they come;
    with --format wacz, a web archive of the crawl."""
    conn = where.connect()
    output, filtered = run.output, run.since or run.changes or run.raw_csv or run.skip_noindex
    if run.fmt == "wacz" or (run.fmt is None and output.endswith(".wacz")):
        if filtered or run.following or output == "-":
            raise click.UsageError("a WACZ is a file of the whole crawl: no filters, no '-'")
        done = api.export_wacz(conn, name, output, run.warc_dir, run.records_file)
        click.echo(
            f"{output}: {done.warcs} WARC file(s), {done.captures} capture(s), "
            f"{done.pages} page(s)" + (f", {done.uncaptured} page(s) not in the WARC files"
            if done.uncaptured else ""), err=True,
        )  # fmt: skip
        for line in done.cut:
            click.echo(f"warning: {line}", err=True)
        return
    if run.records_file:
        raise click.UsageError("--records is read by --format wacz only")
    if not run.following:
        write_export(conn, name, output, run.fmt, **run.feed())
        return
    if output == "-" or filtered:
        raise click.UsageError("--follow writes every record to a file or directory")
    rotation = {"rotate_records": run.rotate_records, "rotate_bytes": run.rotate_bytes}
    stop = Stop(signal.SIGINT, signal.SIGTERM)  # (only asks: see rqcrawl.workers.stopping)
    try:
        with contextlib.suppress(StopAsked):
            with following_records(conn, name, output, run.fmt, **rotation) as f:
                while not f.done.wait(FOLLOW_STOP_CHECK):
                    stop.check()
    finally:
        stop.exiting()


@dataclass
class FollowerThread:
    """A follower running in a thread: `done` is set when it ended, `error` says why if it
    failed (said in one line by the command)."""

    done: threading.Event = field(default_factory=threading.Event)
    error: Exception | None = None
    rows: int = 0

    def failure(self) -> str | None:
        """Why the follower failed, once it did: a crawl must not run on without it."""
        if self.error is None:
            return None
        return f"{self.error}; the crawl stopped: run the same command again to resume it"


@contextmanager
def following_records(
    conn: redis.Redis,
    name: str,
    output: str,
    fmt: str | None,
    drain: bool = False,
    **how: Any,
) -> Iterator[FollowerThread]:
    """A follower of crawl NAME in a thread (api.follow_records; `how`: api.Following's but
    `stop` and `ending`, by name). Leaving the block ends it
    once it has delivered what the stream holds, or, left by a stop signal (StopAsked)
    without `drain`, once what it took is on disk; its count is printed, however the block
    was left."""
    stop, ending, following = threading.Event(), threading.Event(), FollowerThread()

    def deliver() -> None:
        try:
            following.rows = api.follow_records(
                conn, name, output, fmt, stop=stop, ending=ending, **how
            )
        except Exception as exc:  # noqa: BLE001 - said in one line by the main thread
            following.error = exc
        finally:
            following.done.set()

    thread = threading.Thread(target=deliver, name="follower", daemon=True)
    thread.start()
    try:
        yield following
    except StopAsked:
        (ending if drain else stop).set()
        raise
    finally:
        ending.set()
        thread.join()
        if following.error is None:
            click.echo(f"{following.rows} row(s) written to {output}", err=True)
    if following.error:  # (a crawl's watch said it already, and how to resume)
        raise click.ClickException(str(following.error))


def write_export(conn: redis.Redis, name: str, output: str, fmt: str | None, **feed: Any) -> None:
    """The export of crawl NAME to OUTPUT ('-': stdout), `feed` as api.export takes it."""
    out = sys.stdout if output == "-" else output
    rows = api.export(conn, name, out, fmt, **feed)
    click.echo(f"{rows} row(s) written to {output}", err=True)
    warn_delivered(conn, name, "in this export")


def warn_delivered(conn: redis.Redis, name: str, missing: str) -> bool:
    """One line when followers took records of crawl NAME: how many went where (a follower
    is named after its machine and output), and that they are `missing` here; whether so."""
    if not api.delivered(conn, name):
        return False
    went = api.delivered_to(conn, name)
    where = ", ".join(f"{n} to {output}" for output, n in sorted(went.items()))
    where = where or "crawl -o, export --follow"  # (a follower of an older version)
    click.echo(
        f"warning: crawl {name}: the records a follower delivered ({where}) left Redis and are "
        f"not {missing}",
        err=True,
    )
    return True
