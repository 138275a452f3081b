"""The Python API of rqcrawl: start, watch and control crawls from your own code (a notebook,
a Django command), as the `rqcrawl` command does, which is a thin layer over it.

    import redis
    from rqcrawl import api

    conn = redis.Redis.from_url("redis://localhost:6379/0")
    started = api.start(conn, ["https://example.org/"], max_depth=1)
    api.status(conn, started.name)["state"]        # "running", then "finished"
    rows = list(api.records(conn, started.name))

Every refusal is a CrawlError (one line, naming the crawl): the CLI prints it as is. Errors of
Redis itself (unreachable, lost) are redis-py's own, as for any other Redis client code.
"""

from rqcrawl.api.errors import CrawlError, DamagedCrawl, InvalidInput, NoSuchCrawl, StateError
from rqcrawl.api.exporting import (
    Following,
    delivered,
    delivered_to,
    export,
    export_formats,
    export_wacz,
    follow_records,
    output_exporter,
    pack_wacz,
)
from rqcrawl.api.local import LocalRun, crawl, embedded_redis, local_fleet
from rqcrawl.api.planning import Plan, Planning, Started, add_seeds, plan, settings, start
from rqcrawl.api.reading import (
    Feed,
    change_kinds,
    crawl_config,
    crawls,
    failures,
    records,
    since_time,
    status,
)
from rqcrawl.api.steering import cancel, pause, pump, purge, resume

__all__ = [
    "CrawlError", "DamagedCrawl", "InvalidInput", "NoSuchCrawl", "StateError", "delivered",
    "delivered_to", "export", "export_formats", "export_wacz", "follow_records",
    "output_exporter", "pack_wacz", "crawl", "embedded_redis", "local_fleet", "Plan", "Started",
    "add_seeds", "plan", "settings", "start", "change_kinds", "crawl_config", "crawls",
    "failures", "records", "since_time", "status", "cancel", "pause", "purge", "pump", "resume",
    "Feed", "Following", "LocalRun", "Planning",
]  # fmt: skip
