"""Where the seconds of one `rqcrawl crawl` go (`--timings`): its phases, each at its time
since the command started, so that the fixed costs of a small crawl (imports, Redis, workers,
shutdown) stand apart from the crawl itself and the politeness pace."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from redis import Redis

from rqcrawl.fetch.robots import RobotsCache, site_of
from rqcrawl.frontier import configs, keys
from rqcrawl.frontier.dispatch import Frontier


def process_age() -> float:
    """Seconds since this process started (Linux: /proc), so that the interpreter's start
    and the imports count; elsewhere 0 (the phases then start at the first mark)."""
    try:
        with open("/proc/self/stat") as fh:
            started = int(fh.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)


@dataclass
class Timings:
    """Named moments of one command, as epoch seconds; `show` lists them in order with the
    time since the process started and since the moment before."""

    start: float = field(default_factory=lambda: time.time() - process_age())
    moments: list[tuple[str, float]] = field(default_factory=list)

    def mark(self, what: str, at: float | None = None) -> None:
        """`what` happened now, or at epoch seconds `at` (a moment read from Redis)."""
        self.moments.append((what, time.time() if at is None else at))

    def show(self) -> str:
        lines = ["timings (seconds since the command started, and since the line above):"]
        before = self.start
        for what, at in sorted(self.moments, key=lambda m: m[1]):
            lines.append(f"  {at - self.start:7.3f}  +{at - before:6.3f}  {what}")
            before = at
        return "\n".join(lines)


def crawl_moments(redis: Redis, crawl: str, seeds: list[str]) -> list[tuple[str, float]]:
    """The moments of a crawl that Redis keeps: when each seed site's robots.txt answered
    (its first request, the verdict's expiry less robots_ttl; none while unavailable) and when
    the crawl's last URL ended (a sitemap probe's included)."""
    cfg = configs.load(redis, crawl, fresh=True)
    if cfg is None:
        return []
    state = Frontier(redis, crawl, cfg)
    robots = RobotsCache(redis, state.keys, cfg)
    found = []
    for site in sorted({site_of(url) for url in seeds}):
        verdict = robots.get(site) if cfg.obey_robots else None
        if verdict is not None and verdict.kind != "unavailable":  # (its expiry: the next ask)
            found.append((f"robots.txt of {site} answered", verdict.expires - cfg.robots_ttl))
    last = state.snapshot().counters.get(keys.LAST_AT)
    if last:
        found.append(("the crawl's last URL ended", float(last)))
    return found
