"""The recommended worker: `rq worker crawl -w rqcrawl.worker.CrawlWorker --with-scheduler`.

It is RQ's SimpleWorker (no fork per job, so the HTTP keep-alive sessions, the crawl configs and
the robots.txt verdicts stay warm across jobs) plus one background thread that tends every
crawl of the Redis: it releases deferred URLs the moment they are due (RQ's scheduler only has
whole seconds) and runs the recovery pass even when no job ends, so URLs of a killed worker
come back although nobody runs `rqcrawl status`. A stock `rq worker crawl --with-scheduler`
stays correct without it, only coarser: deferred URLs then wait for a job start or a
wake-up job, up to a second late.
"""

from __future__ import annotations

import logging
import threading
import time

from redis import Redis, RedisError
from rq.worker import SimpleWorker

from . import keys
from .jobs import crawl_of

MAX_SLEEP = 0.1  # seconds between two looks at the running crawls when nothing is due sooner
REFRESH_CRAWLS = 5.0  # seconds between two reads of the set of crawls (and recovery passes)

log = logging.getLogger(__name__)


class CrawlWorker(SimpleWorker):
    """SimpleWorker plus the release-and-recovery thread (see the module docstring)."""

    # One tender per process, however many workers run in its threads (rqcrawl.threadworkers).
    _tending = threading.Lock()

    def work(self, *args, **kwargs) -> bool:
        if not self._tending.acquire(blocking=False):
            return super().work(*args, **kwargs)
        try:
            return self._work_tended(*args, **kwargs)
        finally:
            self._tending.release()

    def _work_tended(self, *args, **kwargs) -> bool:
        stop = threading.Event()
        tender = Tender(Redis(connection_pool=self.connection.connection_pool))
        thread = threading.Thread(target=tender.run, args=(stop,), name="rqcrawl-tender")
        thread.daemon = True
        thread.start()
        try:
            return super().work(*args, **kwargs)
        finally:
            stop.set()
            thread.join(5)


class Tender:
    """Releases due deferred URLs of every running crawl and runs their recovery passes."""

    def __init__(self, redis: Redis):
        self.redis = redis
        self.crawls: list[str] = []
        self.refreshed = 0.0

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                wait = self.tick()
            except RedisError as exc:
                log.warning("rqcrawl tender: %s", exc)
                wait = 1.0
            stop.wait(wait)

    def tick(self) -> float:
        """One pass over the crawls; returns how long to sleep before the next one."""
        now = time.time()
        refresh = now - self.refreshed >= REFRESH_CRAWLS
        if refresh:
            self.crawls = self.running()
            self.refreshed = now
        wait = MAX_SLEEP
        for name in self.crawls:
            c = crawl_of(self.redis, name)
            if c is None:
                continue
            nxt = c.frontier.next_due()
            if nxt is not None and nxt <= time.time():
                c.frontier.release_due()
                nxt = c.frontier.next_due()
            if nxt is not None:
                wait = min(wait, max(0.005, nxt - time.time()))
            if refresh:
                c.frontier.maybe_reap()
        return wait

    def running(self) -> list[str]:
        """The crawls with URLs in flight: finished ones cost nothing per tick."""
        names = sorted(m.decode() for m in self.redis.smembers(keys.CRAWLS))
        with self.redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hlen(keys.key(name, "inflight"))
            return [n for n, size in zip(names, pipe.execute(), strict=True) if size]
