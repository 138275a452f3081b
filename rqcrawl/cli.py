"""The `rqcrawl` command: seed a crawl, watch it, export it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click
import redis
from rq.utils import import_attribute

from rqcrawl import api, config
from rqcrawl.config import ConfigError, CrawlConfig
from rqcrawl.defaults import DEFAULT_SLOTS, FOLLOW_STOP_CHECK, MAX_SLOTS
from rqcrawl.demo import DemoSite
from rqcrawl.extras import MissingExtra
from rqcrawl.frontier import keys
from rqcrawl.lazygroup import LazyGroup
from rqcrawl.ops import explain, inspection, monitor, stats
from rqcrawl.ops.timings import Timings, crawl_moments
from rqcrawl.parse.urls import InvalidURL, canonicalize
from rqcrawl.quickexit import skip_final_collection
from rqcrawl.redisurl import client, masked
from rqcrawl.untrusted import printable_lines
from rqcrawl.workers import embedded as embedded_redis
from rqcrawl.workers.embedded import EmbeddedRedis
from rqcrawl.workers.stopping import Stop, StopAsked

if TYPE_CHECKING:
    from rqcrawl.frontier.tasks import TableExtent
from rqcrawl.workers.runner import (
    RENDER_WORKER_CLASS,
    WORKER_CLASS,
    LocalWorkers,
    preload,
    watch,
)

DEFAULT_REDIS_URL = "redis://localhost:6379/0"
# `crawl` forks its workers once it has imported their modules (LocalWorkers, fork): on Linux,
# where a fork without exec is safe for what a worker loads (on macOS it is not).
FORK_WORKERS = sys.platform == "linux"


def configured_redis_url(option: str | None) -> str | None:
    """Like the `rq` CLI: --url, then RQ_REDIS_URL, then REDIS_URL."""
    return option or os.environ.get("RQ_REDIS_URL") or os.environ.get("REDIS_URL")


def redis_url(option: str | None) -> str:
    return configured_redis_url(option) or DEFAULT_REDIS_URL


def connect(url: str) -> redis.Redis:
    """A checked connection; an unreachable Redis is a one-line error, not a traceback."""
    try:
        conn = client(url)
        conn.ping()
    except ValueError as exc:
        raise click.ClickException(masked(f"invalid Redis URL {url!r}: {exc}", url)) from None
    except redis.RedisError as exc:
        raise click.ClickException(masked(f"cannot reach Redis at {url}: {exc}", url)) from None
    return conn


redis_option = click.option(
    "--url", "-u", "url", default=None, help="Redis URL (default: $RQ_REDIS_URL, $REDIS_URL)."
)
data_dir_option = click.option(
    "--data-dir", type=click.Path(file_okay=False), default=".rqcrawl", show_default=True,
    help="With no Redis URL given: the embedded Redis that `crawl` keeps there, opened for "
    "this command (or the running crawl's); if none there, localhost:6379.",
)  # fmt: skip


def crawl_connection(url: str | None, data_dir: str) -> redis.Redis:
    """The Redis of a command that reads a crawl: the configured one (--url, $RQ_REDIS_URL,
    $REDIS_URL), else the embedded one of `crawl` in `data_dir` if it holds one (see
    embedded.opened: one opened for the command is stopped when it ends, however it ends),
    else localhost:6379."""
    configured = configured_redis_url(url)
    if configured:
        return connect(configured)
    try:
        local = click.get_current_context().with_resource(embedded_redis.opened(Path(data_dir)))
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    return connect(local or DEFAULT_REDIS_URL)


def _none_if_empty(_ctx, _param, value: tuple) -> list | None:
    """A repeatable flag given no time leaves its setting to the file or the default."""
    return list(value) or None


# Settings that `seed` and `crawl` take as flags; unset flags leave the file or the default.
# Their ranges are checked by the config model (config._BOUNDS), as for a file.
_SETTING_FLAGS = [
    click.option("--max-depth", type=int, help="Clicks from a seed."),
    click.option("--exact-depth/--no-exact-depth", default=None, help="Crawl level by level "
                 "for exact click depths (default); --no-exact-depth for broad crawls: no "
                 "level barrier, so no slow host holds up the others, and a URL's depth is "
                 "the one at which it was first found."),
    click.option("--allow-private", is_flag=True, default=None, help="Allow private addresses."),
    click.option("--delay", type=float, help="Seconds between two requests "
                 "to one host (default 1; robots.txt Crawl-delay may raise it)."),
    click.option("--host-concurrency", type=int,
                 help="Requests in flight per host (default 1)."),
    click.option("--robots/--no-robots", "obey_robots", default=None,
                 help="Obey robots.txt (default: yes)."),
    click.option("--page-directives/--no-page-directives", "obey_page_directives",
                 default=None, help="Obey meta robots, X-Robots-Tag and rel=nofollow "
                 "(default: yes)."),
    click.option("--sitemaps/--no-sitemaps", "sitemaps", default=None,
                 help="Read the seed sites' sitemaps (their robots.txt's Sitemap: lines, "
                 "and --sitemap) for URLs at depth 1 (default: yes)."),
    click.option("--sitemap", "sitemap_urls", multiple=True, callback=_none_if_empty,
                 help="A sitemap to read as well (repeat for more)."),
    click.option("--sitemap-probe", is_flag=True, default=None,
                 help="Also ask each seed site for /sitemap.xml (one request more each)."),
    click.option("--user-agent", help="The User-Agent (default: rqcrawl/VERSION "
                 "(+CONTACT)); robots.txt groups match its first word."),
    click.option("--contact", help="A URL or address where site owners reach you, in the "
                 "default User-Agent (please set one)."),
    click.option("--collapse-slashes/--keep-slashes", "collapse_slashes", default=None,
                 help="Read /a//b as /a/b (default); --keep-slashes where they matter."),
    click.option("--retries", type=int, help="Retries of transient failures."),
    click.option("--retry-base", type=float,
                 help="Seconds before the first retry; doubles each time."),
    click.option("--max-pages", type=int, help="URLs to admit (0: no limit)."),
    click.option("--max-pages-per-host", type=int,
                 help="URLs to admit per host (0: no limit)."),
    click.option("--max-host-share", type=float, help="Most share (0 to 1) of the admitted "
                 "URLs one host may have past the first 100 (0: no limit)."),
    click.option("--warc", "warc_dir", help="Archive responses as WARC files in this "
                 "directory (on each worker's machine)."),
    click.option("--revisit", help="Visit every URL again after DURATION (30s, 10m, 12h, "
                 "7d; adapts to change): a continuous crawl."),
    click.option("--db", help="SQLAlchemy URL of the task table of --revisit (default: "
                 "SQLite in the data directory; postgresql://... for a fleet)."),
    click.option("--content", callback=lambda ctx, param, value: word_list(value),
                 help="Page content in the records: any of text,markdown,html."),
    click.option("--config", "config_file", type=click.Path(), help="TOML settings file."),
]  # fmt: skip


def setting_flags(command):
    """Add the crawl-setting flags to a command (they arrive as keyword arguments)."""
    for option in reversed(_SETTING_FLAGS):
        command = option(command)
    return command


class Commands(LazyGroup):
    """The one place where a refusal of the API (api.CrawlError, already one line naming the
    crawl) becomes click's one-line error, and so does a Redis lost or unreachable after the
    first one answered (another shard of a sharded crawl) and an optional part asked for
    without its extra (MissingExtra)."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except api.CrawlError as exc:
            raise click.ClickException(str(exc)) from None
        except redis.RedisError as exc:
            raise click.ClickException(f"Redis: {exc}".splitlines()[0]) from None
        except MissingExtra as exc:
            raise click.ClickException(str(exc)) from None


