"""Per-host politeness shared by every worker on every machine: one Lua gate per request.

For each host (host:port) Redis keeps when its next request may start (`ready`), the last
time slot promised to a deferred job (`booked`) and the spacing of slots, in one hash field
of the crawl, plus a sorted
set of the leases of requests in progress (short, renewed by the process running the job:
a killed worker's lease frees itself within seconds).
A request may start when `ready` has passed and fewer than `host_concurrency` leases are live;
it then sets `ready` to now + delay, and its end pushes `ready` to at least end + delay (as
Heritrix does): the server then sees at least `delay` between two requests whatever the
scheduling jitter between the gate and the socket. Otherwise the gate books the next free
slot, spaced by the delay after the slots already booked, and the job parks its URL until
then instead of sleeping, so the worker goes on with other hosts. A job arriving fresh waits
behind booked ones, so deferred URLs are not starved by newcomers.
"""

from __future__ import annotations

import time

from redis import Redis

from . import scripts
from .config import CrawlConfig
from .keys import CrawlKeys
from .leases import LEASE


class Politeness:
    """The per-host gate of one crawl."""

    def __init__(self, redis: Redis, crawl_keys: CrawlKeys, cfg: CrawlConfig):
        self.redis = redis
        self.keys = crawl_keys
        self.cfg = cfg

    def acquire(self, host: str, lease: str, delay: float, booked: bool) -> float | None:
        """None when a request to `host` may start now (the lease is taken), else the time
        booked for this job to try again. `booked`: the job already waited for a slot."""
        now = time.time()
        expiry = now + LEASE  # renewed while the job runs: a dead worker's slot frees soon
        answer = scripts.HOST_GATE(
            self.redis, hosts=self.keys.hosts, leases=self.lease_key(host), host=host,
            now=repr(now), delay=delay, concurrency=self.cfg.host_concurrency, lease=lease,
            expiry=repr(expiry), booked=int(booked),
        )  # fmt: skip
        slot = float(answer)
        return None if slot == 0 else slot

    def release(self, host: str, lease: str, delay: float, started: float) -> None:
        """End a request begun at `started`: free its lease; the host's next request waits
        `delay` from now."""
        now = time.time()
        scripts.HOST_RELEASE(
            self.redis, hosts=self.keys.hosts, leases=self.lease_key(host), host=host,
            lease=lease, now=repr(now), delay=delay, duration=repr(max(0.0, now - started)),
        )  # fmt: skip

    def delay_for(self, crawl_delay: float | None) -> float:
        """The delay between two requests to a host: ours, or its Crawl-delay (capped)."""
        return max(self.cfg.delay, min(crawl_delay or 0.0, self.cfg.max_crawl_delay))

    def lease_key(self, host: str) -> str:
        """The sorted set of the leases of requests in progress to `host` (rqcrawl.leases)."""
        return self.keys.host_leases(host)
