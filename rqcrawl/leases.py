"""Renewing the leases of the URLs this process is working on, so that only a dead worker's
URLs are taken for lost (see frontier.py).

One daemon thread per process renews every lease the process holds, every RENEW_EVERY
seconds, with one Redis command per crawl whatever the number of jobs. It lives in the
process that runs the job, so every kind of worker gets it: a `CrawlWorker` or `SimpleWorker`
(one thread for all its jobs), the threads of `rqcrawl.threadworkers`, and the work-horse a
stock forking `rq worker` forks for each job (a thread of the horse, which dies with it).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from .frontier import LEASE, Frontier

RENEW_EVERY = LEASE / 3  # a lease survives two late or failed renewals

log = logging.getLogger(__name__)


class Renewer:
    """The URLs the jobs of this process hold, per crawl, and the thread renewing them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[Frontier, Counter[str]] = {}
        self._pid = 0  # the process whose thread runs; a forked child starts its own

    @contextmanager
    def hold(self, frontier: Frontier, url: str) -> Iterator[None]:
        """Keep the lease `frontier.claim` took on `url` alive while the block runs."""
        try:  # (RQ's job timeout may interrupt anywhere: no count must outlive the job)
            with self._lock:
                if self._pid != os.getpid():
                    self._held = {}
                    self._pid = os.getpid()
                    threading.Thread(target=self._run, name="rqcrawl-leases", daemon=True).start()
                self._held.setdefault(frontier, Counter())[url] += 1
            yield
        finally:
            with self._lock:
                urls = self._held.get(frontier, Counter())
                urls[url] -= 1
                if urls[url] <= 0:
                    del urls[url]
                if not urls:
                    self._held.pop(frontier, None)

    def renew(self) -> None:
        """Extend every lease the process holds (one command per crawl)."""
        with self._lock:
            held = [(frontier, list(urls)) for frontier, urls in self._held.items()]
        for frontier, urls in held:
            frontier.renew(urls)

    def _run(self) -> None:
        pid = os.getpid()
        while self._pid == pid:
            time.sleep(RENEW_EVERY)
            try:
                self.renew()
            except Exception as exc:  # Redis down for a moment: the next renewal may work
                log.warning("rqcrawl: could not renew URL leases: %s", exc)


renewer = Renewer()
