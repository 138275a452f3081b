"""The processes that crawl and the job they run: the RQ jobs of one URL (`jobs`), read as
its steps, each in a module of its own (`crawls`: the claim, `gate`: robots.txt and
politeness, `visit`: fetch and parse, `settle`: retry or end), the recommended worker class,
thread workers, the local fleet of `rqcrawl crawl` (`runner`) and its embedded Redis.

`rqcrawl.workers.CrawlWorker` is the recommended worker's path for RQ
(`RQ_WORKER_CLASS=rqcrawl.workers.CrawlWorker`); it is imported on first use, so that the
light modules of this package do not load RQ.
"""

from __future__ import annotations

from typing import Any

# Requests in flight per worker process: a crawl job waits for the network most of its time
# (50-500 ms a response on the real web), with the GIL released, so one process runs that
# many RQ workers in its threads (this environment variable, `rqcrawl crawl --threads`).
SLOTS_ENV = "RQCRAWL_SLOTS"
_SLOT_MARK = ":s"


def slot_name(process: str, slot: int) -> str:
    """The RQ worker name of `slot` of the process whose first worker is named `process`."""
    return f"{process}{_SLOT_MARK}{slot}"


def process_name(worker: str) -> str:
    """The name of the process that runs the slot named `worker` (its first worker's name):
    what a process owns, such as its WARC files, is named after it, not after each slot."""
    head, mark, tail = worker.rpartition(_SLOT_MARK)
    return head if mark and tail.isdigit() else worker


def __getattr__(name: str) -> Any:
    if name == "CrawlWorker":
        from rqcrawl.workers.worker import CrawlWorker

        return CrawlWorker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
