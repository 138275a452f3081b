"""The task table: every known URL of a crawl with revisits, and when to visit it next.

Redis holds what is hot (the URLs due now, in flight, the Bloom filter); the table, in a
relational database through SQLAlchemy Core, holds every URL a crawl has visited: SQLite in
the data directory by default, PostgreSQL or MySQL/MariaDB for a fleet. A URL gets its row
when its first visit ends (Frontier.finish writes it before the Redis finish step: a worker
dying between the two refetches the URL rather than losing its next visit).

A row is `scheduled` (due at `next_visit`), `queued` (taken by the pump into Redis at
`queued_at`), `gone` (answered 404/410 `revisit_gone_after` visits in a row) or `skipped`
(its last visit was a skip: out of scope, robots.txt, not HTML, too large; skips are not
revisited). The pump (Frontier.pump) takes due rows in batches, exactly once however many
pumps run: `FOR UPDATE SKIP LOCKED` on PostgreSQL and MySQL, SQLite's single writer (BEGIN
IMMEDIATE) otherwise. A row left `queued` for QUEUED_LEASE seconds is due again: its pump died
between the database and Redis (Redis skips a URL that is already waiting for its revisit).

A row keeps what the next visit needs (rqcrawl.changes): the ETag and Last-Modified of the
last response for a conditional GET (`prior`, one primary-key SELECT before the fetch), the
digest and simhash of the last body for the change rule. The index on (crawl, digest) finds
an earlier URL of the crawl with the same body: the visit is then a duplicate of it. Two URLs
of one body whose first visits end at the same moment may both miss the other: content
dedup is exact for pages visited one after the other, best effort for simultaneous ones.

The schedule (`schedule`, written here, a few lines): a URL is due again `interval` seconds
after a visit. The interval starts at `revisit` and adapts within [revisit_min, revisit_max]:
x GROW after an unchanged visit, / SHRINK after a changed one. A failed visit (after its
retries, or lost with its worker too often) waits interval x 2, x 4, then x 8 for the 1st,
2nd, 3rd and later failures in a row, the interval itself unchanged; a 404/410 counts as a
failure until the last of `revisit_gone_after` in a row, which makes the URL `gone`. Change
is judged by rqcrawl.changes.change (the digest, then the simhash distance; a 304 is
unchanged): `new` (first content seen), `changed`, `unchanged`, `gone` (a 404/410), or None
(a failure that tells nothing of the content, or a skip).
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from sqlalchemy import (
    BigInteger,
    Column,
    Double,
    Engine,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    case,
    create_engine,
    delete,
    event,
    func,
    insert,
    inspect,
    or_,
    select,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError

from .changes import CHANGED, NEW, UNCHANGED, Content, Prior, change
from .config import CrawlConfig
from .sinks import FAILED_OUTCOMES

SCHEDULED, QUEUED, GONE, SKIPPED = "scheduled", "queued", "gone", "skipped"
GONE_STATUSES = (404, 410)
GROW = 1.5  # interval factor after an unchanged visit
SHRINK = 2.0  # interval divisor after a changed visit
MAX_BACKOFF = 8  # a failed visit waits interval x 2**failures, at most x MAX_BACKOFF
QUEUED_LEASE = 300  # seconds after which a row taken by a pump that died is due again
SQLITE_BUSY_TIMEOUT = 30  # seconds a SQLite writer waits for another (worker processes)
# The plain dialect names use the drivers of the extras `postgres` and `mysql`.
DRIVERS = {"postgresql": "postgresql+psycopg", "mysql": "mysql+pymysql"}

METADATA = MetaData()
TASKS = Table(
    "rqcrawl_tasks",
    METADATA,
    Column("crawl", String(64), primary_key=True),
    Column("key", String(40), primary_key=True),  # sha1 of the URL: a URL can be too long
    Column("url", Text, nullable=False),  # to index on MySQL
    Column("depth", Integer, nullable=False),
    Column("priority", Integer, nullable=False, default=0),
    Column("state", String(10), nullable=False),
    Column("next_visit", Double),  # epoch seconds; None unless scheduled
    Column("interval_s", Double, nullable=False),
    Column("failures", Integer, nullable=False, default=0),  # failed visits in a row
    Column("missing", Integer, nullable=False, default=0),  # 404/410 visits in a row
    Column("etag", Text),
    Column("last_modified", Text),
    Column("digest", String(40)),  # sha1 of the last body fetched
    Column("simhash", BigInteger),  # 64-bit simhash of the text (signed)
    Column("last_status", Integer),
    Column("visits", Integer, nullable=False),
    Column("queued_at", Double),
    Column("visited_at", Double),  # when the last visit ended (a sitemap's <lastmod> vs it)
    Index("rqcrawl_tasks_due", "crawl", "state", "next_visit"),
)
# Columns added after the table's first release: an older table gets them on first use.
ADDED_COLUMNS = (TASKS.c.visited_at,)
LISTED_BATCH = 500  # sitemap URLs looked up per query (pull_forward)
# Content dedup (a table of part A, made before this index existed, gets it on first use).
DIGEST_INDEX = Index("rqcrawl_tasks_digest", TASKS.c.crawl, TASKS.c.digest)


@dataclass(frozen=True)
class Known:
    """What the table knew of a URL before a visit (nothing: its first visit)."""

    visits: int = 0
    interval: float = 0.0
    failures: int = 0
    missing: int = 0
    digest: str | None = None
    simhash: int | None = None


@dataclass(frozen=True)
class Next:
    """A URL's schedule after a visit, and the visit's change."""

    state: str
    next_visit: float | None
    interval: float
    failures: int
    missing: int
    change: str | None


def schedule(
    known: Known,
    outcome: str,
    status: int | None,
    content: Content | None,
    cfg: CrawlConfig,
    now: float,
) -> Next:
    """The schedule rule of the module docstring."""
    low, high = cfg.revisit_bounds()
    interval = known.interval or min(high, max(low, cfg.revisit))
    if outcome == "fetched" and content is not None:
        if content.not_modified:
            seen = UNCHANGED
        elif known.missing:  # back after a 404, even with the same body
            seen = CHANGED if known.digest else NEW
        else:
            seen = change(known.digest, known.simhash, content.digest, content.simhash)
        if seen == UNCHANGED:
            interval = min(high, interval * GROW)
        elif seen == CHANGED:
            interval = max(low, interval / SHRINK)
        return Next(SCHEDULED, now + interval, interval, 0, 0, seen)
    if outcome not in FAILED_OUTCOMES:
        return Next(SKIPPED, None, interval, 0, 0, None)
    failures = known.failures + 1
    missing = known.missing + 1 if status in GONE_STATUSES else 0
    gone = GONE if missing else None
    if missing >= cfg.revisit_gone_after:
        return Next(GONE, None, interval, failures, missing, gone)
    wait = interval * min(2**failures, MAX_BACKOFF)
    return Next(SCHEDULED, now + wait, interval, failures, missing, gone)


class Visited(NamedTuple):
    """A visit as the table numbered and judged it."""

    visit: int
    change: str | None
    duplicate_of: str | None = None


def url_key(url: str) -> str:
    return hashlib.sha1(url.encode("utf-8")).hexdigest()


class TaskTable:
    """The task table at a database URL (its engine is made once per process)."""

    def __init__(self, url: str):
        self.engine = engine(url)

    def visited(
        self,
        crawl: str,
        url: str,
        depth: int,
        outcome: str,
        status: int | None,
        content: Content | None,
        cfg: CrawlConfig,
        priority: int = 0,
    ) -> Visited:
        """Record a visit that ended (`outcome` as in the record; `content` what a fetched
        visit saw) and schedule the next one; returns the visit's number (1, 2...), its
        change, and the URL whose body this one repeats, if any."""
        key, now = url_key(url), time.time()
        where = and_(TASKS.c.crawl == crawl, TASKS.c.key == key)
        with self.engine.begin() as conn:
            row = conn.execute(select(TASKS).where(where).with_for_update()).first()
            known = (
                Known(row.visits, row.interval_s, row.failures, row.missing, row.digest,
                      row.simhash)
                if row
                else Known()
            )  # fmt: skip
            nxt = schedule(known, outcome, status, content, cfg, now)
            values = {
                "state": nxt.state, "next_visit": nxt.next_visit, "interval_s": nxt.interval,
                "failures": nxt.failures, "missing": nxt.missing, "last_status": status,
                "visits": known.visits + 1, "queued_at": None, "priority": priority,
                "visited_at": now,
            }  # fmt: skip
            duplicate_of = None
            if content is not None:
                if not content.not_modified and content.digest != known.digest:  # a new body
                    duplicate_of = self._first_with(conn, crawl, key, content.digest)
                simhash = known.simhash if content.not_modified else content.simhash
                values.update(
                    digest=content.digest, simhash=simhash, etag=content.etag,
                    last_modified=content.last_modified,
                )  # fmt: skip
            if row:
                conn.execute(update(TASKS).where(where).values(values))
            else:
                conn.execute(
                    insert(TASKS).values(crawl=crawl, key=key, url=url, depth=depth, **values)
                )
        return Visited(known.visits + 1, nxt.change, duplicate_of)

    @staticmethod
    def _first_with(conn, crawl: str, key: str, digest: str) -> str | None:
        """Another URL of the crawl whose last body had `digest` (the index on (crawl,
        digest)), if any."""
        query = (
            select(TASKS.c.url)
            .where(TASKS.c.crawl == crawl, TASKS.c.digest == digest, TASKS.c.key != key)
            .limit(1)
        )
        return conn.execute(query).scalar()

    def prior(self, crawl: str, url: str) -> Prior | None:
        """What the URL's last visit left for a conditional GET (None: never fetched)."""
        query = select(TASKS.c.etag, TASKS.c.last_modified, TASKS.c.digest).where(
            TASKS.c.crawl == crawl, TASKS.c.key == url_key(url)
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return Prior(row.etag, row.last_modified, row.digest) if row and row.digest else None

    def row(self, crawl: str, url: str) -> dict | None:
        """The URL's row (`rqcrawl inspect`): state, next visit, interval, failures, visits,
        last status; None when the URL has not been visited yet."""
        columns = (
            TASKS.c.state, TASKS.c.next_visit, TASKS.c.interval_s, TASKS.c.failures,
            TASKS.c.visits, TASKS.c.last_status, TASKS.c.visited_at,
        )  # fmt: skip
        query = select(*columns).where(TASKS.c.crawl == crawl, TASKS.c.key == url_key(url))
        with self.engine.connect() as conn:
            found = conn.execute(query).first()
        return dict(found._mapping) if found else None

    def take_due(self, crawl: str, limit: int) -> list[tuple[str, int, int]]:
        """Mark up to `limit` due URLs `queued` and return them with their depths and
        priorities, the highest priority first, then the earliest; exactly once among
        concurrent callers (see the module docstring)."""
        now = time.time()
        due = or_(
            and_(TASKS.c.state == SCHEDULED, TASKS.c.next_visit <= now),
            and_(TASKS.c.state == QUEUED, TASKS.c.queued_at <= now - QUEUED_LEASE),
        )
        query = (
            select(TASKS.c.key, TASKS.c.url, TASKS.c.depth, TASKS.c.priority)
            .where(TASKS.c.crawl == crawl, due)
            .order_by(TASKS.c.priority.desc(), TASKS.c.next_visit)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        with self.engine.begin() as conn:
            rows = conn.execute(query).all()
            if rows:
                taken = and_(TASKS.c.crawl == crawl, TASKS.c.key.in_([r.key for r in rows]))
                conn.execute(update(TASKS).where(taken).values(state=QUEUED, queued_at=now))
        return [(r.url, r.depth, r.priority) for r in rows]

    def pull_forward(self, crawl: str, listed: list[tuple[str, float]]) -> int:
        """Make due now the scheduled URLs among `listed` (url, a sitemap's <lastmod>) that
        changed after their last visit ended, unless they are due sooner anyway; returns
        how many. Two queries per LISTED_BATCH URLs, whatever the sitemap's size."""
        now, pulled = time.time(), 0
        for start in range(0, len(listed), LISTED_BATCH):
            lastmods = {url_key(u): t for u, t in listed[start : start + LISTED_BATCH]}
            mine = and_(TASKS.c.crawl == crawl, TASKS.c.key.in_(list(lastmods)))
            later = and_(TASKS.c.state == SCHEDULED, TASKS.c.next_visit > now)
            query = select(TASKS.c.key, TASKS.c.visited_at).where(mine, later)
            with self.engine.begin() as conn:
                rows = conn.execute(query).all()
                keys = [r.key for r in rows if r.visited_at and lastmods[r.key] > r.visited_at]
                if keys:
                    due = and_(TASKS.c.crawl == crawl, TASKS.c.key.in_(keys), later)
                    pulled += conn.execute(update(TASKS).where(due).values(next_visit=now)).rowcount
        return pulled

    def next_visit(self, crawl: str) -> float | None:
        """When the crawl's earliest scheduled visit is due, if any is."""
        query = select(func.min(TASKS.c.next_visit)).where(
            TASKS.c.crawl == crawl, TASKS.c.state == SCHEDULED
        )
        with self.engine.connect() as conn:
            return conn.execute(query).scalar()

    def due_counts(self, crawl: str) -> dict[str, int]:
        """Scheduled URLs due now, within the next hour and within the next day."""
        now = time.time()
        within = {"now": now, "hour": now + 3600, "day": now + 86400}
        query = select(
            *(func.sum(case((TASKS.c.next_visit <= t, 1), else_=0)) for t in within.values())
        ).where(TASKS.c.crawl == crawl, TASKS.c.state == SCHEDULED)
        with self.engine.connect() as conn:
            counts = conn.execute(query).one()
        return {name: int(n or 0) for name, n in zip(within, counts, strict=True)}

    def known(self, crawl: str) -> int:
        """Rows of the crawl (every URL it has visited)."""
        with self.engine.connect() as conn:
            query = select(func.count()).select_from(TASKS).where(TASKS.c.crawl == crawl)
            return conn.execute(query).scalar()

    def delete(self, crawl: str) -> int:
        """Delete the crawl's rows (purge); returns how many."""
        with self.engine.begin() as conn:
            return conn.execute(delete(TASKS).where(TASKS.c.crawl == crawl)).rowcount


_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def engine(url: str) -> Engine:
    """The process's engine for `url`, its table created on first use."""
    with _engines_lock:
        found = _engines.get(url)
        if found is None:
            found = _engines[url] = _connect(url)
    return found


def _connect(url: str) -> Engine:
    parsed = make_url(url)
    parsed = parsed.set(drivername=DRIVERS.get(parsed.drivername, parsed.drivername))
    if parsed.get_backend_name() == "sqlite":
        made = _sqlite(parsed)
    else:
        made = create_engine(parsed, pool_pre_ping=True)
    _create_table(made)
    return made


def _sqlite(url) -> Engine:
    """SQLite for several worker processes: WAL (readers never wait for the writer), a busy
    timeout, and write transactions that take the lock at BEGIN (BEGIN IMMEDIATE), so that
    two pumps never read the same due rows (SQLAlchemy's documented recipe)."""
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    made = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT})

    @event.listens_for(made, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # the driver's own BEGIN would be deferred
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT * 1000}")

    @event.listens_for(made, "begin")
    def _on_begin(conn) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return made


def _create_table(made: Engine) -> None:
    """Create the table unless it exists, or add what an older one lacks; another process
    doing the same at the same moment makes ours fail, which is then harmless."""
    try:
        _complete(made)
    except (IntegrityError, DBAPIError):
        _complete(made)  # raises if the table still is not right


def _complete(made: Engine) -> None:
    METADATA.create_all(made)
    DIGEST_INDEX.create(made, checkfirst=True)
    present = {c["name"] for c in inspect(made).get_columns(TASKS.name)}
    with made.begin() as conn:
        for column in ADDED_COLUMNS:
            if column.name not in present:
                kind = column.type.compile(dialect=made.dialect)
                conn.exec_driver_sql(f"ALTER TABLE {TASKS.name} ADD COLUMN {column.name} {kind}")
