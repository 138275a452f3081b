"""Crawl control for operators: pause, resume, cancel and purge one crawl of a shared Redis.

A crawl is halted by the field `paused_at` of its counters hash: the frontier releases
nothing while it is set, and a job of a halted crawl that starts puts its URL back on the
host's queue instead of fetching it. Resume clears the field and releases again. Cancel is a
halt for good (`cancelled_at` too) that drops the waiting and in-flight URLs. Purge
deletes every key of the crawl and its RQ jobs, and nothing of any other crawl.

Whoever can write to Redis can plant a job whose pickled data runs code when loaded, so
nothing here loads a job: jobs are found by their ids and deleted by id.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Sequence
from dataclasses import astuple, dataclass, replace

from redis import Redis, RedisError
from rq.exceptions import InvalidJobOperation
from rq.job import Job, JobStatus
from rq.queue import Queue

from rqcrawl import config
from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import bloom, configs, keys, levels, shards
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.outage import TableUnavailable
from rqcrawl.frontier.shards import shard_map
from rqcrawl.frontier.state import glob_escape
from rqcrawl.ops import stats

log = logging.getLogger(__name__)

# RQ states of a job that no worker has started
_PENDING = {JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.DEFERRED}

# The tail of a job id after `rqcrawl-{crawl}-`: a URL's job (state.InFlight.job_id:
# 20 hex digits of SHA-1, attempt, turn) or a waker job (Frontier.ensure_waker). Neither tail
# contains the other's shape, and none of its parts a `-`, so the crawl name is exact.
_JOB_ID = re.compile(r"rqcrawl-(?P<crawl>.+)-(?:[0-9a-f]{20}-\d+-\d+|wake-\d+)")

BROKEN = "broken"  # the state of a crawl whose settings are missing or unreadable


class ControlError(Exception):
    """The crawl is in a state that does not allow the operation."""


@dataclass(frozen=True)
class Cancelled:
    held: int  # admitted URLs that were waiting for their level
    in_flight: int  # released URLs (queued, scheduled, running or deferred)
    jobs_removed: int  # RQ jobs deleted before a worker started them

    @property
    def dropped(self) -> int:
        return self.held + self.in_flight


@dataclass(frozen=True)
class Purged:
    keys: int
    jobs: int
    tasks: int = 0  # rows of the task table (crawls with revisits)


def pause(conns: Sequence[Redis], crawl: str, state: str) -> bool:
    """Stop releasing URLs of a running crawl, on every shard in shard order; False if it
    was already paused everywhere (a crash in between left the first shards paused: pause
    again completes it)."""
    if state in stats.OVER:
        raise ControlError(f"crawl {crawl} is {state}: nothing to pause")
    return any([_state(redis, crawl).pause() for redis in conns])


def resume(conns: Sequence[Redis], crawl: str, cfg: CrawlConfig, state: str) -> None:
    """Clear the halt and release the held URLs of the current level, on every shard in
    shard order (a crash in between left the last shards paused: resume again)."""
    paused = any(keys.PAUSED_AT in _state(redis, crawl).marks() for redis in conns)
    if state in stats.OVER or not paused:
        raise ControlError(f"crawl {crawl} is {state}, not paused")
    frontiers = [Frontier(redis, crawl, cfg) for redis in conns]
    for frontier in frontiers:
        frontier.resume()
    if len(frontiers) > 1:  # a level that ended while paused: raised now, not at a reap
        levels.coordinate(frontiers)


def cancel(conns: Sequence[Redis], crawl: str, state: str) -> Cancelled:
    """Stop the crawl for good: drop its held and in-flight URLs and delete the RQ jobs
    that no worker has started (a running job ends without recording anything).

    Each step is atomic on one shard only, so first every shard is halted (none releases
    anything more, as after `pause`), then each is cancelled in shard order. A crash in
    between leaves the crawl halted everywhere and cancelled on the first shards, never one
    shard releasing while another is stopped; cancel again completes it."""
    if state == "finished":
        raise ControlError(f"crawl {crawl} is finished: nothing to cancel")
    states = [_state(redis, crawl) for redis in conns]
    if all(keys.CANCELLED_AT in s.marks() for s in states):
        raise ControlError(f"crawl {crawl} is already cancelled")
    for s in states:
        s.pause()
    done = [_cancel_shard(redis, crawl) for redis in conns]
    return Cancelled(*(sum(column) for column in zip(*done, strict=True)))


def _cancel_shard(redis: Redis, crawl: str) -> tuple[int, int, int]:
    """Cancel the crawl on one shard: held URLs dropped, in-flight URLs dropped, RQ jobs
    deleted (all 0 if it was cancelled there already)."""
    out = _state(redis, crawl).cancel()
    if out is None:
        return 0, 0, 0
    held, dropped = out
    ids = [entry.job_id(crawl, url) for url, entry in dropped]
    with redis.pipeline(transaction=False) as pipe:
        for job_id in ids:
            pipe.hget(Job.key_for(job_id), "status")
        statuses = pipe.execute()
    pending = [i for i, s in zip(ids, statuses, strict=True) if s and s.decode() in _PENDING]
    return held, len(ids), _delete_jobs(redis, pending)


def start(
    redis: Redis, crawl: str, cfg: CrawlConfig, seeds: list[str], priority: int = 0
) -> tuple[CrawlConfig, int, bool]:
    """Store the config of a new crawl and admit its seeds, all or nothing: if seeding fails,
    what it wrote is deleted before the error goes on. An existing crawl keeps its own config.
    A crawl over several shards (cfg.shards) is stored in each, and each seed goes to its
    host's shard; `redis` is then not used unless it is one of them. Returns the config in
    force, how many seeds were new, and whether the crawl existed."""
    conns = _shards_of(redis, cfg)
    stored = configs.load(conns[0], crawl, fresh=True)
    if stored is None:
        cfg = _with_bloom_filter(cfg, conns)
    if stored is None and configs.save(conns[0], crawl, cfg):
        try:
            for conn in conns[1:]:
                configs.save(conn, crawl, cfg)
            admitted = _seed(conns, crawl, cfg, seeds, priority)
        except BaseException:
            for conn in conns:
                with contextlib.suppress(RedisError):  # the seeding's own error matters more
                    discard(conn, crawl)
            raise
    else:
        cfg = stored or configs.load(conns[0], crawl, fresh=True)  # or another client made it
        conns = _shards_of(conns[0], cfg)
        admitted = _seed(conns, crawl, cfg, seeds, priority)
    for conn in conns:
        Frontier(conn, crawl, cfg).register()  # last: a listed crawl is a whole one
    return cfg, admitted, stored is not None


def _with_bloom_filter(cfg: CrawlConfig, conns: list[Redis]) -> CrawlConfig:
    """`cfg` with its Bloom filter decided for good: native where every shard has BF.*
    (for `auto`), else the Lua one; `native` without them on a shard is a ConfigError."""
    if cfg.bloom_filter == "lua":
        return cfg
    lacking = [c for c in conns if not bloom.native_available(c)]
    if lacking and cfg.bloom_filter == "native":
        where = f"shard {conns.index(lacking[0])}" if len(conns) > 1 else "this Redis"
        raise config.ConfigError(
            f"setting 'bloom_filter' is native, but {where} has no BF.* commands "
            "(RedisBloom, or Redis 8): use auto or lua"
        )
    return replace(cfg, bloom_filter="lua" if lacking else "native")


def _shards_of(redis: Redis, cfg: CrawlConfig) -> list[Redis]:
    """The Redis servers of a crawl of settings `cfg`, in shard order."""
    return [shards.connect(url) for url in cfg.shards] or [redis]


def _seed(conns: list[Redis], crawl: str, cfg: CrawlConfig, seeds: list[str], priority: int) -> int:
    """Admit each seed on its host's shard (every shard is seeded, with none if need be:
    that starts its clock and records its index); returns how many were new."""
    placement = shard_map(cfg)
    if placement is None:
        return Frontier(conns[0], crawl, cfg).seed(seeds, priority)
    admitted = 0
    for index, conn in enumerate(conns):
        frontier = Frontier(conn, crawl, cfg)
        frontier.place(index)
        mine = [s for s in seeds if frontier.shard_of(s) == index]
        admitted += frontier.seed(mine, priority)
    return admitted


def purge(conns: Sequence[Redis], crawl: str, state: str, force: bool = False) -> Purged:
    """Delete every key of the crawl and its RQ jobs, on every shard. Refused while workers
    may still be working on it, unless `force`.

    Every shard is marked first (keys.PURGING_AT), then each is deleted in shard order. A
    crash in between leaves the last shards with the crawl, marked: `purging` tells, and
    `discard_all` from any of them completes it, whatever the crawl's state."""
    if state == BROKEN and not force:
        raise ControlError(
            f"crawl {crawl} has missing or unreadable settings: purge it with --force"
        )
    if state not in stats.OVER and not force:
        raise ControlError(f"crawl {crawl} is {state}: cancel it first, or purge with --force")
    for redis in conns:
        _state(redis, crawl).mark_purging()
    return discard_all(conns, crawl)


