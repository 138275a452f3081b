"""A crawl on this machine: an embedded Redis, local workers, its records as a loop."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import astuple, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from rq.utils import import_attribute

from rqcrawl.api.errors import CrawlError, InvalidInput
from rqcrawl.api.planning import Plan, plan
from rqcrawl.api.reading import crawl_shards, status
from rqcrawl.config import CrawlConfig
from rqcrawl.extras import MissingExtra
from rqcrawl.frontier import keys
from rqcrawl.ops import follow, stats
from rqcrawl.options import taken
from rqcrawl.redisurl import client
from rqcrawl.workers.embedded import EmbeddedRedis
from rqcrawl.workers.runner import RENDER_WORKER_CLASS, LocalWorkers


@dataclass(frozen=True)
class LocalRun:
    """Where `crawl` runs: an embedded Redis in `data_dir` unless `redis_url` (or the
    `shards` setting) names one; `workers` local worker processes (`threads` requests in
    flight each) per Redis and `render_workers` browser workers (default: 1 if `render` is
    set); with `fresh`, the task table's rows of the crawl deleted first."""

    data_dir: str | os.PathLike = ".rqcrawl"
    redis_url: str | None = None
    workers: int = 2
    threads: int | None = None
    render_workers: int | None = None
    fresh: bool = False


def crawl(
    seeds: Iterable[str], name: str | None = None, cfg: CrawlConfig | None = None, **given: Any
) -> Iterator[dict]:
    """Run a crawl on this machine and yield each record as it is delivered, as `rqcrawl
    crawl` writes them: an embedded Redis in `data_dir` unless `redis_url` (or the `shards`
    setting) names one, `workers` local worker processes (`threads` requests in flight
    each) per Redis, and `render_workers` (default: 1 if `render` is set) browser workers.
    `given`: LocalRun's by name, the rest as `plan`'s; the input is checked before anything
    starts (InvalidInput).

    The same call again resumes the crawl (named from its seeds and settings, `stable_name`).
    A record is acknowledged, and trimmed from Redis, when the loop asks for the next one:
    a loop that stops (`break`, an exception) leaves the record it held to the next run, and
    no record is handed twice otherwise. Ends when the crawl is finished or cancelled; a crawl
    with revisits runs until the loop stops. Stopping the loop stops the workers (each ends
    its current page) and the embedded Redis (its data kept)."""
    run = taken(LocalRun, given)
    data_dir, redis_url, workers, threads, render_workers, fresh = astuple(run)
    planned = plan(seeds, name, cfg, stable_name=True, task_dir=data_dir, **given)
    if render_workers is None:
        render_workers = 1 if planned.cfg.render else 0
    if render_workers:  # without the render extra: one line now, before anything starts
        try:
            import_attribute(RENDER_WORKER_CLASS)
        except MissingExtra as exc:
            raise InvalidInput(str(exc)) from None
    fleet = partial(local_fleet, workers=workers, threads=threads, render_workers=render_workers)
    return _crawled(planned, Path(data_dir), redis_url, fleet, fresh)


def _crawled(
    planned: Plan,
    data_dir: Path,
    redis_url: str | None,
    fleet: Callable[..., AbstractContextManager[tuple[LocalWorkers, LocalWorkers]]],
    fresh: bool,
) -> Iterator[dict]:
    """The records of `crawl`, from its Redis, fleet and follower, stopped when left."""
    shards = planned.cfg.shards
    target = shards[0] if shards else redis_url
    server = None if target else EmbeddedRedis(data_dir)
    try:
        if server:
            embedded_redis(server)
            target = embedded_redis(server, ready=True)
        redis = client(target)
        planned.start(redis, fresh)
        with fleet(shards or [target], log_dir=data_dir / "workers") as (pool, _):

            def over() -> bool:
                if unserved := pool.unserved():
                    of = f" of shard {unserved[0]}" if len(shards) > 1 else ""
                    where = pool.log_dir
                    raise CrawlError(f"crawl {planned.name}: every worker{of} exited; see {where}")
                return status(redis, planned.name)["state"] in stats.OVER

            try:
                output = follow.Handover(data_dir)
                follower = follow.Follower(crawl_shards(redis, planned.name), planned.name, output)
            except follow.OutputError as exc:
                raise CrawlError(str(exc)) from None
            yield from follower.handed(over, threading.Event())
    finally:
        if server:
            server.stop()


def embedded_redis(server: EmbeddedRedis, ready: bool = False) -> str:
    """Launch the embedded Redis, or with `ready` wait until it answers; its URL. CrawlError,
    one line, if it cannot."""
    try:
        return (server.ready() if ready else server.launch()).url
    except RuntimeError as exc:
        raise CrawlError(str(exc)) from None
    except OSError as exc:
        raise CrawlError(f"cannot use {server.data_dir}: {exc.strerror}") from None


@contextmanager
def local_fleet(
    targets: list[str],
    workers: int,
    threads: int | None,
    log_dir: Path,
    render_workers: int,
    fork: bool = False,
) -> Iterator[tuple[LocalWorkers, LocalWorkers]]:
    """`workers` processes per Redis of `targets` (the crawl's shards) and `render_workers`
    browser workers of the render queue, stopped on exit. `fork` (LocalWorkers) only from a
    process that knows it runs no other thread."""
    pool = LocalWorkers(targets, workers, threads, log_dir, fork=fork)
    renderers = LocalWorkers(
        targets, render_workers, 1, log_dir / "render", worker_class=RENDER_WORKER_CLASS,
        queue=keys.RENDER_QUEUE,
    )  # fmt: skip
    with pool, renderers:
        yield pool, renderers
