"""What a worker process keeps of a crawl between jobs (its config, Frontier, robots.txt
cache and cookies), read from Redis once per process, and how a job claims its URL through
it. A job reads the crawl by name only: a stock `rq worker crawl` needs nothing but the Redis
URL."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from redis import Redis

from rqcrawl.config import CrawlConfig
from rqcrawl.defaults import CRAWLS_KEPT
from rqcrawl.fetch import warc
from rqcrawl.fetch.cookies import Cookies
from rqcrawl.fetch.robots import RobotsCache
from rqcrawl.frontier import configs
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.messages import Claim
from rqcrawl.frontier.state import StaleCrawl
from rqcrawl.lru import LRU
from rqcrawl.redisurl import server_key


@dataclass
class Crawl:
    """What a worker process keeps of one crawl between jobs."""

    cfg: CrawlConfig
    frontier: Frontier
    robots: RobotsCache
    cookies: Cookies


_crawls: LRU[tuple[Hashable, str], Crawl] = LRU(CRAWLS_KEPT)


def crawl_of(redis: Redis, name: str) -> Crawl | None:
    """The process's view of crawl `name` on this Redis, or None when it holds no such
    crawl."""
    key = (server_key(redis), name)
    c = _crawls.get(key)
    if c is None:
        cfg = configs.load(redis, name)
        if cfg is None:
            return None
        frontier = Frontier(redis, name, cfg)
        robots = RobotsCache(redis, frontier.keys, cfg)
        c = _crawls.put(key, Crawl(cfg, frontier, robots, Cookies(cfg)))
    return c


def forget(name: str) -> None:
    """Drop what the process keeps of crawl `name`: it was purged and its name now belongs
    to another crawl, with other settings and other URLs."""
    _crawls.pop_where(lambda key: key[1] == name)
    configs.forget(name)
    warc.forget(name)


def check_identity(redis: Redis, name: str, identity: bytes | None) -> None:
    """Forget crawl `name` if what the process keeps of it on this Redis belongs to an
    earlier crawl of the same name (see Frontier.same_crawl)."""
    c = _crawls.get((server_key(redis), name))
    if c is not None and not c.frontier.same_crawl(identity):
        forget(name)


def claim(
    redis: Redis, name: str, url: str, job_id: str, reply: list | None = None
) -> tuple[Crawl | None, Claim | None]:
    """The crawl (None: no such crawl) and Frontier.claim's answer for the job (`reply`:
    the claim's reply, if the worker sent it with the job's start: see claim_call). A
    crawl that is not the one the process knew by that name is read again (a fresh
    Frontier takes the identity it sees, so this recurses once at most)."""
    c = crawl_of(redis, name)
    if c is None:
        return None, None
    try:
        return c, c.frontier.claim(url, job_id, reply)
    except StaleCrawl:
        forget(name)
        return claim(redis, name, url, job_id)


def claim_call(redis: Redis, name: str, url: str, job_id: str) -> dict | None:
    """The keys and arguments of the job's claim (scripts.CLAIM), for a worker that sends it
    in the round trip that starts the job; None if there is no such crawl."""
    c = crawl_of(redis, name)
    return None if c is None else c.frontier.claim_call(url, job_id)