# Commands whose modules load only when they run: the benchmark imports its site and Scrapy
# support, which no other command needs.
LAZY_SUBCOMMANDS = {
    "bench": (
        "rqcrawl.bench.command:bench",
        "Benchmark rqcrawl against Scrapy on a generated local site (or a static tree) and "
        "print one table.",
    ),
}


@click.group(cls=Commands, lazy_subcommands=LAZY_SUBCOMMANDS)
@click.version_option(package_name="rqcrawl")
def main() -> None:
    """rqcrawl: a distributed web crawler in which every URL is an RQ job."""
    skip_final_collection()  # the command's end is its exit, not 0.1 s later


def word_list(value: str | None) -> list | None:
    """A comma-separated list (None when the flag is not given)."""
    return None if value is None else [u.strip() for u in value.split(",") if u.strip()]


def url_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list | None:
    """A comma-separated list of URLs (--shards)."""
    return word_list(value)


shards_option = click.option(
    "--shards", callback=url_list, help="Redis URLs, comma-separated: one crawl sharded by "
    "host over these servers (each one holds its hosts' part; --url is then not used).",
)  # fmt: skip
records_option = click.option(
    "--records", "records_file", type=click.Path(exists=True), default=None,
    help="The JSON lines file (or a follower's directory) the crawl's records were delivered "
    "to (crawl -o, export --follow), once they left Redis [default: the records in Redis].",
)  # fmt: skip
fresh_option = click.option(
    "--fresh", is_flag=True, help="Delete the crawl's rows of the task table (an earlier run "
    "of this name, on another Redis) before seeding, rather than resuming them.",
)  # fmt: skip


