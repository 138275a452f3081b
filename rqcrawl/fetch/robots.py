"""robots.txt (RFC 9309) with Protego: fetched once per site per crawl, shared through Redis.

The verdict for a site (scheme://host:port) lives in one hash field of the crawl for
`robots_ttl` seconds, so every worker on every machine uses the same rules and the site sees
one robots.txt request, not one per worker: the job that finds it missing claims the fetch
(a key with a TTL), and the site's other URLs wait CLAIM_POLL at a time until it is known.
As RFC 9309 asks: a 4xx means no rules (allow all); a 5xx, a 429 or an unreachable server
means complete disallow *while* it lasts: the site's URLs wait and robots.txt is asked again
with back-off (retry_base x 2^n, at most max_backoff_delay) for as long as the crawl has URLs
of the site, so a site that comes back is crawled; an ask that fails `robots_patience` seconds
or more after the first failed one has the site's waiting pages recorded as failed, and so
does any moment past `robots_patience_idle` seconds at which they are all the crawl has left
(the gate decides, see rqcrawl.workers.gate). An ask after one that timed out waits ASK_GROWTH times
longer for its answer (up to download_timeout): a server that takes 30 s to answer is waited
for, not lost.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from typing import Protocol
from urllib.parse import urlsplit

from protego import Protego
from redis import Redis

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.http import FetchError, fetch
from rqcrawl.lru import LRU

MAX_BYTES = 500 * 1024  # RFC 9309: parse at least the first 500 KiB
CLAIM_POLL = 0.5  # seconds a URL waits while another job fetches its site's robots.txt
ASK_GROWTH = 3  # an ask after one that timed out waits this many times longer for its answer
HopCheck = Callable[[str], str | None]  # fetch's check of a redirect hop


@dataclass
class Robots:
    """One site's robots.txt verdict. `kind`: rules (parse `body`), allow (no usable file),
    unavailable (`attempts` asks in a row failed, the first answered at `since`, the last for
    `reason`; asked again at `retry_at`, which is also when the verdict expires)."""

    kind: str
    expires: float
    body: str = ""
    retry_at: float = 0.0
    attempts: int = 0
    error: str = ""
    since: float = 0.0
    reason: str = ""

    @cached_property
    def _parser(self) -> Protego | None:
        # A NUL (`User-agent: *\0`) made Protego drop the line's group with its rules, so
        # the site's Disallow lines did not apply: NULs are left out.
        return Protego.parse(self.body.replace("\0", "")) if self.kind == "rules" else None

    def allows(self, url: str, user_agent: str) -> bool:
        return self._parser is None or self._parser.can_fetch(url, user_agent)

    def sitemaps(self) -> list[str]:
        """The URLs of the file's `Sitemap:` lines (as written: not canonical, maybe relative)."""
        return [] if self._parser is None else list(self._parser.sitemaps)

    def crawl_delay(self, user_agent: str) -> float | None:
        return None if self._parser is None else self._parser.crawl_delay(user_agent)

    def given_up(self, now: float, cfg: CrawlConfig, idle: bool = False) -> bool:
        """Whether the site's waiting pages fail: robots.txt still unavailable robots_patience
        seconds after the first failed ask (robots_patience_idle when `idle`: the crawl has
        nothing else left), or a host name that does not resolve after `retries` more asks
        (no server there to come back: a typo in a seed is said in seconds, not minutes)."""
        if self.kind != "unavailable":
            return False
        unresolved = self.reason == "dns" and self.attempts > cfg.retries
        return unresolved or now >= self.since + patience(cfg, idle)

    def due(self, now: float) -> bool:
        """Whether robots.txt must be (re)fetched before the site's next page."""
        return now >= self.expires


def patience(cfg: CrawlConfig, idle: bool = False) -> float:
    """How long a site's pages wait for its unavailable robots.txt: robots_patience, or
    robots_patience_idle (if shorter) once they are all the crawl has left."""
    return min(cfg.robots_patience, cfg.robots_patience_idle) if idle else cfg.robots_patience


def ask_timeout(previous: Robots | None, now: float, cfg: CrawlConfig) -> float:
    """The read timeout of an ask of robots.txt: read_timeout, ASK_GROWTH times more after
    each ask in a row that timed out, at most download_timeout and what is left of the
    patience (never under read_timeout)."""
    if previous is None or previous.kind != "unavailable" or previous.reason != "timeout":
        return cfg.read_timeout
    left = previous.since + cfg.robots_patience - now
    grown = cfg.read_timeout * ASK_GROWTH**previous.attempts
    return max(cfg.read_timeout, min(grown, cfg.download_timeout, left))


