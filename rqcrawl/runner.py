"""Running a crawl on this machine: local worker processes and a progress display that
ends when the crawl is finished."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import nullcontext
from typing import TextIO

from redis import Redis

from . import config, keys, stats
from .frontier import Frontier
from .monitor import ProgressBar

WORKER_CLASS = "rqcrawl.worker.CrawlWorker"  # see worker.py


def worker_command(threads: int) -> list[str]:
    """`rq worker`, or with threads > 1 the same command line running that many workers in
    threads of one process (rqcrawl.threadworkers)."""
    if threads > 1:
        return ["rqcrawl.threadworkers", "--threads", str(threads)]
    return ["rq.cli", "worker"]


class LocalWorkers:
    """N `rq worker crawl` processes of this Python, in their own session so that Ctrl-C
    reaches only us and we stop them in order (warm shutdown, then kill). The Redis URL goes
    through the environment (RQ_REDIS_URL), where `ps` does not show its password."""

    def __init__(
        self,
        redis_url: str,
        count: int,
        threads: int = 1,
        worker_class: str = WORKER_CLASS,
        rq_config: str | None = None,
    ):
        self.procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    *worker_command(threads),
                    keys.QUEUE_NAME,
                    "--worker-class",
                    worker_class,
                    "--with-scheduler",
                    "--maintenance-interval",
                    "30",
                    "--quiet",
                    *(["--config", rq_config] if rq_config else []),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**os.environ, "RQ_REDIS_URL": redis_url},
                start_new_session=True,
            )  # fmt: skip
            for _ in range(count)
        ]

    def alive(self) -> int:
        return sum(p.poll() is None for p in self.procs)

    def stop(self, grace: float = 30) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def progress_line(s: dict, width: int = 30) -> str:
    done = s["fetched"] + s["failed"] + s["skipped_total"]
    total = max(s["admitted"], 1)
    filled = int(width * done / total)
    bar = "#" * filled + "." * (width - filled)
    return (
        f"[{bar}] {done}/{s['admitted']} URLs  depth {s['level']}/{s['max_depth']}  "
        f"{s['pages_per_s']:.1f} pages/s  {s['failed']} failed  {s['skipped_total']} skipped"
    )


def watch(conn: Redis, crawl: str, workers: LocalWorkers, out: TextIO = sys.stderr) -> dict:
    """Show progress until the crawl is finished (or cancelled); returns the final status.

    On a terminal a progress bar (monitor.ProgressBar); otherwise a plain line every 5 seconds.
    """
    frontier = Frontier(conn, crawl, config.load(conn, crawl))
    last_line = 0.0
    with ProgressBar(out) if out.isatty() else nullcontext() as bar:
        while True:
            frontier.maybe_reap()
            s = stats.status(conn, crawl)
            now = time.monotonic()
            if bar is not None:
                bar.show(s)
            elif now - last_line >= 5 or s["state"] in stats.OVER:
                out.write(progress_line(s) + "\n")
                last_line = now
            if s["state"] in stats.OVER:
                return s
            if workers.alive() == 0:
                raise RuntimeError("every worker process exited; see `rq worker` output")
            time.sleep(0.5)
