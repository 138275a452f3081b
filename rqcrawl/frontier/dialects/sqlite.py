"""SQLite for several worker processes on one machine: WAL, a busy timeout, write
transactions that lock at BEGIN, and due rows taken by rowid in one UPDATE ... RETURNING."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import (
    Connection,
    Engine,
    Row,
    Select,
    Table,
    Update,
    create_engine,
    event,
    literal_column,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL
from sqlalchemy.sql import Executable

from rqcrawl.defaults import SQLITE_BUSY_TIMEOUT
from rqcrawl.frontier.dialects.base import Dialect

RETURNING = sqlite3.sqlite_version_info >= (3, 35)  # UPDATE ... RETURNING's first version


class SQLite(Dialect):
    names = ("sqlite",)
    closes_before_fork = True  # its file locks live in the process (tasks._forking)

    def engine(self, url: URL) -> Engine:
        """WAL (readers never wait for the writer), a busy timeout, and write transactions
        that take the lock at BEGIN (BEGIN IMMEDIATE), so that two pumps never read the same
        due rows (SQLAlchemy's documented recipe)."""
        if url.database and url.database != ":memory:":
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        made = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT})

        @event.listens_for(made, "connect")
        def _on_connect(dbapi_conn, _record) -> None:
            dbapi_conn.isolation_level = None  # the driver's own BEGIN would be deferred
            dbapi_conn.execute("PRAGMA journal_mode=WAL")
            dbapi_conn.execute("PRAGMA synchronous=NORMAL")  # WAL's: a commit writes, no fsync
            dbapi_conn.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT * 1000}")

        @event.listens_for(made, "begin")
        def _on_begin(conn) -> None:
            read = conn.get_execution_options().get("rqcrawl_read")
            conn.exec_driver_sql("BEGIN" if read else "BEGIN IMMEDIATE")

        return made

    def insert_new(self, table: Table, values: dict) -> Executable:
        return sqlite.insert(table).values(values).on_conflict_do_nothing()

    def take_rows(
        self, conn: Connection, table: Table, due: Select, taken: Update, crawl: str
    ) -> list[Row]:
        """By the rowids found in the index (no primary-key lookups), in one statement; one
        writer at a time, so nothing to skip. Before SQLite 3.35, Dialect.take_rows."""
        if not RETURNING:
            return super().take_rows(conn, table, due, taken, crawl)
        rowid = literal_column("rowid")
        claim = taken.where(rowid.in_(due.with_only_columns(rowid)))
        return conn.execute(claim.returning(table.c.url, table.c.depth, table.c.priority)).all()
