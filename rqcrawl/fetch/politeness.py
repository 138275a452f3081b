"""Per-host politeness shared by every worker on every machine: what a host's pace is and how
its answers change it. The frontier keeps it (rqcrawl.frontier.state: a host's queue, its slots
and its pace in Redis, changed in the same atomic steps that release and end its URLs); this
module says what those steps are told.

A host (host:port) takes at most `host_concurrency` requests at a time, and its next request
starts at least the delay in force after its last one ended (as Heritrix does): the server
then sees that gap whatever the scheduling jitter between the frontier and the socket. The
delay in force is the host's base delay (the `delay` setting, or its robots.txt Crawl-delay,
capped at max_crawl_delay), or more when the host asked for it (docs/howto/politeness.md):
429/503 and Retry-After raise it (bounded exponential back-off) and successes bring it back
down, halving the extra delay (`adaptive_throttle`); `delay_factor` adds a delay proportional
to the host's smoothed fetch time. That delay is computed once, by the frontier's Lua
(lua/pacing.lua, in_force), which stores it with its reason for `status` to show
(rqcrawl.frontier.messages.HostPace). Fetching robots.txt takes no turn of the pace: a site's
first page may follow it at once.

With `politeness_by = "ip"` the key of a host's queue and pace is its address ("ip:ADDR",
resolved by the guard's resolver and kept IP_TTL seconds), so hosts sharing an address share
one queue and one pace (in a crawl over several shards, hosts are placed by that key).
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.guard import resolve

IP_TTL = 60.0  # seconds a host's address is kept for its key (politeness_by = "ip")
IPS_KEPT = 10_000  # hosts whose address a process keeps
PUSHBACK = (429, 503)  # answers that raise a host's delay (and any with Retry-After)


class GateKeys:
    """A host's politeness key: itself, or "ip:ADDR" of its first address with
    politeness_by = "ip" (itself when it does not resolve: its fetch fails anyway)."""

    def __init__(self, cfg: CrawlConfig):
        self.by_ip = cfg.politeness_by == "ip"
        self._ips: dict[str, tuple[float, str]] = {}  # host -> (until, key)

    def __call__(self, host: str) -> str:
        if not self.by_ip:
            return host
        now = time.monotonic()
        until, key = self._ips.get(host, (0.0, host))
        if until > now:
            return key
        parts = urlsplit("//" + host)
        try:
            key = "ip:" + resolve(parts.hostname or host, parts.port or 80)[0][1][0]
        except (OSError, IndexError, ValueError):  # gaierror is an OSError
            key = host
        if len(self._ips) > IPS_KEPT:
            self._ips.clear()
        self._ips[host] = (now + IP_TTL, key)
        return key


def delay_for(cfg: CrawlConfig, crawl_delay: float | None) -> float:
    """A host's base delay: ours, or its Crawl-delay (capped at max_crawl_delay)."""
    return max(cfg.delay, min(crawl_delay or 0.0, cfg.max_crawl_delay))


def answer(status: int | None, retry_after: float | None) -> str:
    """What the adaptive throttle hears of a request: 'push' (slow down), 'ok' (a success:
    the extra delay halves) or '-'."""
    if status in PUSHBACK or retry_after:
        return "push"
    return "ok" if status is not None and status < 400 else "-"
