"""`rqcrawl bench --revisit-memory N`: what a crawl with revisits keeps per known URL.

A crawl of the first N pages of the bench site with `revisit = 1d` runs its first round
with local workers until idle (every URL visited, none due): then the task table holds one
row per known URL and Redis, by design, only the Bloom filter beside the records stream
(the crawl's output) and a few fixed keys. Printed: the SQLite table's bytes per known URL
(the file, WAL checkpointed), the same rows copied into PostgreSQL when `--db-url` names
one (the bench needs no server of its own), and Redis's bytes per known URL in the Bloom
filter and in the records stream, and in all the crawl's other keys (a constant: ~0 per URL).
"""

from __future__ import annotations

import contextlib
import sqlite3
import tempfile
from dataclasses import replace
from pathlib import Path

import click
from redis import Redis
from sqlalchemy import delete, func, insert, select, text

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import configs, tasks
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.ops import stats
from rqcrawl.parse.urls import canonicalize
from rqcrawl.workers.embedded import EmbeddedRedis
from rqcrawl.workers.runner import LocalWorkers

from .runs import (
    CRAWL,
    crawl_config,
    drop_finished_jobs,
    key_bytes,
    wait_finished,
    wait_for_workers,
)
from .site import SiteServer, SiteSpec

PG_CRAWL = "rqcrawl-bench-revisit"  # the rows' crawl name in a PostgreSQL shared with others


def revisit_memory(pages: int, db_url: str | None) -> dict[str, float]:
    """Bytes per known URL of a revisit crawl of `pages` pages: in its SQLite task table, in
    PostgreSQL at `db_url` (when given) and in Redis; and the number of known URLs."""
    server = SiteServer(SiteSpec(pages=pages), procs=1).start()
    with tempfile.TemporaryDirectory(prefix="rqcrawl-bench-") as tmp:
        sqlite = Path(tmp) / "tasks.db"
        redis_server = EmbeddedRedis(Path(tmp)).start()
        conn = Redis.from_url(redis_server.url)
        pool = LocalWorkers(redis_server.url, 2, 1)
        try:
            wait_for_workers(conn, pool)
            cfg = replace(
                crawl_config(server),
                revisit=86_400.0,
                db=f"sqlite:///{sqlite}",
                bloom_capacity=pages,
                sitemaps=False,  # the site has none: its /sitemap.xml would be a row too
            )
            configs.save(conn, CRAWL, cfg)
            Frontier(conn, CRAWL, cfg).seed([canonicalize(server.origin + "/p0.html")])
            wait_finished(conn, pool)
            pool.stop()
            drop_finished_jobs(conn)
            known = stats.status(conn, CRAWL)["known"]
            figures = {"known": known} | redis_bytes(conn, cfg, known)
        finally:
            pool.stop()
            redis_server.stop()
            server.stop()
        figures["sqlite"] = sqlite_bytes(sqlite) / known
        if db_url:
            figures["postgresql"] = postgresql_bytes(f"sqlite:///{sqlite}", db_url) / known
    return figures


def redis_bytes(conn: Redis, cfg: CrawlConfig, known: int) -> dict[str, float]:
    """Per known URL: the Bloom filter and the records stream; the crawl's other keys in all
    (its settings, counters and per-host hashes: none grows with the known URLs)."""
    keys = CrawlKeys(CRAWL)
    bloom = Frontier(conn, CRAWL, cfg).bloom.keys
    crawl_keys = [k.decode() for k in conn.scan_iter(match=keys.prefix + "*", count=1000)]
    other = [k for k in crawl_keys if k not in bloom and k != keys.items]
    return {
        "redis_bloom": key_bytes(conn, bloom) / known,
        "redis_records": key_bytes(conn, [keys.items]) / known,
        "redis_other_bytes": key_bytes(conn, other),
        "redis_other_keys": len(other),
    }


def sqlite_bytes(path: Path) -> int:
    """The table's file once the write-ahead log is folded into it."""
    with contextlib.closing(sqlite3.connect(path)) as db:  # outside SQLAlchemy's transaction
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def postgresql_bytes(source: str, db_url: str) -> int:
    """The growth of the PostgreSQL table (its indexes included) by the rows of `source`,
    copied under a crawl name of their own, deleted again after."""
    rows = [row._asdict() | {"crawl": PG_CRAWL} for row in _rows(source)]
    target = tasks.engine(db_url)
    size = select(func.pg_total_relation_size(tasks.TASKS.name))
    gone = delete(tasks.TASKS).where(tasks.TASKS.c.crawl == PG_CRAWL)
    with target.begin() as db:
        db.execute(gone)
    with target.connect().execution_options(isolation_level="AUTOCOMMIT") as db:
        db.execute(text(f"VACUUM {tasks.TASKS.name}"))  # what earlier rows left is not reused
        before = db.execute(size).scalar_one()
    with target.begin() as db:
        db.execute(insert(tasks.TASKS), rows)
    with target.begin() as db:
        grown = db.execute(size).scalar_one() - before
        db.execute(gone)
    return grown


def _rows(source: str) -> list:
    with tasks.engine(source).connect() as db:
        return db.execute(select(tasks.TASKS)).all()


def report(pages: int, db_url: str | None) -> None:
    """Print the figures of `revisit_memory` and the command that measured them."""
    m = revisit_memory(pages, db_url)
    click.echo(f"crawl with revisits, {m['known']:,} known URLs: bytes per known URL")
    click.echo(f"  task table  SQLite {m['sqlite']:.0f}" + (
        f", PostgreSQL {m['postgresql']:.0f}" if "postgresql" in m else ""
    ))  # fmt: skip
    click.echo(
        f"  Redis       Bloom filter {m['redis_bloom']:.2f}, records stream "
        f"{m['redis_records']:.0f}; other keys {m['redis_other_bytes']:,} bytes in all "
        f"({m['redis_other_keys']} keys: settings, counters, per host)"
    )
    db = " --db-url URL" if db_url else ""
    click.echo(f"reproduce: rqcrawl bench --revisit-memory {pages}{db}")
