"""robots.txt (RFC 9309) with Protego: fetched once per site per crawl, shared through Redis.

The verdict for a site (scheme://host:port) lives in one hash field of the crawl for
`robots_ttl` seconds, so every worker on every machine uses the same rules and the site sees
one robots.txt request, not one per worker: the job that finds it missing claims the fetch
(a key with a TTL), and the site's other URLs wait CLAIM_POLL at a time until it is known.
As RFC 9309 asks: a 4xx means no rules (allow all); a 5xx, a 429 or an unreachable server
means "wait and try again", never "crawl blindly"; after `retries` more failures the site's
pages are recorded as failed.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from functools import cached_property
from urllib.parse import urlsplit

from protego import Protego
from redis import Redis

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.http import FetchError, fetch
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.workers.lru import LRU

MAX_BYTES = 500 * 1024  # RFC 9309: parse at least the first 500 KiB
CLAIM_POLL = 0.5  # seconds a URL waits while another job fetches its site's robots.txt


@dataclass
class Robots:
    """One site's robots.txt verdict. `kind`: rules (parse `body`), allow (no usable file),
    unavailable (try again at `retry_at`), failed (gave up after `attempts`)."""

    kind: str
    expires: float
    body: str = ""
    retry_at: float = 0.0
    attempts: int = 0
    error: str = ""

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

    def due(self, now: float) -> bool:
        """Whether robots.txt must be (re)fetched before the site's next page."""
        return now >= self.expires or (self.kind == "unavailable" and now >= self.retry_at)


def site_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class RobotsCache:
    """The crawl's robots.txt verdicts: a per-process copy (of the SITES_KEPT sites used
    last) in front of the Redis hash."""

    SITES_KEPT = 1000

    def __init__(self, redis: Redis, crawl_keys: CrawlKeys, cfg: CrawlConfig):
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

    def claim(self, site: str, holder: str) -> bool:
        """Whether `holder` may fetch the site's robots.txt now: one fetch per site at a time
        across the fleet. The claim ends with the fetch, or by itself if its holder dies."""
        ttl = math.ceil(self.cfg.download_timeout) + 5
        return bool(self.redis.set(self.keys.robots_claim(site), holder, nx=True, ex=ttl))

    def fetch(self, site: str, previous: Robots | None) -> Robots:
        """Download the site's robots.txt now, share the verdict and end the claim."""
        robots = self._download(site, previous.attempts if previous else 0)
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.hset(self.key, site, json.dumps(asdict(robots)))
            pipe.delete(self.keys.robots_claim(site))
            pipe.execute()
        self._local.put(site, robots)
        return robots

    def _download(self, site: str, attempts: int) -> Robots:
        try:
            resp = fetch(
                site + "/robots.txt", self.cfg, lambda hop: None, any_type=True,
                truncate_at=MAX_BYTES,
            )  # fmt: skip
        except FetchError as exc:
            now = time.time()  # after the answer: the backoff counts from the server's reply
            expires = now + self.cfg.robots_ttl
            # 4xx, refused, redirect trouble: no usable rules (a 429/503 asking to wait too
            # long is not one: unavailable, tried again within max_retry_after)
            if not exc.transient and exc.reason != "retry_after_too_long":
                return Robots("allow", expires, error=str(exc))
            if attempts >= self.cfg.retries:
                return Robots("failed", expires, attempts=attempts + 1, error=str(exc))
            asked = min(exc.retry_after or 0.0, self.cfg.max_retry_after)
            wait = max(asked, self.cfg.retry_base * 2**attempts)
            return Robots(
                "unavailable", expires, retry_at=now + wait, attempts=attempts + 1, error=str(exc)
            )
        expires = time.time() + self.cfg.robots_ttl
        return Robots("rules", expires, body=(resp.body or b"").decode("utf-8", "replace"))
