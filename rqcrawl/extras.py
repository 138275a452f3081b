"""The optional parts of rqcrawl and the extra that installs each (setup.py's
extras_require). `pip install rqcrawl` alone runs every command that needs none; a part asked
for without its extra is one line naming the extra (MissingExtra), never a traceback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

# the top-level module of each optional package, and the extra that brings it
EXTRAS = {
    "playwright": "render",
    "psutil": "render",
    "httpx": "http2",
    "httpcore": "http2",
    "h2": "http2",
    "pyarrow": "parquet",
    "psycopg": "postgres",
    "pymysql": "mysql",
    "rq_dashboard": "dashboard",
    "scrapy": "bench",
    "crawlee": "bench",
}


class MissingExtra(ImportError):
    """An optional part was asked for and its package is not installed: the message is one
    line that names the extra to install."""


@contextmanager
def extra_for(what: str) -> Iterator[None]:
    """Turn the ModuleNotFoundError of an optional package imported inside into
    MissingExtra("`what` needs the X extra: pip install 'rqcrawl[X]'"); any other import error
    passes through as it is (a bug of ours is not a missing extra)."""
    try:
        yield
    except ModuleNotFoundError as exc:
        extra = EXTRAS.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise
        raise MissingExtra(
            f"{what} needs the {extra} extra: pip install 'rqcrawl[{extra}]'"
        ) from exc
