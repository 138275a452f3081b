"""What a task-table database must do, and the ways a database server shares."""

from __future__ import annotations

from abc import ABC, abstractmethod

from sqlalchemy import Connection, Engine, Row, Select, Table, Update, create_engine
from sqlalchemy.engine import URL
from sqlalchemy.sql import Executable

from rqcrawl.defaults import CONNECT_TIMEOUT


class Dialect(ABC):
    """One database's ways. The defaults are a server's: a connection checked before use, a
    connect timeout, READ COMMITTED, and due rows taken in two statements (no UPDATE ...
    RETURNING)."""

    names: tuple[str, ...] = ()  # its SQLAlchemy backend names
    drivers: dict[str, str] = {}  # a URL's plain scheme -> the driver of our extras
    closes_before_fork = False  # a forked child must not inherit its open connections

    def with_driver(self, url: URL) -> URL:
        return url.set(drivername=self.drivers.get(url.drivername, url.drivername))

    def engine(self, url: URL) -> Engine:
        # READ COMMITTED on MySQL too (PostgreSQL's default): under REPEATABLE READ, pumps
        # that skip each other's locked rows also found batches empty with rows still due.
        return create_engine(
            url,
            pool_pre_ping=True,
            connect_args={"connect_timeout": CONNECT_TIMEOUT},
            isolation_level="READ COMMITTED",
        )

    @abstractmethod
    def insert_new(self, table: Table, values: dict) -> Executable:
        """An INSERT of `values` that does nothing when a row has their key already."""

    def take_rows(
        self, conn: Connection, table: Table, due: Select, taken: Update, crawl: str
    ) -> list[Row]:
        """Mark the rows `due` selects as `taken` and return their url, depth and priority,
        skipping rows another pump has locked: a locking read, then an UPDATE by key."""
        columns = (table.c.key, table.c.url, table.c.depth, table.c.priority)
        rows = conn.execute(due.with_only_columns(*columns).with_for_update(skip_locked=True)).all()
        if rows:
            keys = [r.key for r in rows]
            conn.execute(taken.where(table.c.crawl == crawl, table.c.key.in_(keys)))
        return rows
