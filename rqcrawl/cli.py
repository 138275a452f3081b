"""The `rqcrawl` command: seed a crawl, watch it, export it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from urllib.parse import urlsplit

import click
import redis
from sqlalchemy.exc import SQLAlchemyError

from . import config, control, keys, monitor, sinks, stats, tasks
from .config import ConfigError, CrawlConfig
from .embedded import EmbeddedRedis
from .frontier import Frontier
from .hooks import HookError
from .lazygroup import LazyGroup
from .redisurl import masked
from .runner import WORKER_CLASS, LocalWorkers, watch
from .state import crawl_names, is_known
from .urls import InvalidURL, canonicalize, host_of

DEFAULT_REDIS_URL = "redis://localhost:6379/0"
# The recommended worker, through the variable RQ reads, so the card's command stays the same.
WORKER_HINT = f"RQ_WORKER_CLASS={WORKER_CLASS} rq worker {keys.QUEUE_NAME} --with-scheduler"


def configured_redis_url(option: str | None) -> str | None:
    """Like the `rq` CLI: --url, then RQ_REDIS_URL, then REDIS_URL."""
    return option or os.environ.get("RQ_REDIS_URL") or os.environ.get("REDIS_URL")


def redis_url(option: str | None) -> str:
    return configured_redis_url(option) or DEFAULT_REDIS_URL


def connect(url: str) -> redis.Redis:
    """A checked connection; an unreachable Redis is a one-line error, not a traceback."""
    try:
        conn = redis.Redis.from_url(url)
        conn.ping()
    except ValueError as exc:
        raise click.ClickException(masked(f"invalid Redis URL {url!r}: {exc}", url)) from None
    except redis.RedisError as exc:
        raise click.ClickException(masked(f"cannot reach Redis at {url}: {exc}", url)) from None
    return conn


def existing(conn: redis.Redis, crawl: str) -> CrawlConfig:
    try:
        cfg = config.load(conn, crawl)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if cfg is None:
        raise click.ClickException(f"no crawl named {crawl!r} in this Redis")
    return cfg


redis_option = click.option(
    "--url", "-u", "url", default=None, help="Redis URL (default: $RQ_REDIS_URL, $REDIS_URL)."
)

# Settings that `seed` and `crawl` take as flags; unset flags leave the file or the default.
# Their ranges are checked by the config model (config._BOUNDS), as for a file.
_SETTING_FLAGS = [
    click.option("--max-depth", type=int, help="Clicks from a seed."),
    click.option("--allow-private", is_flag=True, default=None, help="Allow private addresses."),
    click.option("--delay", type=float, help="Seconds between two requests "
                 "to one host (default 1; robots.txt Crawl-delay may raise it)."),
    click.option("--host-concurrency", type=int,
                 help="Requests in flight per host (default 1)."),
    click.option("--robots/--no-robots", "obey_robots", default=None,
                 help="Obey robots.txt (default: yes)."),
    click.option("--retries", type=int, help="Retries of transient failures."),
    click.option("--retry-base", type=float,
                 help="Seconds before the first retry; doubles each time."),
    click.option("--max-pages", type=int, help="URLs to admit (0: no limit)."),
    click.option("--max-pages-per-host", type=int,
                 help="URLs to admit per host (0: no limit)."),
    click.option("--warc", "warc_dir", help="Archive responses as WARC files in this "
                 "directory (on each worker's machine)."),
    click.option("--revisit", help="Visit every URL again after DURATION (30s, 10m, 12h, "
                 "7d; adapts to change): a continuous crawl."),
    click.option("--db", help="SQLAlchemy URL of the task table of --revisit (default: "
                 "SQLite in the data directory; postgresql://... for a fleet)."),
    click.option("--config", "config_file", type=click.Path(), help="TOML settings file."),
]  # fmt: skip


def setting_flags(command):
    """Add the crawl-setting flags to a command (they arrive as keyword arguments)."""
    for option in reversed(_SETTING_FLAGS):
        command = option(command)
    return command


# Commands whose modules load only when they run: the benchmark imports its site and Scrapy
# support, which no other command needs.
LAZY_SUBCOMMANDS = {
    "bench": (
        "rqcrawl.bench.command:bench",
        "Benchmark rqcrawl against Scrapy on a generated local site and print one table.",
    ),
}


@click.group(cls=LazyGroup, lazy_subcommands=LAZY_SUBCOMMANDS)
@click.version_option(package_name="rqcrawl")
def main() -> None:
    """rqcrawl: a distributed web crawler in which every URL is an RQ job."""


@main.command()
@click.argument("urls", nargs=-1, required=True)
@click.option("--crawl", "name", default=None, help="Crawl name (default: derived, printed).")
@setting_flags
@redis_option
def seed(urls, name, config_file, url, **flags) -> None:
    """Store a crawl's settings in Redis and queue its seed URLs at depth 0."""
    seeds = canonical_seeds(urls)
    cfg = with_task_table(scoped(settings(config_file, **flags), seeds), Path(".rqcrawl"))
    name = checked_name(name) or derived_name(seeds[0])
    conn = connect(redis_url(url))
    cfg, new = start_crawl(conn, name, cfg, seeds)
    click.echo(f"crawl {name}: {new} of {len(seeds)} seed(s) queued (max depth {cfg.max_depth})")
    if cfg.revisit:
        click.echo(f"revisits every {stats.duration(cfg.revisit)}, task table {masked_db(cfg)}")
    click.echo(f"run workers with: {WORKER_HINT}")
    click.echo(name)


