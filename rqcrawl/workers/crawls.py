"""What a worker process keeps of a crawl between jobs (its config, Frontier, politeness
gate, robots.txt cache and cookies), read from Redis once per process, and how a job claims
its URL through it. A job reads the crawl by name only: a stock `rq worker crawl` needs
nothing but the Redis URL."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

from redis import Redis

from rqcrawl import config
from rqcrawl.config import CrawlConfig
from rqcrawl.fetch import warc
from rqcrawl.fetch.cookies import Cookies
from rqcrawl.fetch.politeness import Politeness
from rqcrawl.fetch.robots import RobotsCache
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.redisurl import server_key
from rqcrawl.frontier.shards import connect as shard_connect
from rqcrawl.frontier.state import InFlight, StaleCrawl
from rqcrawl.workers.lru import LRU


@dataclass
class Crawl:
    """What a worker process keeps of one crawl between jobs."""

    cfg: CrawlConfig
    frontier: Frontier
    politeness: Politeness
    robots: RobotsCache
    cookies: Cookies


# Crawls whose state a process keeps (the most recently used): each may hold a few MB
# (Frontier.known, robots.txt verdicts). By server and name: a process may serve several
# shards of a crawl, each with its own state (redisurl.server_key).
CRAWLS_KEPT = 32
_crawls: LRU[tuple[Hashable, str], Crawl] = LRU(CRAWLS_KEPT)


def crawl_of(redis: Redis, name: str) -> Crawl | None:
    """The process's view of crawl `name` on this Redis, or None when it holds no such
    crawl."""
    key = (server_key(redis), name)
    c = _crawls.get(key)
    if c is None:
        cfg = config.load(redis, name)
        if cfg is None:
            return None
        frontier = Frontier(redis, name, cfg)
        c = _crawls.put(
            key,
            Crawl(
                cfg,
                frontier,
                Politeness(redis, frontier.state.keys, cfg, gate_home(redis, frontier)),
                RobotsCache(redis, frontier.state.keys, cfg),
                Cookies(cfg),
            ),
        )
    return c


def gate_home(redis: Redis, frontier: Frontier) -> Callable[[str], Redis]:
    """Where a politeness gate lives: a host's on its own shard (this one); with
    politeness_by = "ip" in a crawl over several shards, an address's on its home shard
    (placed like a host), so that hosts of one address on different shards share it."""
    state = frontier.state
    if state.shards is None or frontier.cfg.politeness_by != "ip":
        return lambda key: redis

    def home(key: str) -> Redis:
        index = state.shards.index_of(key)
        return redis if index == state.index else shard_connect(frontier.cfg.shards[index])

    return home


def forget(name: str) -> None:
    """Drop what the process keeps of crawl `name`: it was purged and its name now belongs
    to another crawl, with other settings and other URLs."""
    _crawls.pop_where(lambda key: key[1] == name)
    config.forget(name)
    warc.forget(name)


def check_identity(redis: Redis, name: str, identity: bytes | None) -> None:
    """Forget crawl `name` if what the process keeps of it on this Redis belongs to an
    earlier crawl of the same name (see Frontier.same_crawl)."""
    c = _crawls.get((server_key(redis), name))
    if c is not None and not c.frontier.state.same_crawl(identity):
        forget(name)


def claim(
    redis: Redis, name: str, url: str, job_id: str, reply: list | None = None
) -> tuple[Crawl | None, InFlight | None, bool]:
    """The crawl (None: no such crawl) and Frontier.claim's answer for the job (`reply`:
    the claim's reply, if the worker sent it with the job's start: see claim_call). A
    crawl that is not the one the process knew by that name is read again (a fresh
    Frontier takes the identity it sees, so this recurses once at most)."""
    c = crawl_of(redis, name)
    if c is None:
        return None, None, False
    try:
        return c, *c.frontier.claim(url, job_id, reply)
    except StaleCrawl:
        forget(name)
        return claim(redis, name, url, job_id)


def claim_call(redis: Redis, name: str, url: str, job_id: str) -> dict | None:
    """The keys and arguments of the job's claim (scripts.CLAIM), for a worker that sends it
    in the round trip that starts the job; None if there is no such crawl."""
    c = crawl_of(redis, name)
    return None if c is None else c.frontier.state.claim_call(url, job_id)