@main.command()
@click.argument("urls", nargs=-1, required=True)
@click.option("--crawl", "name", default=None, help="Crawl name (default: derived, printed).")
@click.option("--priority", type=int, default=0, show_default=True,
              help="The seeds' priority: within a level the higher goes first.")  # fmt: skip
@shards_option
@fresh_option
@setting_flags
@redis_option
def seed(urls, name, priority, fresh, config_file, url, **flags) -> None:
    """Store a crawl's settings in Redis and queue its seed URLs at depth 0."""
    planned = api.plan(urls, name, config_file=config_file, priority=priority, **flags)
    started = started_crawl(connect(redis_url(url)), planned, fresh)
    warn_refused_seeds(planned)
    click.echo(
        f"crawl {started.name}: {started.admitted} of {len(planned.seeds)} seed(s) queued "
        f"(max depth {started.cfg.max_depth}"
        + ("" if started.cfg.exact_depth else ", first-found depth, no level barrier")
        + ")"
    )
    if started.cfg.revisit:
        click.echo(
            f"revisits every {stats.duration(started.cfg.revisit)}, task table "
            f"{masked(started.cfg.db, started.cfg.db)}"
        )
    click.echo(f"run workers with: {stats.WORKER_HINT}")
    if started.cfg.render:
        click.echo(
            f"and render workers with: rq worker {keys.RENDER_QUEUE} -w {RENDER_WORKER_CLASS}"
        )
    click.echo(started.name)


def warn_refused_seeds(planned: api.Plan) -> None:
    """One line on the seeds the address guard will refuse, with the flag that allows them
    (`crawl` says so at its end; a seeded crawl ends on workers, where no one reads it)."""
    if planned.cfg.allow_private:
        return
    refused = explain.refused_seeds(planned.seeds, planned.cfg.allow_networks)
    if refused:
        click.echo(f"warning: {explain.refusal(refused, len(planned.seeds))}", err=True)


def started_crawl(conn: redis.Redis, planned: api.Plan, fresh: bool = False) -> api.Started:
    """Start the planned crawl, saying so if it existed (it then keeps its own settings) or
    if the task table had its rows (resumed) or had them deleted (`fresh`)."""
    started = planned.start(conn, fresh)
    if started.resumed:
        click.echo(f"crawl {started.name} exists: resuming it with its own settings", err=True)
    if started.table:
        click.echo(f"crawl {started.name}: {resumed_table(started.table)}", err=True)
    if started.purged:
        click.echo(f"crawl {started.name}: {started.purged} URLs of its task table purged first")
    return started


