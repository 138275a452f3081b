"""PostgreSQL: ON CONFLICT DO NOTHING, and due rows taken in one UPDATE ... RETURNING."""

from __future__ import annotations

from sqlalchemy import Connection, Row, Select, Table, Update
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql import Executable

from rqcrawl.frontier.dialects.base import Dialect


class PostgreSQL(Dialect):
    names = ("postgresql",)
    drivers = {"postgresql": "postgresql+psycopg"}

    def insert_new(self, table: Table, values: dict) -> Executable:
        return postgresql.insert(table).values(values).on_conflict_do_nothing()

    def take_rows(
        self, conn: Connection, table: Table, due: Select, taken: Update, crawl: str
    ) -> list[Row]:
        """One statement: the rows the pump's index finds are the rows it writes. The CTE is
        materialized: as `key IN (...)` the locking read may run again."""
        keys = due.with_for_update(skip_locked=True).cte("due").prefix_with("MATERIALIZED")
        claim = taken.where(table.c.crawl == crawl, table.c.key == keys.c.key)
        return conn.execute(claim.returning(table.c.url, table.c.depth, table.c.priority)).all()
