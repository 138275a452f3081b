"""A crawl steered: pause, resume, cancel, purge, and the pump of its due revisits."""

from __future__ import annotations

from redis import Redis

from rqcrawl.api.errors import CrawlError, StateError, refusals
from rqcrawl.api.reading import crawl_config, crawl_shards, status
from rqcrawl.config import CrawlConfig
from rqcrawl.defaults import PUMP_EVERY
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.state import is_known
from rqcrawl.ops import control


def pause(redis: Redis, name: str) -> bool:
    """Stop releasing the crawl's URLs (running pages finish, queued ones wait); False if it
    was already paused."""
    _, state = _controlled(redis, name)
    with refusals(name):
        return control.pause(crawl_shards(redis, name), name, state)


def resume(redis: Redis, name: str) -> None:
    """Release the held URLs of a paused crawl again."""
    cfg, state = _controlled(redis, name)
    with refusals(name):
        control.resume(crawl_shards(redis, name), name, cfg, state)


def cancel(redis: Redis, name: str) -> control.Cancelled:
    """Stop the crawl for good, dropping its pending URLs and queued jobs."""
    _, state = _controlled(redis, name)
    with refusals(name):
        return control.cancel(crawl_shards(redis, name), name, state)


def purge(redis: Redis, name: str, force: bool = False) -> control.Purged:
    """Delete every key and RQ job of the crawl, and nothing of any other crawl. Without
    `force`, only a finished or cancelled crawl (workers may still be on the others). A
    purge that a crash interrupted (a sharded crawl gone from some shards only) is
    completed, whatever the crawl's state (control.purge)."""
    shards = crawl_shards(redis, name)
    with refusals(name):
        if control.purging(shards, name):
            return control.discard_all(shards, name)
    try:
        _, state = _controlled(redis, name)
    except CrawlError:  # a half-registered or damaged crawl can still be purged
        if not is_known(redis, name):
            raise
        state = control.BROKEN
    with refusals(name):
        return control.purge(shards, name, state, force)


def pump(redis: Redis, name: str, every: float = PUMP_EVERY) -> int:
    """Move the crawl's due revisits from its task table into Redis, unless a pump ran for
    it in the last `every` seconds (whoever ran it); returns how many URLs were readmitted.
    For fleets of stock workers: the recommended worker pumps by itself."""
    cfg = crawl_config(redis, name)
    if not cfg.revisit:
        raise StateError(f"crawl {name} has no revisits (seed it with --revisit)")
    with refusals(name):
        return Frontier(redis, name, cfg).maybe_pump(every)


def _controlled(redis: Redis, name: str) -> tuple[CrawlConfig, str]:
    """Settings and current state of an existing crawl, for pause ... purge."""
    cfg = crawl_config(redis, name)
    return cfg, status(redis, name, recover=False)["state"]