def start_crawl(
    conn: redis.Redis, name: str, cfg: CrawlConfig, seeds: list[str]
) -> tuple[CrawlConfig, int]:
    """Store the config of a new crawl (an existing one keeps its own) and admit the seeds,
    all or nothing (control.start)."""
    try:
        cfg, new, resumed = control.start(conn, name, cfg, seeds)
    except (ConfigError, redis.RedisError) as exc:
        raise click.ClickException(f"crawl {name} not started: {exc}") from None
    if resumed:
        click.echo(f"crawl {name} exists: resuming it with its own settings", err=True)
    return cfg, new


def with_task_table(cfg: CrawlConfig, data_dir: Path) -> CrawlConfig:
    """A crawl with revisits and no --db keeps its task table in SQLite in `data_dir`."""
    if not cfg.revisit or cfg.db:
        return cfg
    return CrawlConfig.from_dict({"db": tasks.default_url(data_dir)}, cfg)


def masked_db(cfg: CrawlConfig) -> str:
    return masked(cfg.db, cfg.db)


def checked_name(name: str | None) -> str | None:
    if name is not None and not keys.valid_crawl_name(name):
        raise click.ClickException(
            f"invalid crawl name {name!r}: use letters, digits, _ and - (at most 64)"
        )
    return name


def scoped(cfg: CrawlConfig, seeds: list[str]) -> CrawlConfig:
    """Without explicit scope_hosts, a crawl stays on its seeds' hosts. Hosts are compared
    with canonical URLs, so they are lowercased here."""
    hosts = [h.lower() for h in cfg.scope_hosts] or sorted({host_of(s) for s in seeds})
    return CrawlConfig.from_dict({"scope_hosts": hosts}, cfg)


def canonical_seeds(urls: tuple[str, ...]) -> list[str]:
    seeds = []
    for raw in urls:
        try:
            raw.encode("utf-8")  # bytes that are not UTF-8 arrive as lone surrogates
            seeds.append(canonicalize(raw))
        except UnicodeEncodeError:
            raise click.ClickException(f"invalid URL {raw!r}: not UTF-8") from None
        except InvalidURL as exc:
            raise click.ClickException(str(exc)) from None
    return seeds


def settings(config_file: str | None, **flags) -> CrawlConfig:
    """The settings of a new crawl (config.layered), or a one-line error."""
    try:
        return config.layered(config_file, flags)
    except (ConfigError, HookError) as exc:
        raise click.ClickException(str(exc)) from None


def derived_name(seed_url: str, stable_key: str | None = None) -> str:
    """The seed's host and a timestamp, or a hash of `stable_key` so that the same command
    names the same crawl (how `rqcrawl crawl` resumes)."""
    host = re.sub(r"[^A-Za-z0-9]+", "-", urlsplit(seed_url).hostname or "").strip("-")
    host = host[:40].rstrip("-") or "crawl"  # a name starting with - would read as a flag
    if stable_key is not None:
        return f"{host}-{hashlib.sha1(stable_key.encode()).hexdigest()[:10]}"
    return f"{host}-{time.strftime('%Y%m%d-%H%M%S')}"


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
@redis_option
def status(name, as_json, show_config, watching, interval, url) -> None:
    """State and counters of crawl NAME, or its settings (--config)."""
    if watching and (as_json or show_config):
        raise click.UsageError("--watch cannot be combined with --json or --config")
    conn = connect(redis_url(url))
    cfg = existing(conn, name)
    if show_config:
        shown = json.dumps(asdict(cfg), indent=2) if as_json else cfg.to_toml()
        click.echo(masked(shown, cfg.db))
    elif watching:
        watch_status(conn, name, cfg, interval)
    else:
        with crawl_errors(name):
            Frontier(conn, name, cfg).maybe_reap()
        s = crawl_status(conn, name)
        click.echo(json.dumps(s, sort_keys=True) if as_json else stats.render(s))


