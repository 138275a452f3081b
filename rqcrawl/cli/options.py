"""What the commands share: their Redis connection and the options that say it, and the
crawl-setting flags of `seed` and `crawl`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
import redis

from rqcrawl.options import gathered
from rqcrawl.redisurl import client, masked
from rqcrawl.workers import embedded as embedded_redis

DEFAULT_REDIS_URL = "redis://localhost:6379/0"


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


@dataclass(frozen=True)
class CrawlRedis:
    """Where a command that reads a crawl finds its Redis: --url, else --data-dir (see
    crawl_connection); connected when the command asks."""

    url: str | None
    data_dir: str

    def connect(self) -> redis.Redis:
        return crawl_connection(self.url, self.data_dir)


def crawl_redis(command: Callable) -> Callable:
    """The --data-dir and --url options of a command that reads a crawl, handed to it as
    one CrawlRedis, `where`."""
    return data_dir_option(redis_option(gathered(CrawlRedis, "where")(command)))


def _none_if_empty(_ctx, _param, value: tuple) -> list | None:
    """A repeatable flag given no time leaves its setting to the file or the default."""
    return list(value) or None


# Settings that `seed` and `crawl` take as flags; unset flags leave the file or the default.
# Their ranges are checked by the config model (config.BOUNDS), as for a file.
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
