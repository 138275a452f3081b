"""The commands that read a crawl: status, inspect, hosts, list, failures, metrics."""

from __future__ import annotations

import json
import signal
from dataclasses import asdict

import click
import redis

from rqcrawl import api
from rqcrawl.cli.exporting import warn_delivered
from rqcrawl.cli.group import main
from rqcrawl.cli.options import (
    CrawlRedis,
    connect,
    crawl_redis,
    records_option,
    redis_option,
    redis_url,
)
from rqcrawl.config import CrawlConfig
from rqcrawl.ops import inspection, monitor, statustext
from rqcrawl.parse.urls import InvalidURL, canonicalize
from rqcrawl.redisurl import masked
from rqcrawl.untrusted import printable_lines


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
@crawl_redis
def status(name, as_json, show_config, watching, interval, where: CrawlRedis) -> None:
    """State and counters of crawl NAME, or its settings (--config)."""
    if watching and (as_json or show_config):
        raise click.UsageError("--watch cannot be combined with --json or --config")
    conn = where.connect()
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
        click.echo(json.dumps(s, sort_keys=True) if as_json else statustext.render(s))


@main.command()
@click.argument("name")
@click.argument("target")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@crawl_redis
def inspect(name, target, as_json, where: CrawlRedis) -> None:
    """Where URL TARGET is in crawl NAME and why: held for its level, queued, running on a
    worker, deferred (politeness, Retry-After, robots.txt), due, ended, or unknown."""
    try:
        wanted = canonicalize(target)
    except InvalidURL as exc:
        raise click.ClickException(str(exc)) from None
    conn = where.connect()
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
        click.echo(statustext.table(rows) if rows else "no crawls in this Redis")


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
@crawl_redis
def failures(name, wanted, as_json, with_skipped, records_file, where: CrawlRedis) -> None:
    """The failed URLs of crawl NAME: reason, HTTP status, URL (and the error with --json)."""
    conn = where.connect()
    away = records_file is None and warn_delivered(conn, name, "listed: --records FILE reads them")
    for record in api.failures(conn, name, wanted, records_file, with_skipped):
        if as_json:
            click.echo(json.dumps({k: record[k] for k in FAILURE_COLUMNS}))
        else:
            click.echo(f"{record['reason']}  {record['status'] or '-'}  {record['url']}")
    s = api.status(conn, name, recover=False)
    if s["skipped_total"] and not with_skipped and not away:  # (--skipped lists what is here)
        said = f"crawl {name}: {statustext.skip_summary(s)}, not listed: --skipped lists them"
        click.echo(said, err=True)
