"""The recommended worker's tender thread: due deferred URLs released, recovery passes and
revisit pumps of every crawl of its Redis, whether or not a job ends."""

from __future__ import annotations

import logging
import threading
import time

from redis import Redis, RedisError

from rqcrawl.config import ConfigError
from rqcrawl.defaults import MAX_SLEEP, PUMP_EVERY, REFRESH_CRAWLS
from rqcrawl.frontier import configs, state
from rqcrawl.frontier.dispatch import Frontier, watch_due
from rqcrawl.workers.crawls import check_identity, crawl_of

log = logging.getLogger(__name__)


class Tender:
    """Releases due deferred URLs of every running crawl, runs their recovery passes, and
    pumps the due revisits of crawls with revisits (Frontier.pump)."""

    def __init__(self, redis: Redis):
        self.redis = redis
        self.crawls: list[str] = []
        self.refreshed = 0.0
        self.pumped: dict[str, float] = {}  # crawl -> when this process last tried to pump
        self.wake = threading.Event()  # set to tick before the planned time

    def run(self, stop: threading.Event) -> None:
        """Tick until `stop` (with `wake` set, so as not to sleep on); nothing ends the
        thread before that, since every crawl of the worker depends on it. A URL this
        process parks for sooner than the next planned tick brings the tick forward: a job
        that finds its host's slot moved by a few milliseconds (the previous request ended
        later than booked) parks again, and would otherwise wait up to MAX_SLEEP more."""
        unwatch = watch_due(self.due)
        try:
            while not stop.is_set():
                try:
                    wait = self.tick()
                except RedisError as exc:
                    log.warning("rqcrawl tender: %s", exc)
                    wait = 1.0
                except Exception:
                    log.exception("rqcrawl tender: unexpected error")
                    wait = 1.0
                self.wake.wait(wait)
                self.wake.clear()  # (a wake set after the wait ended: the tick comes next)
        finally:
            unwatch()

    def due(self, at: float) -> None:
        """Something is due at `at` (a host this process freed, a URL it parked): tick now
        if the next tick may come after it (a tick is at most MAX_SLEEP after the last, and
        plans for what it saw due)."""
        if at < time.time() + MAX_SLEEP:
            self.wake.set()

    def tick(self) -> float:
        """One pass over the crawls; returns how long to sleep before the next one. A crawl
        that fails (other than by a Redis error, which stops the pass) is logged and left
        out until the next read of the crawls, so one broken crawl costs the others
        nothing and logs once per REFRESH_CRAWLS."""
        now = time.time()
        refresh = now - self.refreshed >= REFRESH_CRAWLS
        if refresh:
            self.crawls = self.running()
            self.refreshed = now
        wait = MAX_SLEEP
        for name in list(self.crawls):
            try:
                wait = min(wait, self._tend(name, refresh))
            except RedisError:
                raise
            except Exception:
                log.exception("rqcrawl tender: crawl %s skipped", name)
                self.crawls.remove(name)
        return wait

    def _tend(self, name: str, reap: bool) -> float:
        """Release what is due of crawl `name` (and reap it); returns the time until the
        next thing is due."""
        c = crawl_of(self.redis, name)
        if c is None:
            return MAX_SLEEP
        nxt = c.frontier.next_due()
        if nxt is not None and nxt <= time.time():
            c.frontier.release_due()
            nxt = c.frontier.next_due()
            if nxt is not None and nxt <= time.time() and c.frontier.at_bound():
                nxt = None  # held until a follower drains the records: no tight loop
        if reap:
            c.frontier.maybe_reap()
        if c.cfg.revisit and time.time() - self.pumped.get(name, 0.0) >= PUMP_EVERY:
            self.pumped[name] = time.time()
            c.frontier.maybe_pump()
        return MAX_SLEEP if nxt is None else max(0.005, nxt - time.time())

    def running(self) -> list[str]:
        """The crawls with URLs in flight, with revisits, or over several shards with URLs
        held or links to send here (their level may wait for a recovery pass, see
        rqcrawl.frontier.levels): finished ones cost nothing per tick. What the process kept of a
        crawl purged and created again meanwhile is dropped."""
        found = state.busy_crawls(self.redis, state.crawl_names(self.redis))
        for name, _, identity in found:
            check_identity(self.redis, name, identity)
        return [name for name, busy, _ in found if busy or self._waiting(name)]

    def _waiting(self, name: str) -> bool:
        try:
            cfg = configs.load(self.redis, name)
        except ConfigError:  # a broken crawl is left out here, and logged by `status`
            return False
        if cfg is None or not (cfg.revisit or cfg.shards):
            return False
        if cfg.revisit:
            return True
        view = Frontier(self.redis, name, cfg).level_view()
        return bool(view.held or view.outbox)