def resumed_table(found: TableExtent) -> str:
    """The one line of a crawl whose task table had rows: its size and age."""

    def at(t: float | None) -> str:
        return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t)) if t else "never"

    ago = f", {stats.duration(time.time() - found.last_visit)} ago" if found.last_visit else ""
    return (
        f"resuming its task table's {found.rows} URLs (first visited {at(found.first_visit)}, "
        f"last visited {at(found.last_visit)}{ago}); --fresh deletes them first"
    )


@main.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@click.option("--config", "show_config", is_flag=True, help="The crawl's settings (TOML).")
@click.option("--watch", "watching", is_flag=True, help="Refresh until finished or cancelled.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    help="Seconds between two refreshes of --watch.",
)
@data_dir_option
@redis_option
def status(name, as_json, show_config, watching, interval, data_dir, url) -> None:
    """State and counters of crawl NAME, or its settings (--config)."""
    if watching and (as_json or show_config):
        raise click.UsageError("--watch cannot be combined with --json or --config")
    conn = crawl_connection(url, data_dir)
    if show_config:
        cfg = api.crawl_config(conn, name)
        shown = json.dumps(asdict(cfg), indent=2) if as_json else cfg.to_toml()
        for secret in (cfg.db, *cfg.shards, *cfg.proxies):  # their passwords
            shown = masked(shown, secret)
        click.echo(shown)
    elif watching:
        watch_status(conn, name, api.crawl_config(conn, name), interval)
    else:
        s = api.status(conn, name)
        click.echo(json.dumps(s, sort_keys=True) if as_json else stats.render(s))


@main.command()
@click.argument("name")
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@data_dir_option
@redis_option
def inspect(name, target, as_json, data_dir, url) -> None:
    """Where URL TARGET is in crawl NAME and why: held for its level, queued, running on a
    worker, deferred (politeness, Retry-After, robots.txt), due, ended, or unknown."""
    try:
        wanted = canonicalize(target)
    except InvalidURL as exc:
        raise click.ClickException(str(exc)) from None
    conn = crawl_connection(url, data_dir)
    api.crawl_config(conn, name)
    s = inspection.url_status(conn, name, wanted)
    click.echo(
        json.dumps(s, sort_keys=True, default=str)
        if as_json
        else printable_lines(inspection.render_url(s))
    )


@main.command()
@click.argument("name")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=inspection.HOSTS_LIMIT,
    show_default=True,
    help="Hosts shown, those with the most time left first.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@redis_option
def hosts(name, limit, as_json, url) -> None:
    """Per host of crawl NAME: URLs waiting, in flight, fetched, failed, the delay in force
    and its source, the next slot and robots.txt."""
    conn = connect(redis_url(url))
    api.crawl_config(conn, name)
    report = inspection.hosts_report(conn, name, limit)
    click.echo(
        json.dumps(report, sort_keys=True)
        if as_json
        else printable_lines(inspection.render_hosts(report))
    )


def interruptible(*signals: signal.Signals) -> None:
    """Make `signals` raise KeyboardInterrupt, also when we were started with them ignored
    (a shell starts a script's background job with SIGINT ignored, and children inherit it):
    Ctrl-C and kill -INT must still stop a watch. (`crawl` and `export --follow` take their
    stop through rqcrawl.workers.stopping instead: a KeyboardInterrupt breaks any call.)"""
    for sig in signals:
        signal.signal(sig, signal.default_int_handler)


def watch_status(conn: redis.Redis, name: str, cfg: CrawlConfig, interval: float) -> None:
    """Ctrl-C is the normal way to stop watching: no traceback, exit status 0."""
    interruptible(signal.SIGINT)
    try:
        monitor.watch_status(conn, name, cfg, interval)
    except KeyboardInterrupt:
        click.echo()
    except LookupError as exc:
        raise click.ClickException(str(exc)) from None
    except redis.RedisError as exc:
        raise click.ClickException(f"lost Redis: {exc}") from None


