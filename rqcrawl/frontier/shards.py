"""One crawl over several Redis servers: which shard holds a host, and a connection to each.

Every host belongs to exactly one shard: the first placement rule (`shard_rules`, a glob on
the host such as `*.de`) that matches it, else rendezvous (highest random weight) hashing of
the host over the shard URLs. Rendezvous hashing needs no ring and no tuning, and adding or
removing one of N shards moves only the hosts that land on, or were on, that shard (about 1/N
of them). It is a dozen lines with blake2b from the standard library, so no library is used.

A shard holds its hosts' frontier, Bloom filter, politeness, robots.txt verdicts, records and
its own RQ queue `crawl`; the crawl's settings (with the shard list) are stored in every
shard, and each shard knows its own index (state.shard_index), never derived from the URL
a worker was started with (`localhost` and `127.0.0.1` are the same server).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from redis import Redis

from rqcrawl.config import CrawlConfig
from rqcrawl.redisurl import client


@dataclass(frozen=True)
class ShardMap:
    """The shards of a crawl (index = shard id) and its placement rules."""

    urls: tuple[str, ...]
    rules: tuple[tuple[str, int], ...] = field(default=())  # (host glob, shard index), in order

    def index_of(self, host: str, key: str | None = None) -> int:
        """The shard of `host`: the first rule that matches it, else the shard whose URL
        scores highest with its politeness `key` (rendezvous hashing; the host itself unless
        hosts are paced by address: hosts of one address then share a shard, and their
        queue and pace there)."""
        host = host.lower()
        for pattern, index in self.rules:
            if fnmatchcase(host, pattern):
                return index
        placed = key or host
        return max(range(len(self.urls)), key=lambda i: _weight(self.urls[i], placed))


def _weight(shard: str, host: str) -> int:
    digest = hashlib.blake2b(f"{shard}\n{host}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def shard_map(cfg: CrawlConfig) -> ShardMap | None:
    """The crawl's shard map, or None for a crawl on one Redis."""
    if not cfg.shards:
        return None
    rules = tuple((p.lower(), cfg.shards.index(url)) for p, url in cfg.shard_rules.items())
    return ShardMap(tuple(cfg.shards), rules)


_connections: dict[str, Redis] = {}


def _forked() -> None:
    """A forked child forgets the parent's shard connections now, while their descriptors
    are the inherited ones: dropped later, after the child closed them and reused their
    numbers, a socket's finalizer would close one of the child's own."""
    _connections.clear()


os.register_at_fork(after_in_child=_forked)


def connect(url: str) -> Redis:
    """The process's connection to the shard at `url` (made once per URL)."""
    conn = _connections.get(url)
    if conn is None:
        conn = _connections[url] = client(url)
    return conn
