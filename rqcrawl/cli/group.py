"""The command group: where every command hangs, and where a refusal becomes one line."""

from __future__ import annotations

import click
import redis

from rqcrawl import api
from rqcrawl.extras import MissingExtra
from rqcrawl.lazygroup import LazyGroup
from rqcrawl.quickexit import skip_final_collection


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
