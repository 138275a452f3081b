"""A crawl's pace in Redis, as CrawlState changes it: a job's slot of its politeness key
freed, robots.txt redirect hops' turns, parked URLs come due and released, the pump's and
the waker's turns. The pace itself (delay in force, back-off, slots) is lua/pacing.lua's."""

from __future__ import annotations

import time
from collections import Counter

from rqcrawl.defaults import (
    DUE_BATCH,
    HOP_HOLD,
    WAKER_TTL,
)
from rqcrawl.frontier import scripts
from rqcrawl.frontier.messages import (
    Released,
    Slot,
    pairs,
)
from rqcrawl.frontier.sitemaps import target
from rqcrawl.parse.urls import host_of


class Pacing:
    """A crawl's pace (CrawlState's part): its keys' slots and turns, robots.txt hops,
    parked URLs come due, the pump's and the waker's turns."""

    def pump_due(self, every: float) -> bool:
        """Take the pump's turn unless one ran in the last `every` seconds (any process)."""
        return bool(self.redis.set(self.keys.pump_lock, 1, nx=True, px=int(every * 1000)))

    def free_slot_step(self, url: str, slot: Slot) -> tuple[float, Released]:
        """Free the slot of a job whose request ended (or that failed, or was cut short);
        returns when its key may go next (0: unknown) and what that released."""
        next_at, *released = scripts.FREE_SLOT(
            self.redis, url=url, slot=slot.encode(), **self.frontier_names()
        )
        return float(next_at), pairs(released)

    def hop_turn(self, key: str, ended: str, own: bool, holder: str) -> float:
        """0 when a robots.txt redirect hop to politeness key `key` may go now, else when to
        ask again (scripts.HOP_TURN); `ended`: the key of the request that just ended;
        `holder`: the name of the hop's hold of a slot of another key while it waits."""
        at = scripts.HOP_TURN(
            self.redis, key=key, ended=ended, own=int(own), holder=holder, hold_for=HOP_HOLD,
            **self.frontier_names(),
        )  # fmt: skip
        return float(at)

    def hop_ended(self, key: str) -> None:
        """A robots.txt redirect hop to politeness key `key` ended (scripts.HOP_ENDED)."""
        scripts.HOP_ENDED(self.redis, key=key, **self.frontier_names())

    def take_due(self) -> tuple[bool, Released]:
        """Bring parked URLs whose time came back to their keys' queues, go on settling
        held-back records, and release what is due: whether records are left to settle,
        and the released URLs."""
        settling, *released = scripts.DUE(self.redis, limit=DUE_BATCH, **self.frontier_names())
        return bool(settling), pairs(released)

    def next_due(self) -> float | None:
        """When the next key may go or the next parked URL comes due, if any waits."""
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.zrange(self.keys.ready, 0, 0, withscores=True)
            pipe.zrange(self.keys.later, 0, 0, withscores=True)
            firsts = [found[0][1] for found in pipe.execute() if found]
        return min(firsts) if firsts else None

    def hold_waker(self) -> bool:
        """True for the one caller that is to queue the crawl's waker job (see
        Frontier.ensure_waker): at most one is queued or running at a time."""
        return bool(self.redis.set(self.keys.waker, 1, nx=True, ex=WAKER_TTL))

    def drop_waker(self) -> None:
        """The waker job is done: the next deferral may queue another."""
        self.redis.delete(self.keys.waker)

    def overdue(self, before: float) -> int:
        """Hosts whose turn and parked URLs whose time came before `before`, that nobody
        released yet."""
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.zcount(self.keys.later, "-inf", before)
            pipe.zcount(self.keys.ready, "-inf", before)
            return sum(pipe.execute())

    def running_requests(self, hosts: list[str]) -> list[int]:
        """Jobs running per host (live leases of their URLs: a released URL whose job has
        not started yet holds its host's slot, but no lease)."""
        live = self.redis.zrangebyscore(self.keys.leased, time.time(), "+inf")
        running = Counter(host_of(target(url.decode())) for url in live)
        return [running[host] for host in hosts]
