"""`rqcrawl status NAME --watch`: the status of a crawl, refreshed until it is over."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from redis import Redis

from . import stats
from .config import CrawlConfig
from .frontier import Frontier


def watch_status(
    conn: Redis, crawl: str, cfg: CrawlConfig, interval: float, out: TextIO = sys.stdout
) -> dict:
    """Show the status every `interval` seconds until the crawl is finished or cancelled;
    returns the last status. On a terminal the block is redrawn in place, otherwise one
    summary line per refresh (readable in a log file)."""
    frontier = Frontier(conn, crawl, cfg)
    tty = out.isatty()
    drawn = 0
    while True:
        frontier.maybe_reap()
        s = stats.status(conn, crawl)
        if s is None:
            raise LookupError(f"crawl {crawl} was purged")
        if tty:
            drawn = redraw(out, stats.render(s).splitlines(), drawn)
        else:
            out.write(time.strftime("%H:%M:%S ") + stats.summary(s) + "\n")
        out.flush()
        if s["state"] in stats.OVER:
            return s
        time.sleep(interval)


def redraw(out: TextIO, lines: list[str], drawn: int) -> int:
    """Overwrite the `drawn` lines written last with `lines`; returns how many are shown."""
    if drawn:
        out.write(f"\x1b[{drawn}F")  # to the start of the first line drawn
    out.write("".join(line + "\x1b[K\n" for line in lines) + "\x1b[J")
    return len(lines)
