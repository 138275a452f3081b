"""Frontier writes that ride on the worker's next round trip.

A page's job ends with its finish step, which releases the URLs its links let through; their
RQ jobs (rqcrawl.frontier.dispatch.Frontier._enqueue) were then written in a round trip of
their own, and the worker wrote the job's success in the next one. Inside `carried` (the
recommended worker, around each job) those writes wait instead, and the worker queues them
at the head of its success pipeline (`take`): one round trip a page fewer. Writes nobody
took (the job failed, or the worker has no success pipeline for it) are sent when `carried`
ends. A worker that dies in between loses the RQ jobs, not the URLs: a released URL with no
live job is requeued by the recovery pass, as when its own round trip never arrived.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field

from redis import Redis
from redis.client import Pipeline

from rqcrawl.redisurl import server_key

Write = Callable[[Pipeline], None]  # queues its commands on a pipeline


@dataclass
class _Rides:
    server: Hashable  # the server of the worker's connection (redisurl.server_key)
    writes: list[Write] = field(default_factory=list)


_local = threading.local()  # this thread's _Rides while its worker runs a job


@contextlib.contextmanager
def carried(redis: Redis) -> Iterator[None]:
    """While this thread's worker runs a job on `redis`: the last writes of the job to that
    server wait for the worker's success pipeline (`take`); any left are sent on leaving,
    in one round trip."""
    rides = _local.rides = _Rides(server_key(redis))
    try:
        yield
    finally:
        _local.rides = None
        _send(redis, rides.writes)


def send(redis: Redis, write: Write, last: bool = False) -> None:
    """Send `write` to `redis` now, in one round trip; or, if it is the job's `last` write
    (nothing of the job reads what it writes) and this thread is inside `carried` on that
    server, with the worker's next round trip."""
    rides: _Rides | None = getattr(_local, "rides", None)
    if last and rides is not None and rides.server == server_key(redis):
        rides.writes.append(write)
        return
    _send(redis, [write])


def take(pipe: Pipeline) -> None:
    """Queue the writes waiting on this thread in `pipe`, whose execution sends them."""
    rides: _Rides | None = getattr(_local, "rides", None)
    if rides is None:
        return
    for write in rides.writes:
        write(pipe)
    rides.writes = []


def _send(redis: Redis, writes: list[Write]) -> None:
    if not writes:
        return
    with redis.pipeline(transaction=False) as pipe:
        for write in writes:
            write(pipe)
        pipe.execute()