@main.command()
@click.option("--port", type=click.IntRange(1, 65535), default=9310, show_default=True)
@click.option("--bind", default="127.0.0.1", show_default=True, help="Address to listen on.")
@redis_option
def metrics(port, bind, url) -> None:
    """Serve Prometheus metrics of every crawl of this Redis on http://BIND:PORT/metrics."""
    from rqcrawl.ops import metrics as exporter  # prometheus_client only for this command

    conn = connect(redis_url(url))
    try:
        server = exporter.serve(conn, port, bind)
    except OSError as exc:
        raise click.ClickException(f"cannot serve on {bind}:{port}: {exc.strerror}") from None
    click.echo(f"serving http://{bind}:{port}/metrics (Ctrl-C to stop)", err=True)
    exporter.serve_until_interrupted(server)


@main.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of the crawls' status.")
@redis_option
def list_crawls(as_json, url) -> None:
    """Every crawl of this Redis: state, fetched/admitted, pages/s."""
    conn = connect(redis_url(url))
    rows = []
    for name in api.crawls(conn):
        try:
            rows.append(api.status(conn, name, recover=False))
        except api.CrawlError as exc:  # one broken crawl must not hide the others
            click.echo(f"warning: {exc}", err=True)
            continue
        if rows[-1].get("table_error"):
            click.echo(f"warning: crawl {name}: {rows[-1]['table_error']}", err=True)
    if as_json:
        click.echo(json.dumps(rows, sort_keys=True))
    else:
        click.echo(stats.table(rows) if rows else "no crawls in this Redis")


FAILURE_COLUMNS = ("url", "reason", "status", "error", "attempts")  # of `failures --json`


@main.command()
@click.argument("name")
@click.option("--reason", "wanted", multiple=True, help="Only this reason (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option(
    "--skipped",
    "with_skipped",
    is_flag=True,
    help="The skipped URLs too (refused addresses, robots.txt, out of scope...), their outcome "
    "as their reason.",
)
@records_option
@data_dir_option
@redis_option
def failures(name, wanted, as_json, with_skipped, records_file, data_dir, url) -> None:
    """The failed URLs of crawl NAME: reason, HTTP status, URL (and the error with --json)."""
    conn = crawl_connection(url, data_dir)
    away = records_file is None and warn_delivered(conn, name, "listed: --records FILE reads them")
    for record in api.failures(conn, name, wanted, records_file, with_skipped):
        if as_json:
            click.echo(json.dumps({k: record[k] for k in FAILURE_COLUMNS}))
        else:
            click.echo(f"{record['reason']}  {record['status'] or '-'}  {record['url']}")
    s = api.status(conn, name, recover=False)
    if s["skipped_total"] and not with_skipped and not away:  # (--skipped lists what is here)
        said = f"crawl {name}: {stats.skip_summary(s)}, not listed: --skipped lists them"
        click.echo(said, err=True)


@main.command()
@click.argument("name")
@redis_option
def pause(name, url) -> None:
    """Stop releasing URLs of crawl NAME; running pages finish, queued ones wait."""
    paused = api.pause(connect(redis_url(url)), name)
    click.echo(f"crawl {name} paused" if paused else f"crawl {name} was already paused")


@main.command()
@click.argument("name")
@redis_option
def resume(name, url) -> None:
    """Release the held URLs of paused crawl NAME again."""
    api.resume(connect(redis_url(url)), name)
    click.echo(f"crawl {name} resumed")


@main.command()
@click.argument("name")
@redis_option
def cancel(name, url) -> None:
    """Stop crawl NAME for good, dropping its pending URLs and queued jobs."""
    done = api.cancel(connect(redis_url(url)), name)
    click.echo(
        f"crawl {name} cancelled: {done.dropped} URL(s) dropped ({done.held} held, "
        f"{done.in_flight} in flight; {done.jobs_removed} queued RQ job(s) removed)"
    )