def purging(conns: Sequence[Redis], crawl: str) -> bool:
    """Whether a purge of the crawl began and was interrupted (some shard is marked)."""
    return any(keys.PURGING_AT in _state(redis, crawl).marks() for redis in conns)


def discard_all(conns: Sequence[Redis], crawl: str) -> Purged:
    """`discard` on every shard, in shard order; the totals."""
    done = [astuple(discard(redis, crawl)) for redis in conns]
    return Purged(*(sum(column) for column in zip(*done, strict=True)))


def discard(redis: Redis, crawl: str) -> Purged:
    """Delete every key of the crawl and its RQ jobs, whatever its state."""
    jobs = _delete_jobs(redis, _crawl_jobs(redis, crawl))
    _delete_first_seen(redis, crawl)
    rows = _delete_tasks(redis, crawl)
    return Purged(_state(redis, crawl).delete(), jobs, rows)


def _delete_tasks(redis: Redis, crawl: str) -> int:
    """Delete the crawl's rows of its task table, found through its settings (so before
    they go); a crawl whose settings are unreadable has none that can be found."""
    try:
        cfg = configs.load(redis, crawl, fresh=True)
    except config.ConfigError:
        return 0
    if not (cfg and cfg.db):
        return 0
    from rqcrawl.frontier.tasks import TaskTable  # SQLAlchemy only for crawls with a table

    try:
        return TaskTable(cfg.db).delete(crawl)
    except TableUnavailable as exc:  # the crawl goes from Redis all the same
        log.warning("crawl %s: its task rows were not deleted: %s", crawl, exc)
        return 0


