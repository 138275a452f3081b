"""The commands that start and steer a crawl run by workers: seed, pause, resume, cancel,
purge, pump."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click
import redis

from rqcrawl import api, config
from rqcrawl.cli.group import main
from rqcrawl.cli.options import (
    connect,
    fresh_option,
    redis_option,
    redis_url,
    setting_flags,
    shards_option,
)
from rqcrawl.config import ConfigError
from rqcrawl.frontier import keys
from rqcrawl.ops import explain, stalls, statustext
from rqcrawl.redisurl import masked

if TYPE_CHECKING:
    from rqcrawl.frontier.tasks import TableExtent
from rqcrawl.workers.runner import RENDER_WORKER_CLASS


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
            f"revisits every {statustext.duration(started.cfg.revisit)}, task table "
            f"{masked(started.cfg.db, started.cfg.db)}"
        )
    click.echo(f"run workers with: {stalls.WORKER_HINT}")
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

    ago = f", {statustext.duration(time.time() - found.last_visit)} ago" if found.last_visit else ""
    return (
        f"resuming its task table's {found.rows} URLs (first visited {at(found.first_visit)}, "
        f"last visited {at(found.last_visit)}{ago}); --fresh deletes them first"
    )


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
    click.echo(
        f"pumping crawl {name} every {statustext.duration(period)} from {masked(cfg.db, cfg.db)}"
    )
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
