"""Live views of a crawl: `rqcrawl status NAME --watch`, refreshed until it is over, and the
progress bar of `rqcrawl crawl` on a terminal."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from redis import Redis

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.ops import stats, statustext


def watch_status(
    conn: Redis, crawl: str, cfg: CrawlConfig, interval: float, out: TextIO = sys.stdout
) -> dict:
    """Show the status every `interval` seconds until the crawl is finished or cancelled;
    returns the last status. On a terminal the block is redrawn in place, otherwise one
    summary line per refresh (readable in a log file)."""
    frontier = Frontier(conn, crawl, cfg)
    with _view(out) as show:
        while True:
            frontier.maybe_reap()
            s = stats.status(conn, crawl)
            if s is None:
                raise LookupError(f"crawl {crawl} was purged")
            show(s)
            if s["state"] in stats.OVER:
                return s
            time.sleep(interval)


@contextmanager
def _view(out: TextIO) -> Iterator[Callable[[dict], None]]:
    """How a refresh is shown. On a terminal, rich's Live redraws the block: it wraps the
    lines at the terminal's width itself, so it moves back over the screen rows they took
    (counting lines instead left a stale copy of every line wider than the terminal).
    Elsewhere (a file, a pipe, a dumb terminal), one timed summary line."""
    if not live_terminal(out):

        def line(s: dict) -> None:
            out.write(time.strftime("%H:%M:%S ") + statustext.summary(s) + "\n")
            out.flush()

        yield line
        return
    # rich only on a terminal, as for the progress bar
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    console = Console(file=out, highlight=False)

    def redraw(s: dict) -> None:
        # the size of `out`'s terminal now (rich would ask stdin's first, and once)
        console.size = os.get_terminal_size(out.fileno())
        live.update(Text(statustext.render(s)), refresh=True)

    with Live(console=console, auto_refresh=False, redirect_stdout=False,
              redirect_stderr=False) as live:  # fmt: skip
        yield redraw


def live_terminal(out: TextIO) -> bool:
    """Whether `out` can show a view redrawn in place: a terminal that rich drives (not one
    it counts as dumb, TERM=dumb or unknown, where its Live shows nothing until it ends).
    Output to a file or pipe does not import rich."""
    if not out.isatty():
        return False
    from rich.console import Console

    console = Console(file=out)
    return console.is_terminal and not console.is_dumb_terminal


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
            f"eta {statustext.duration(s['eta_s'])}"
        )
        self.progress.update(
            self.task,
            description=statustext.depth_progress(s),
            completed=s["fetched"] + s["failed"] + s["skipped_total"],
            total=max(s["admitted"], 1),
            detail=detail,
        )