def crawl_status(conn: redis.Redis, name: str) -> dict:
    """stats.status, with a crawl whose keys are damaged or whose settings are missing or
    unreadable as a one-line error naming it."""
    if not keys.valid_crawl_name(name):
        raise click.ClickException(f"crawl {name!r}: invalid name (purge it with redis-cli)")
    with crawl_errors(name):
        s = stats.status(conn, name)
    if s is None:
        raise click.ClickException(
            f"crawl {name} has no settings (half-registered?): `rqcrawl purge {name} --force`"
        )
    return s


def watch_status(conn: redis.Redis, name: str, cfg: CrawlConfig, interval: float) -> None:
    """Ctrl-C is the normal way to stop watching: no traceback, exit status 0."""
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
    from . import metrics as exporter  # prometheus_client only for this command

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
    names = crawl_names(conn)
    rows = []
    for name in names:
        try:
            rows.append(crawl_status(conn, name))
        except click.ClickException as exc:  # one broken crawl must not hide the others
            click.echo(f"warning: {exc.message}", err=True)
    if as_json:
        click.echo(json.dumps(rows, sort_keys=True))
    else:
        click.echo(stats.table(rows) if rows else "no crawls in this Redis")


@main.command()
@click.argument("name")
@click.option("--reason", "wanted", multiple=True, help="Only this reason (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@redis_option
def failures(name, wanted, as_json, url) -> None:
    """The failed URLs of crawl NAME: reason, HTTP status, URL (and the error with --json)."""
    conn = connect(redis_url(url))
    existing(conn, name)
    for record in sinks.iter_records(conn, name):
        if record["outcome"] not in sinks.FAILED_OUTCOMES:
            continue
        reason = record["reason"] or "other"
        if wanted and reason not in wanted:
            continue
        if as_json:
            row = {k: record[k] for k in ("url", "reason", "status", "error", "attempts")}
            click.echo(json.dumps(row | {"reason": reason}))
        else:
            click.echo(f"{reason}  {record['status'] or '-'}  {record['url']}")


def controlled(name: str, url: str | None) -> tuple[redis.Redis, CrawlConfig, str]:
    """Connection, config and current state of an existing crawl, for pause ... purge."""
    conn = connect(redis_url(url))
    cfg = existing(conn, name)
    return conn, cfg, crawl_status(conn, name)["state"]


@main.command()
@click.argument("name")
@redis_option
def pause(name, url) -> None:
    """Stop releasing URLs of crawl NAME; running pages finish, queued ones wait."""
    conn, _, state = controlled(name, url)
    with crawl_errors(name):
        paused = control.pause(conn, name, state)
    click.echo(f"crawl {name} paused" if paused else f"crawl {name} was already paused")


@main.command()
@click.argument("name")
@redis_option
def resume(name, url) -> None:
    """Release the held URLs of paused crawl NAME again."""
    conn, cfg, state = controlled(name, url)
    with crawl_errors(name):
        control.resume(conn, name, cfg, state)
    click.echo(f"crawl {name} resumed")


@main.command()
@click.argument("name")
@redis_option
def cancel(name, url) -> None:
    """Stop crawl NAME for good, dropping its pending URLs and queued jobs."""
    conn, _, state = controlled(name, url)
    with crawl_errors(name):
        done = control.cancel(conn, name, state)
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
    conn = connect(redis_url(url))
    try:
        _, _, state = controlled(name, url)
    except click.ClickException:  # a half-registered or damaged crawl can still be purged
        if not is_known(conn, name):
            raise
        state = control.BROKEN
    with crawl_errors(name):
        done = control.purge(conn, name, state, force)
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
    cfg = existing(conn, name)
    if not cfg.revisit:
        raise click.ClickException(f"crawl {name} has no revisits (seed it with --revisit)")
    frontier = Frontier(conn, name, cfg)
    click.echo(f"pumping crawl {name} every {stats.duration(period)} from {masked_db(cfg)}")
    try:
        while True:
            with crawl_errors(name):
                readmitted = frontier.maybe_pump(period)
            if readmitted:
                click.echo(f"{readmitted} URL(s) due for a revisit readmitted")
            if once:
                return
            time.sleep(period)
    except KeyboardInterrupt:
        click.echo("stopped", err=True)


@contextmanager
def crawl_errors(name: str) -> Iterator[None]:
    """A refused operation, or a crawl whose keys are damaged (wrong type, not a number) or
    whose settings are unreadable: one line naming the crawl."""
    try:
        yield
    except control.ControlError as exc:
        raise click.ClickException(str(exc)) from None
    except (ValueError, redis.ResponseError) as exc:  # ConfigError is a ValueError
        raise click.ClickException(f"crawl {name}: {exc}") from None
    except SQLAlchemyError as exc:  # its message shows no password
        raise click.ClickException(f"crawl {name}: task table: {exc}".splitlines()[0]) from None


@main.command()
@click.argument("name")
@click.option(
    "-o", "--output", "output", type=click.Path(), required=True, help="File ('-': stdout)."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "csv"]),
    default=None,
    help="Default: from the file name, else jsonl.",
)
@redis_option
def export(name, output, fmt, url) -> None:
    """Write every recorded URL of crawl NAME to a file, one row per URL."""
    conn = connect(redis_url(url))
    existing(conn, name)
    write_export(conn, name, output, fmt)


