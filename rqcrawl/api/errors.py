"""The API's refusals: one line each, naming the crawl."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from redis import ResponseError

from rqcrawl.ops import control


class CrawlError(Exception):
    """An operation of this API refused or failed, with a one-line reason naming the crawl."""


class InvalidInput(CrawlError, ValueError):
    """A seed URL, setting, crawl name or export format that cannot be used: nothing was
    written to Redis."""


class NoSuchCrawl(CrawlError, LookupError):
    """This Redis holds no crawl of that name."""


class StateError(CrawlError):
    """The crawl's state does not allow the operation (pause a finished crawl, purge a
    running one without `force`)."""


class DamagedCrawl(CrawlError):
    """The crawl's keys are damaged or its settings missing or unreadable: only
    `purge(..., force=True)` still works on it."""


@contextmanager
def refusals(name: str) -> Iterator[None]:
    """A refused operation as a StateError; damaged keys (wrong type, not a number) or
    unreadable settings as a DamagedCrawl naming the crawl."""
    try:
        yield
    except control.ControlError as exc:
        raise StateError(str(exc)) from exc
    except (ValueError, ResponseError) as exc:  # ConfigError is a ValueError
        raise DamagedCrawl(f"crawl {name}: {exc}") from exc
    except sql_errors() as exc:  # its message shows no password
        raise CrawlError(f"crawl {name}: task table: {exc}".splitlines()[0]) from exc


def sql_errors() -> tuple[type[Exception], ...]:
    """SQLAlchemy's error class once SQLAlchemy is loaded, else none: only a task table
    loads it and only it raises them, so catching them costs other commands no import of
    SQLAlchemy (a third of a second)."""
    loaded = sys.modules.get("sqlalchemy.exc")
    return (loaded.SQLAlchemyError,) if loaded else ()
