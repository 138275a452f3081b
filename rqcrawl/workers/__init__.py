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


def __getattr__(name: str) -> Any:
    if name == "CrawlWorker":
        from rqcrawl.workers.worker import CrawlWorker

        return CrawlWorker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