def job_crawl(job_id: str) -> str | None:
    """The crawl a job id of rqcrawl belongs to, or None for any other id."""
    match = _JOB_ID.fullmatch(job_id)
    return match["crawl"] if match else None


def _crawl_jobs(redis: Redis, crawl: str) -> list[str]:
    """The ids of the RQ jobs of `crawl`. They start with `rqcrawl-{crawl}-`, which another
    crawl's name may extend (`a` and `a-b`), so the parse of the whole id decides."""
    prefix = "rq:job:"
    ids = (
        name.decode(errors="replace").removeprefix(prefix)
        for name in redis.scan_iter(match=glob_escape(f"{prefix}rqcrawl-{crawl}-") + "*")
    )
    return [i for i in ids if job_crawl(i) == crawl]


def _delete_first_seen(redis: Redis, crawl: str) -> None:
    """RQ's marks of the crawl's jobs that its maintenance found in a queue's intermediate
    list (`rq:queue:Q:intermediate:first_seen:ID`, a day's TTL): they outlive their jobs."""
    marks = redis.scan_iter(
        match=f"rq:queue:*:intermediate:first_seen:{glob_escape(f'rqcrawl-{crawl}-')}*"
    )
    mine = [k for k in marks if job_crawl(k.decode(errors="replace").rpartition(":")[2]) == crawl]
    if mine:
        redis.delete(*mine)


def _delete_jobs(redis: Redis, job_ids: list[str]) -> int:
    """Delete jobs with their queue and registry entries, in one pipeline, without loading
    them: RQ's own `Job.delete` on a bare job that knows only its id and its queue."""
    with redis.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hget(Job.key_for(job_id), "origin")
        origins = pipe.execute()
    with redis.pipeline() as pipe:
        for job_id, origin in zip(job_ids, origins, strict=True):
            job = Job(job_id, connection=redis)
            job.origin = origin.decode(errors="replace") if origin else keys.QUEUE_NAME
            try:
                job.delete(pipeline=pipe)
            except (InvalidJobOperation, ValueError):  # no status, or not one of RQ's
                Queue(job.origin, connection=redis).remove(job_id, pipeline=pipe)
                pipe.delete(job.key, job.dependents_key, job.dependencies_key)
        pipe.execute()
    return len(job_ids)


def _state(redis: Redis, crawl: str) -> Frontier:
    """The crawl's state, for changes that need none of its settings."""
    return Frontier(redis, crawl, CrawlConfig())
