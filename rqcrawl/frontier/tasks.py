"""The task table: every known URL of a crawl with revisits, and when to visit it next.

Redis holds what is hot (the URLs due now, in flight, the Bloom filter); the table, in a
relational database through SQLAlchemy Core, holds every URL a crawl has visited: SQLite in
the data directory by default, PostgreSQL or MySQL/MariaDB for a fleet. A URL gets its row
when its first visit ends (Frontier.finish writes it before the Redis finish step: a worker
dying between the two refetches the URL rather than losing its next visit).

A row is `scheduled` (due at `next_visit`), `queued` (taken by the pump into Redis at
`queued_at`), `gone` (answered 404/410 `revisit_gone_after` visits in a row) or `skipped`
(its last visit was a skip: out of scope, robots.txt, not HTML; skips are not
revisited). The pump (Frontier.pump) takes due rows in batches, exactly once however many
pumps run: `FOR UPDATE SKIP LOCKED` on PostgreSQL and MySQL, SQLite's single writer (BEGIN
IMMEDIATE) otherwise (each database's own ways are in rqcrawl.frontier.dialects). A row left
`queued` for QUEUED_LEASE seconds is due again (its next_visit is then the end of that
lease): its pump died between the database and Redis (Redis skips a URL that is already
waiting for its revisit). A batch costs O(batch), not O(table):
the index (crawl, state, priority, next_visit) gives each priority's due rows in due order.

A row keeps what the next visit needs (rqcrawl.parse.changes): the ETag and Last-Modified of the
last response for a conditional GET (`prior`, one primary-key SELECT before the fetch), the
digest and simhash of the last body for the change rule. The index on (crawl, digest) finds
an earlier URL of the crawl with the same body: the visit is then a duplicate of it. Two URLs
of one body whose first visits end at the same moment may both miss the other: content
dedup is exact for pages visited one after the other, best effort for simultaneous ones.
The digests table keeps a body's row while the URL that had it first still has it: a visit
that finds a new body deletes the row of its old one, if it was that row's URL. The table
then has at most one row per URL, however often pages change (it had one per distinct body
ever seen), and a page is `duplicate_of` a URL that has its body now, not one that had it
once: the next URL with that body becomes its first. Change labels read the URL's own row.

The schedule (`schedule`, written here, a few lines): a URL is due again `interval` seconds
after a visit. The interval starts at `revisit` and adapts within [revisit_min, revisit_max]:
x GROW after an unchanged visit, / SHRINK after a changed one. A failed visit (after its
retries, or lost with its worker too often) waits interval x 2, x 4, then x 8 for the 1st,
2nd, 3rd and later failures in a row, the interval itself unchanged; a 404/410 counts as a
failure until the last of `revisit_gone_after` in a row, which makes the URL `gone`. Change
is judged by rqcrawl.parse.changes.change (the digest, then the simhash distance; a 304 is
unchanged): `new` (first content seen), `changed`, `unchanged`, `gone` (a 404/410), or None
(a failure that tells nothing of the content, or a skip).
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, ParamSpec, TypeVar

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
    delete,
    func,
    insert,
    inspect,
    select,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    DBAPIError,
    DisconnectionError,
    IntegrityError,
    InterfaceError,
    OperationalError,
)

from rqcrawl.config import CrawlConfig
from rqcrawl.defaults import (
    ASK_DELAYS,
    QUEUED_LEASE,
    RETRY_DELAYS,
)
from rqcrawl.extras import extra_for
from rqcrawl.frontier.dialects import dialect_of
from rqcrawl.frontier.outage import TableUnavailable
from rqcrawl.frontier.records import FAILED_OUTCOMES
from rqcrawl.parse.changes import (
    CHANGED,
    NEW,
    UNCHANGED,
    Content,
    Prior,
    VisitEnd,
    change,
    near,
    similarity,
    valid_etag,
    valid_last_modified,
)

SCHEDULED, QUEUED, GONE, SKIPPED = "scheduled", "queued", "gone", "skipped"
GONE_STATUSES = (404, 410)
GROW = 1.5  # interval factor after an unchanged visit
SHRINK = 2.0  # interval divisor after a changed visit
MAX_BACKOFF = 8  # a failed visit waits interval x 2**failures, at most x MAX_BACKOFF
CONNECTION_ERRORS = (OperationalError, InterfaceError, DisconnectionError)

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
    # The pump's index: the due rows of one priority in due order (Frontier.pump).
    Index("rqcrawl_tasks_pump", "crawl", "state", "priority", "next_visit"),
)
# Which URL of a crawl first had a body (content dedup): the first insert of a digest wins,
# whatever the timing of the visits (a unique key, not a lookup that two visits can both miss).
DIGESTS = Table(
    "rqcrawl_digests",
    METADATA,
    Column("crawl", String(64), primary_key=True),
    Column("digest", String(40), primary_key=True),
    Column("url", Text, nullable=False),
)
# Columns added after the table's first release: an older table gets them on first use.
ADDED_COLUMNS = (TASKS.c.visited_at,)
LISTED_BATCH = 500  # sitemap URLs looked up per query (pull_forward)
# Indexes of earlier versions that nothing uses any more (dropped on first use).
OLD_INDEXES = ("rqcrawl_tasks_due", "rqcrawl_tasks_digest")


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
        if known.missing:  # back after a 404, even with the same body (or a 304)
            seen = CHANGED if known.digest else NEW
        elif content.not_modified:
            seen = UNCHANGED
        else:
            seen = change(known.digest, content.digest)
        if seen == UNCHANGED:
            interval = min(high, interval * GROW)
        elif seen == CHANGED and not near(known.simhash, content.simhash):
            interval = max(low, interval / SHRINK)  # a near duplicate keeps its interval
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
    similarity: float | None = None  # of a changed text to the last (rqcrawl.parse.changes)


class TableExtent(NamedTuple):
    """A crawl's rows in the table: how many, and when its first and last visits ended."""

    rows: int
    first_visit: float | None
    last_visit: float | None