def write_export(conn: redis.Redis, name: str, output: str, fmt: str | None) -> None:
    fmt = fmt or ("csv" if output.endswith(".csv") else "jsonl")
    if output == "-":
        rows = sinks.export(conn, name, sys.stdout, fmt)
    else:
        try:
            with open(output, "w", encoding="utf-8", newline="") as out:
                rows = sinks.export(conn, name, out, fmt)
        except OSError as exc:
            raise click.ClickException(f"cannot write {output}: {exc.strerror}") from None
    click.echo(f"{rows} row(s) written to {output}", err=True)


@main.command()
@click.argument("urls", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(), required=True, help="Output file.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default=None)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Workers per process (threads): many requests in flight on slow sites.",
)
@click.option("--crawl", "name", default=None, help="Crawl name (default: from the command).")
@setting_flags
@click.option(
    "--data-dir",
    type=click.Path(),
    default=".rqcrawl",
    show_default=True,
    help="Where the embedded Redis keeps its data and local workers their logs.",
)
@redis_option
def crawl(urls, output, fmt, workers, threads, name, config_file, data_dir, url, **flags) -> None:
    """Crawl on this machine until done and write OUTPUT: seed, run local workers, show
    progress. Uses an embedded Redis unless a Redis URL is configured. Running the same
    command again after an interruption resumes the crawl."""
    seeds = canonical_seeds(urls)
    cfg = with_task_table(scoped(settings(config_file, **flags), seeds), Path(data_dir))
    writable_output(output)
    if cfg.warc_dir:
        try:
            config.check_writable_dir(cfg.warc_dir)
        except ConfigError as exc:
            raise click.ClickException(str(exc)) from None
    name = checked_name(name) or derived_name(seeds[0], json.dumps([seeds, cfg.to_json()]))
    # SIGTERM (kill, a service manager) stops the crawl as Ctrl-C does: workers and the
    # embedded Redis are in sessions of their own and would otherwise outlive us.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    target = configured_redis_url(url)
    server = None if target else EmbeddedRedis(Path(data_dir))
    try:
        if server:
            target = embedded(server)
        conn = connect(target)
        start_crawl(conn, name, cfg, seeds)
        log_dir = Path(data_dir) / "workers"
        run_local(conn, target, name, workers, threads, log_dir, bool(cfg.revisit))
        write_export(conn, name, output, fmt)
    finally:
        if server:
            server.stop()


def embedded(server: EmbeddedRedis) -> str:
    """Start the embedded Redis; its URL."""
    try:
        return server.start().url
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot use {server.data_dir}: {exc.strerror}") from None


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


def run_local(
    conn: redis.Redis,
    target: str,
    name: str,
    workers: int,
    threads: int,
    log_dir: Path,
    continuous: bool,
) -> None:
    """Run the crawl with local workers until it is over; a `continuous` one (revisits)
    never is: Ctrl-C or SIGTERM ends it, and its export is written all the same."""
    pool = LocalWorkers(target, workers, threads, log_dir)
    click.echo(f"{workers} local worker(s), logs in {log_dir}", err=True)
    try:
        final = watch(conn, name, pool)
    except KeyboardInterrupt:
        click.echo("\ninterrupted: letting the workers finish their current page...", err=True)
        pool.stop()
        if not continuous:
            raise click.ClickException(
                f"crawl {name} stopped; run the same command again to resume it"
            ) from None
        final = crawl_status(conn, name)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        pool.stop()
    click.echo(
        f"crawl {name} {final['state']}: {final['fetched']} fetched, {final['failed']} failed, "
        f"{final['skipped_total']} skipped in {final['elapsed_s']:.1f} s",
        err=True,
    )