@main.command()
@click.argument("name")
@click.option("--force", is_flag=True, help="Even if the crawl is running or paused.")
@redis_option
def purge(name, force, url) -> None:
    """Delete every key and RQ job of crawl NAME (and nothing of any other crawl)."""
    done = api.purge(connect(redis_url(url)), name, force)
    rows = f", {done.tasks} task row(s)" if done.tasks else ""
    click.echo(f"crawl {name} purged: {done.keys} key(s){rows} and {done.jobs} RQ job(s) deleted")


@main.command()
@click.argument("name")
@click.option("--every", default="10s", show_default=True, help="Time between two pumps.")
@click.option("--once", is_flag=True, help="Pump once and exit.")
@redis_option
def pump(name, every, once, url) -> None:
    """Move the due revisits of crawl NAME from its task table into Redis, every few
    seconds until interrupted: for fleets of stock `rq worker` (the recommended worker
    and `rqcrawl crawl` pump by themselves)."""
    try:
        period = config.parse_duration("--every", every)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    conn = connect(redis_url(url))
    cfg = api.crawl_config(conn, name)
    click.echo(f"pumping crawl {name} every {stats.duration(period)} from {masked(cfg.db, cfg.db)}")
    try:
        while True:
            readmitted = api.pump(conn, name, period)
            if readmitted:
                click.echo(f"{readmitted} URL(s) due for a revisit readmitted")
            if once:
                return
            time.sleep(period)
    except KeyboardInterrupt:
        click.echo("stopped", err=True)


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
@data_dir_option
@redis_option
def export(
    name, output, fmt, since, changes, raw_csv, skip_noindex, warc_dir, records_file,
    following, rotate_records, rotate_bytes, data_dir, url,
) -> None:  # fmt: skip
    """Write every recorded URL of crawl NAME not yet delivered to a follower to a file, one
    row per visit; with --since and --change, a change feed; with --follow, as they come;
    with --format wacz, a web archive of the crawl."""
    conn = crawl_connection(url, data_dir)
    if fmt == "wacz" or (fmt is None and output.endswith(".wacz")):
        if since or changes or raw_csv or skip_noindex or following or output == "-":
            raise click.UsageError("a WACZ is a file of the whole crawl: no filters, no '-'")
        done = api.export_wacz(conn, name, output, warc_dir, records_file)
        click.echo(
            f"{output}: {done.warcs} WARC file(s), {done.captures} capture(s), "
            f"{done.pages} page(s)" + (f", {done.uncaptured} page(s) not in the WARC files"
            if done.uncaptured else ""), err=True,
        )  # fmt: skip
        for line in done.cut:
            click.echo(f"warning: {line}", err=True)
        return
    if records_file:
        raise click.UsageError("--records is read by --format wacz only")
    if not following:
        write_export(conn, name, output, fmt, since, changes, raw_csv, skip_noindex)
        return
    if output == "-" or since or changes or raw_csv or skip_noindex:
        raise click.UsageError("--follow writes every record to a file or directory")
    stop = Stop(signal.SIGINT, signal.SIGTERM)  # (only asks: see rqcrawl.workers.stopping)
    try:
        with contextlib.suppress(StopAsked):
            with following_records(conn, name, output, fmt, rotate_records, rotate_bytes) as f:
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
    rotate_records: int = 0,
    rotate_bytes: int = 0,
    append: bool = True,
    drain: bool = False,
    seen: Callable[[list[dict]], None] | None = None,
) -> Iterator[FollowerThread]:
    """A follower of crawl NAME in a thread (api.follow_records). Leaving the block ends it
    once it has delivered what the stream holds, or, left by a stop signal (StopAsked)
    without `drain`, once what it took is on disk; its count is printed, however the block
    was left."""
    stop, ending, following = threading.Event(), threading.Event(), FollowerThread()

    def deliver() -> None:
        try:
            following.rows = api.follow_records(
                conn, name, output, fmt, rotate_records, rotate_bytes, append, stop, ending, seen
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


def write_export(
    conn: redis.Redis,
    name: str,
    output: str,
    fmt: str | None,
    since: str | None = None,
    changes: str = "",
    raw_csv: bool = False,
    skip_noindex: bool = False,
) -> None:
    out = sys.stdout if output == "-" else output
    rows = api.export(
        conn, name, out, fmt, since=since, changes=changes, raw_csv=raw_csv,
        skip_noindex=skip_noindex,
    )  # fmt: skip
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
def crawl(
    urls, output, fmt, workers, threads, render_workers, name, fresh, config_file, data_dir,
    wacz_out, show_timings, url, **flags,
) -> None:  # fmt: skip
    """Crawl on this machine until done and write OUTPUT: seed, run local workers, show
    progress. Uses an embedded Redis unless a Redis URL is configured; with --shards, those
    servers, with --workers processes for each. Running the same command again after an
    interruption resumes the crawl."""
    clock = Timings()
    clock.mark("imports done")
    planned = api.plan(
        urls, name, config_file=config_file, stable_name=True, task_dir=data_dir, **flags
    )
    writable_output(output)
    exporter = api.output_exporter(planned.cfg, output, fmt)  # a format it cannot write: said now
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
    if render_workers is None:
        render_workers = 1 if planned.cfg.render else 0
    if render_workers:  # without the render extra: one line now, before anything is seeded
        import_attribute(RENDER_WORKER_CLASS)
    if planned.cfg.warc_dir:
        try:
            config.check_writable_dir(planned.cfg.warc_dir)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None
    clock.mark("settings checked")
    # SIGTERM (kill, a service manager) stops the crawl as Ctrl-C does: workers and the
    # embedded Redis are in sessions of their own and would otherwise outlive us. Either
    # only asks: the stop is taken between two steps (rqcrawl.workers.stopping).
    stop = Stop(signal.SIGINT, signal.SIGTERM)
    shards = planned.cfg.shards
    target = shards[0] if shards else configured_redis_url(url)
    server = None if target else EmbeddedRedis(Path(data_dir))
    try:
        if server:  # launched, and waited for once the workers' modules are imported
            target = api.embedded_redis(server)
        if FORK_WORKERS:
            preload(threads, WORKER_CLASS)
            clock.mark("workers' modules imported")
        if server:
            api.embedded_redis(server, ready=True)
            clock.mark("embedded Redis ready")
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
        with packed_at_end(planned.name, planned.cfg.warc_dir, output, wacz_out), local_fleet(
            shards or [target], workers, threads, Path(data_dir) / "workers",
            render_workers,
        ) as fleet, following_records(
            conn, planned.name, output, fmt, append=resumed, drain=True, seen=seen
        ) as following:  # fmt: skip
            clock.mark(f"{len(fleet[0].procs)} worker process(es) started")
            continuous = bool(planned.cfg.revisit)
            final = run_local(conn, planned, fleet, continuous, clock, stop, following.failure)
        clock.mark("export written")
        if not continuous and final["fetched"] == 0:
            explain_seeds(planned.name, seeds)
        if final.get("thin_crawl"):  # a one-page crawl is not a finished site
            click.echo(f"warning: {final['thin_crawl']}", err=True)
    finally:
        if server:
            server.stop()
            clock.mark("embedded Redis stopped")
        if show_timings:
            click.echo(clock.show(), err=True)
        stop.exiting()


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
    continuous: bool,
    clock: Timings,
    stop: Stop,
    failure: Callable[[], str | None],
) -> dict:
    """Run the planned crawl with the local `fleet` until it is over, and return its final
    status; a `continuous` one (revisits) never is: Ctrl-C or SIGTERM (`stop`) ends it, and
    its export is written all the same. A `failure` of the export (its follower) stops the
    crawl with one line: it can be resumed."""
    name = planned.name
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
        f"{stats.skip_summary(final)} in {final['elapsed_s']:.1f} s",
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