def url_key(url: str) -> str:
    return hashlib.sha1(url.encode("utf-8")).hexdigest()


P = ParamSpec("P")
R = TypeVar("R")


def _retried(delays: tuple[float, ...]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Try a table operation again after each of `delays` seconds when its database did not
    answer (the pool reconnects: pool_pre_ping, and a connection that failed is dropped);
    TableUnavailable after the last. An operation is one transaction: tried again whole or
    not at all."""

    def decorate(method: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(method)
        def tried(*args: P.args, **kwargs: P.kwargs) -> R:
            for delay in (*delays, None):
                try:
                    return method(*args, **kwargs)
                except CONNECTION_ERRORS as exc:
                    if delay is None:
                        raise TableUnavailable(
                            f"task table unreachable: {_first_line(exc)}"
                        ) from exc
                    time.sleep(delay)
            raise AssertionError("unreachable")

        return tried

    return decorate


def _first_line(exc: Exception) -> str:
    """The driver's message of a SQLAlchemy error, first line (no SQL, no password)."""
    lines = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


crawling = _retried(RETRY_DELAYS)  # a visit, a pump: worth waiting a few seconds for
asking = _retried(ASK_DELAYS)  # status, purge, seed's check: a person waits for the answer


class TaskTable:
    """The task table at a database URL (its engine is made once per process, on first use:
    a table whose database is down raises TableUnavailable from its operations, not here)."""

    def __init__(self, url: str):
        self.url = url

    @property
    def engine(self) -> Engine:
        return engine(self.url)

    @asking
    def check(self) -> None:
        """Connect (and create the table): raises TableUnavailable if the database does not
        answer, before a crawl writes anything."""
        with self._reading() as conn:
            conn.execute(select(func.count()).select_from(TASKS).where(TASKS.c.crawl == ""))

    def _reading(self):
        """A connection for reads only: on SQLite a deferred transaction (WAL: it never
        waits for a writer), not the writers' BEGIN IMMEDIATE."""
        return self.engine.connect().execution_options(rqcrawl_read=True)

    @crawling
    def visited(
        self,
        crawl: str,
        url: str,
        depth: int,
        end: VisitEnd,
        cfg: CrawlConfig,
        priority: int = 0,
    ) -> Visited:
        """Record a visit that ended as `end` says and schedule the next one; returns the
        visit's number (1, 2...), its change, and the URL whose body this one repeats, if
        any."""
        outcome, status, content = end.outcome, end.status, end.content
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
            duplicate_of = similar = None
            if content is not None:
                if known.digest and known.digest != content.digest:
                    self._forget(conn, crawl, url, known.digest)
                first = self._first_with(conn, crawl, url, content.digest)
                duplicate_of = first if first != url else None
                simhash = known.simhash if content.not_modified else content.simhash
                if nxt.change == CHANGED:
                    similar = similarity(known.simhash, simhash)
                values.update(
                    digest=content.digest, simhash=simhash, etag=valid_etag(content.etag),
                    last_modified=valid_last_modified(content.last_modified),
                )  # fmt: skip
            if row:
                conn.execute(update(TASKS).where(where).values(values))
            else:
                conn.execute(
                    insert(TASKS).values(crawl=crawl, key=key, url=url, depth=depth, **values)
                )
        return Visited(known.visits + 1, nxt.change, duplicate_of, similar)

    @staticmethod
    def _first_with(conn, crawl: str, url: str, digest: str) -> str:
        """The URL of the crawl that first had a body of `digest` (`url` if none had): an
        insert that does nothing if the digest has its row, then a locking read, which sees
        the row of a concurrent first visit once that commits (MySQL's snapshot would not)."""
        values = {"crawl": crawl, "digest": digest, "url": url}
        conn.execute(dialect_of(conn.dialect.name).insert_new(DIGESTS, values))
        where = and_(DIGESTS.c.crawl == crawl, DIGESTS.c.digest == digest)
        return conn.execute(select(DIGESTS.c.url).where(where).with_for_update(read=True)).scalar()

    @staticmethod
    def _forget(conn, crawl: str, url: str, digest: str) -> None:
        """Delete the digest row of a body that `url` had first and has no more (the
        retention rule of the module docstring)."""
        mine = (DIGESTS.c.crawl == crawl, DIGESTS.c.digest == digest, DIGESTS.c.url == url)
        conn.execute(delete(DIGESTS).where(*mine))

    @crawling
    def prior(self, crawl: str, url: str) -> Prior | None:
        """What the URL's last visit left for a conditional GET (None: never fetched)."""
        query = select(TASKS.c.etag, TASKS.c.last_modified, TASKS.c.digest).where(
            TASKS.c.crawl == crawl, TASKS.c.key == url_key(url)
        )
        with self._reading() as conn:
            row = conn.execute(query).first()
        return Prior(row.etag, row.last_modified, row.digest) if row and row.digest else None

    @crawling
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

    @crawling
    def take_due(
        self, crawl: str, limit: int, now: float | None = None
    ) -> list[tuple[str, int, int]]:
        """Mark up to `limit` due URLs `queued` and return them with their depths and
        priorities, the highest priority first (within a priority, the earliest are taken);
        exactly once among concurrent callers (see the module docstring). O(limit), not
        O(table): for each priority from the highest (found by index probes), its rows left
        queued past their lease, then its due rows, read in due order from the index (crawl,
        state, priority, next_visit). A queued row's next_visit is the end of its lease.
        `now` (default: the present) lets the bench make rows due by its clock rather than
        by rewriting them."""
        now = time.time() if now is None else now
        rows: list = []
        with self.engine.begin() as conn:
            priority = None
            while len(rows) < limit:
                priority = self._next_priority(conn, crawl, priority)
                if priority is None:
                    break
                for state in (QUEUED, SCHEDULED):
                    if len(rows) < limit:
                        rows += _take_rows(conn, crawl, state, priority, now, limit - len(rows))
        return [(r.url, r.depth, r.priority) for r in rows]

    @staticmethod
    def _next_priority(conn, crawl: str, below: int | None) -> int | None:
        """The highest priority of the crawl's scheduled or queued rows below `below`: one
        index probe per state (a loose scan of the few priorities a crawl uses)."""

        def highest(state: str):
            where = [TASKS.c.crawl == crawl, TASKS.c.state == state]
            if below is not None:
                where.append(TASKS.c.priority < below)
            return select(func.max(TASKS.c.priority)).where(*where).scalar_subquery()

        found = conn.execute(select(highest(SCHEDULED), highest(QUEUED))).one()
        return max((p for p in found if p is not None), default=None)

    @crawling
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

    @asking
    def next_visit(self, crawl: str) -> float | None:
        """When the crawl's earliest scheduled visit is due, if any is."""
        query = select(func.min(TASKS.c.next_visit)).where(
            TASKS.c.crawl == crawl, TASKS.c.state == SCHEDULED
        )
        with self._reading() as conn:
            return conn.execute(query).scalar()

    @asking
    def due_counts(self, crawl: str) -> dict[str, int]:
        """Scheduled URLs due now, within the next hour and within the next day."""
        now = time.time()
        within = {"now": now, "hour": now + 3600, "day": now + 86400}
        query = select(
            *(func.sum(case((TASKS.c.next_visit <= t, 1), else_=0)) for t in within.values())
        ).where(TASKS.c.crawl == crawl, TASKS.c.state == SCHEDULED)
        with self._reading() as conn:
            counts = conn.execute(query).one()
        return {name: int(n or 0) for name, n in zip(within, counts, strict=True)}

    @asking
    def known(self, crawl: str) -> int:
        """Rows of the crawl (every URL it has visited)."""
        with self._reading() as conn:
            query = select(func.count()).select_from(TASKS).where(TASKS.c.crawl == crawl)
            return conn.execute(query).scalar()

    @asking
    def extent(self, crawl: str) -> TableExtent | None:
        """The crawl's rows and their span of visits (None: it has no row)."""
        query = select(
            func.count(), func.min(TASKS.c.visited_at), func.max(TASKS.c.visited_at)
        ).where(TASKS.c.crawl == crawl)
        with self._reading() as conn:
            found = TableExtent(*conn.execute(query).one())
        return found if found.rows else None

    @asking
    def delete(self, crawl: str) -> int:
        """Delete the crawl's rows (purge); returns how many."""
        with self.engine.begin() as conn:
            conn.execute(delete(DIGESTS).where(DIGESTS.c.crawl == crawl))
            return conn.execute(delete(TASKS).where(TASKS.c.crawl == crawl)).rowcount


def _take_rows(conn, crawl: str, state: str, priority: int, now: float, limit: int) -> list:
    """Mark `queued` up to `limit` due rows of the crawl in `state` and of `priority`, the
    earliest first, and return their url, depth and priority, skipping rows locked by another
    pump: in one statement where the database has UPDATE ... RETURNING (rqcrawl.frontier.
    dialects says how)."""
    due = (
        select(TASKS.c.key)
        .where(
            TASKS.c.crawl == crawl,
            TASKS.c.state == state,
            TASKS.c.priority == priority,
            TASKS.c.next_visit <= now,
        )
        .order_by(TASKS.c.next_visit)
        .limit(limit)
    )
    taken = update(TASKS).values(state=QUEUED, queued_at=now, next_visit=now + QUEUED_LEASE)
    return dialect_of(conn.dialect.name).take_rows(conn, TASKS, due, taken, crawl)


_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def _forked() -> None:
    """A forked child (a worker `rqcrawl crawl` forks, RQ's work-horse) must not use the
    parent's pooled connections: a SQLite or PostgreSQL connection is not to be shared
    between processes, and the parent's descriptors may be closed and their numbers reused
    in the child. Their pools are dropped now, while the descriptors are still the inherited
    ones (closing them affects the child only), as SQLAlchemy advises for os.fork; the
    engines open new connections on first use."""
    global _engines_lock
    _engines_lock = threading.Lock()
    for found in _engines.values():
        found.dispose(close=False)


def _forking() -> None:
    """Before a fork, the parent closes its pooled SQLite connections: SQLite keeps the locks
    of a database file per process, in memory the child inherits, so that a connection left
    open across fork() makes the child's own connections wait on locks nobody holds (every
    slot of a forked worker stuck at BEGIN IMMEDIATE for the busy timeout). They reopen on
    the parent's next use."""
    for found in _engines.values():
        if dialect_of(found.dialect.name).closes_before_fork:
            found.dispose()


os.register_at_fork(before=_forking, after_in_child=_forked)


def engine(url: str) -> Engine:
    """The process's engine for `url`, its table created on first use."""
    with _engines_lock:
        found = _engines.get(url)
        if found is None:
            found = _engines[url] = _connect(url)
    return found


def _connect(url: str) -> Engine:
    parsed = make_url(url)
    dialect = dialect_of(parsed.get_backend_name())
    with extra_for(f"a task table on {parsed.get_backend_name()}"):
        made = dialect.engine(dialect.with_driver(parsed))
    _create_table(made)
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
    for index in TASKS.indexes:  # a table of an earlier version lacks the newer ones
        index.create(made, checkfirst=True)
    seen = inspect(made)
    present = {c["name"] for c in seen.get_columns(TASKS.name)}
    old = {i["name"] for i in seen.get_indexes(TASKS.name)} & set(OLD_INDEXES)
    for name in old:  # on a copy of the table's name: TASKS itself must not get them
        Index(name, Table(TASKS.name, MetaData(), Column("crawl", String(64))).c.crawl).drop(made)
    with made.begin() as conn:
        for column in ADDED_COLUMNS:
            if column.name not in present:
                kind = column.type.compile(dialect=made.dialect)
                conn.exec_driver_sql(f"ALTER TABLE {TASKS.name} ADD COLUMN {column.name} {kind}")
