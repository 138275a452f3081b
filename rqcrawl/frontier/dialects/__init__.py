"""The task table's SQL databases: what SQLite, PostgreSQL and MySQL (or MariaDB) each do their
own way, one module each behind `Dialect` (`base`), chosen by the backend of the `db` URL.

The table, its queries and its schedule are rqcrawl.frontier.tasks'; a dialect only connects,
inserts a row unless its key exists, and takes due rows that no other pump is taking.
"""

from __future__ import annotations

from sqlalchemy.exc import ArgumentError

from rqcrawl.frontier.dialects.base import Dialect
from rqcrawl.frontier.dialects.mysql import MySQL
from rqcrawl.frontier.dialects.postgresql import PostgreSQL
from rqcrawl.frontier.dialects.sqlite import SQLite

DIALECTS: dict[str, Dialect] = {
    name: dialect for dialect in (SQLite(), PostgreSQL(), MySQL()) for name in dialect.names
}


def dialect_of(backend: str) -> Dialect:
    """The dialect of a SQLAlchemy backend name (`URL.get_backend_name()`, `conn.dialect.name`);
    another database is refused in one line (SQLAlchemy's ArgumentError, as for a bad URL)."""
    try:
        return DIALECTS[backend]
    except KeyError:
        known = ", ".join(sorted(DIALECTS))
        raise ArgumentError(f"no task table on {backend}: use one of {known}") from None