def site_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class RobotsKeys(Protocol):
    """The names of the crawl's robots.txt keys (rqcrawl.frontier.keys.CrawlKeys has them):
    fetch/ sits below the frontier, so it names the keys it needs rather than importing them."""

    robots: str  # hash: site -> verdict

    def robots_fetcher(self, site: str) -> str: ...


class RobotsCache:
    """The crawl's robots.txt verdicts: a per-process copy (of the SITES_KEPT sites used
    last) in front of the Redis hash."""

    SITES_KEPT = 1000

    def __init__(self, redis: Redis, crawl_keys: RobotsKeys, cfg: CrawlConfig):
        self.redis = redis
        self.cfg = cfg
        self.keys = crawl_keys
        self.key = crawl_keys.robots  # hash: site -> verdict
        self._local: LRU[str, Robots] = LRU(self.SITES_KEPT)

    def get(self, site: str) -> Robots | None:
        """The site's known verdict, or None if robots.txt has never been fetched."""
        known = self._local.get(site)
        if known is None or known.due(time.time()):
            raw = self.redis.hget(self.key, site)
            if raw is None:
                return None
            known = self._local.put(site, Robots(**json.loads(raw)))
        return known

    def take_fetch(self, site: str, holder: str) -> tuple[bool, Robots | None]:
        """Whether `holder` may fetch the site's robots.txt now (one fetch per site at a time
        across the fleet; the turn ends with the fetch, or by itself if its holder dies), and
        the site's verdict as the turn was asked for. A fetch that ended between the caller's
        `get` and this ask left a verdict that is not due: the turn is then given back, and
        the site's robots.txt is not fetched twice."""
        ttl = math.ceil(self.cfg.download_timeout) + 5
        fetcher = self.keys.robots_fetcher(site)
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(fetcher, holder, nx=True, ex=ttl)
            pipe.hget(self.key, site)  # (after the SET: a fetch ends by writing, then freeing)
            taken, raw = pipe.execute()
        latest = None if raw is None else self._local.put(site, Robots(**json.loads(raw)))
        if taken and latest is not None and not latest.due(time.time()):
            self.redis.delete(fetcher)
            return False, latest
        return bool(taken), latest

    def fetch(self, site: str, previous: Robots | None, pace_hop: HopCheck) -> Robots:
        """Download the site's robots.txt now, share the verdict and end the fetch turn
        (take_fetch). `pace_hop(url)` is called before each redirect hop: the hop waits its
        host's turn there (the caller knows the hosts' pace), or raises FetchError."""
        robots = self._download(site, previous, pace_hop)
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hset(self.key, site, json.dumps(asdict(robots)))
            pipe.delete(self.keys.robots_fetcher(site))
            pipe.execute()
        self._local.put(site, robots)
        return robots

    def _download(self, site: str, previous: Robots | None, pace_hop: HopCheck) -> Robots:
        cfg = replace(self.cfg, read_timeout=ask_timeout(previous, time.time(), self.cfg))
        try:
            resp = fetch(site + "/robots.txt", cfg, pace_hop, any_type=True, truncate_at=MAX_BYTES)
        except FetchError as exc:
            now = time.time()  # after the answer: the backoff counts from the server's reply
            # 4xx, refused, redirect trouble: no usable rules (a 429/503 asking to wait too
            # long is not one: unavailable, asked again within max_retry_after)
            if not exc.transient and exc.reason != "retry_after_too_long":
                return Robots("allow", now + self.cfg.robots_ttl, error=str(exc))
            return self._unavailable(previous, exc, now)
        expires = time.time() + self.cfg.robots_ttl
        return Robots("rules", expires, body=(resp.body or b"").decode("utf-8", "replace"))

    def _unavailable(self, previous: Robots | None, exc: FetchError, now: float) -> Robots:
        """The verdict after a failed ask: asked again after retry_base x 2^n (n: the asks
        that failed before, in a row), at most max_backoff_delay or the Retry-After asked."""
        failing = previous is not None and previous.kind == "unavailable"
        attempts = previous.attempts if failing else 0
        backoff = min(self.cfg.retry_base * 2**attempts, self.cfg.max_backoff_delay)
        retry_at = now + max(min(exc.retry_after or 0.0, self.cfg.max_retry_after), backoff)
        since = previous.since if failing else now
        return Robots(
            "unavailable", retry_at, retry_at=retry_at, attempts=attempts + 1, error=str(exc),
            since=since, reason=exc.reason,
        )  # fmt: skip
