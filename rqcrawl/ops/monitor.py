"""Live views of a crawl: `rqcrawl status NAME --watch`, refreshed until it is over, and the
progress bar of `rqcrawl crawl` on a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from redis import Redis

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.ops import stats


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


class ProgressBar:
    """`rqcrawl crawl`'s bar on a terminal (rich): URLs ended of those admitted so far, depth,
    average and recent pages/s, failures, skips and the ETA."""

    def __init__(self, out: TextIO):
        # rich only on a terminal: a crawl's output to a file or pipe does not import it
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=Console(file=out),
        )
        self.task = self.progress.add_task("depth 0", total=None, detail="")

    def __enter__(self) -> ProgressBar:
        self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        self.progress.stop()

    def show(self, s: dict) -> None:
        detail = (
            f"{s['pages_per_s']:.1f} pages/s ({s['recent_pages_per_s']:.1f} recent)  "
            f"{s['failed']} failed  {s['skipped_total']} skipped  "
            f"eta {stats.duration(s['eta_s'])}"
        )
        self.progress.update(
            self.task,
            description=stats.depth_progress(s),
            completed=s["fetched"] + s["failed"] + s["skipped_total"],
            total=max(s["admitted"], 1),
            detail=detail,
        )
