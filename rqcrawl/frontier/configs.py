"""A crawl's settings in Redis: stored once when the crawl is seeded, read by every worker.

Workers read the config of a crawl from Redis (and cache it per process), so a bare
`rq worker crawl` with only a Redis URL can serve any crawl.
"""

from __future__ import annotations

import json
from collections.abc import Hashable

from redis import Redis

from rqcrawl.config import ConfigError, CrawlConfig
from rqcrawl.defaults import CONFIGS_KEPT
from rqcrawl.frontier import keys
from rqcrawl.lru import LRU
from rqcrawl.redisurl import server_key


def save(redis: Redis, crawl: str, config: CrawlConfig) -> bool:
    """Store the config of a new crawl; False if the crawl already has one (it is kept).
    Listing the crawl in `keys.CRAWLS` is the seeding's last step (control.start)."""
    return bool(redis.set(keys.CrawlKeys(crawl).config, config.to_json(), nx=True))


_cache: LRU[tuple[Hashable, str], CrawlConfig] = LRU(CONFIGS_KEPT)  # by server and name


def load(redis: Redis, crawl: str, fresh: bool = False) -> CrawlConfig | None:
    """The crawl's config, cached (a crawl's config never changes; a purged crawl's name
    used again is another crawl, which workers notice from its identity, see `forget`).
    `fresh` reads it from Redis all the same: readers that know no identity (status, the
    metrics, the API) must not show an earlier crawl's settings. A stored config that does
    not pass today's checks is a ConfigError naming the crawl."""
    key = (server_key(redis), crawl)
    cfg = None if fresh else _cache.get(key)
    if cfg is None:
        raw = redis.get(keys.CrawlKeys(crawl).config)
        if raw is None:
            return None
        try:
            cfg = _cache.put(key, CrawlConfig.from_dict(json.loads(raw)))
        except ValueError as exc:  # ConfigError, bad JSON or not UTF-8
            raise ConfigError(f"crawl {crawl}: unreadable settings in Redis: {exc}") from None
    return cfg


def forget(crawl: str) -> None:
    """Drop the cached config of `crawl` (purged, its name now used by another crawl)."""
    _cache.pop_where(lambda key: key[1] == crawl)
