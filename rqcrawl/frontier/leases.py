"""Short leases that the process running a job renews, so that only a dead worker's share of
the crawl is taken back, and within seconds: the job's URL (the frontier's `leased` set) and
its host's politeness slot (`leases:HOST`). A lease is a member of a Redis sorted set scored
by its expiry.

One daemon thread per process renews every lease the process holds, every RENEW_EVERY
seconds, in one pipelined round trip (one command per set) whatever the number of jobs. It
lives in the process that runs the job, so every kind of worker gets it: a `CrawlWorker` or
`SimpleWorker` (one thread for all its jobs), the threads of `rqcrawl.workers.threadworkers`, and
the work-horse a stock forking `rq worker` forks for each job (a thread of the horse, which dies
with it).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from redis import Redis

from rqcrawl.defaults import LEASE, RENEW_EVERY

log = logging.getLogger(__name__)


class Renewer:
    """The leases the jobs of this process hold, and the thread renewing them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[Redis, str], Counter[str]] = {}  # (redis, set) -> members
        self._pid = 0  # the process whose thread runs; a forked child starts its own

    @contextmanager
    def hold(self, redis: Redis, *leases: tuple[str, str]) -> Iterator[None]:
        """Keep the (sorted set, member) `leases` alive while the block runs; one that does
        not exist (not taken, or ended) is not created."""
        try:  # (RQ's job timeout may interrupt anywhere: no count must outlive the job)
            with self._lock:
                if self._pid != os.getpid():
                    self._held = {}
                    self._pid = os.getpid()
                    threading.Thread(target=self._run, name="rqcrawl-leases", daemon=True).start()
                for key, member in leases:
                    self._held.setdefault((redis, key), Counter())[member] += 1
            yield
        finally:
            with self._lock:
                for key, member in leases:
                    members = self._held.get((redis, key), Counter())
                    members[member] -= 1
                    if members[member] <= 0:
                        del members[member]
                    if not members:
                        self._held.pop((redis, key), None)

    def renew(self) -> None:
        """Extend every lease the process holds by LEASE seconds."""
        with self._lock:
            held = [(redis, key, list(members)) for (redis, key), members in self._held.items()]
        expiry = time.time() + LEASE
        for redis in {redis for redis, _, _ in held}:
            with redis.pipeline(transaction=False) as pipe:
                for _, key, members in (h for h in held if h[0] is redis):
                    pipe.zadd(key, dict.fromkeys(members, expiry), xx=True)
                pipe.execute()

    def _run(self) -> None:
        pid = os.getpid()
        while self._pid == pid:
            time.sleep(RENEW_EVERY)
            try:
                self.renew()
            except Exception as exc:  # Redis down for a moment: the next renewal may work
                log.warning("rqcrawl: could not renew leases: %s", exc)


renewer = Renewer()
