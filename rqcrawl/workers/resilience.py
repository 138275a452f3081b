"""How the recommended worker rides out a Redis that is gone (a crash, a restart, a failover):
its loop's steps wait for Redis, its commands retry until it stops, and a stop without Redis
ends it at once."""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Callable, Sequence

from redis.retry import Retry

from rqcrawl.redisurl import REDIS_DOWN


def riding_out_redis(step: Callable) -> Callable:
    """A step of the worker's loop that, when Redis is unreachable, waits for it to come back
    and goes on (the step skipped) instead of letting RQ's work loop end the worker."""

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):  # self: a CrawlWorker
        try:
            return step(self, *args, **kwargs)
        except REDIS_DOWN as exc:
            self.await_redis(exc)

    return wrapper


class RetryUntilStopped(Retry):
    """redis-py's Retry, except that once `stopping` is set a failed command is not tried
    again: a worker asked to stop while Redis is gone then ends within seconds instead of
    retrying each of its last writes for REDIS_RETRY_FOR. Every connection of the pool gets
    a deep copy of its policy; the copies share the one `stopping`."""

    def __init__(self, backoff, retries: int, stopping: threading.Event):
        super().__init__(backoff, retries)
        self.stopping = stopping

    def __deepcopy__(self, memo: dict) -> RetryUntilStopped:
        clone = copy.copy(self)
        clone._backoff = copy.deepcopy(self._backoff, memo)
        return clone

    def call_with_retry(self, do, fail, is_retryable=None, **options):
        """(`options`: redis-py 8's `with_failure_count`, passed on only when given: redis-py 7
        has no such parameter.)"""

        def retryable(error: Exception) -> bool:
            return not self.stopping.is_set() and (is_retryable is None or is_retryable(error))

        return super().call_with_retry(do, fail, retryable, **options)


class StopWithoutRedis(SystemExit):
    """Raised into the job of a worker asked to stop while Redis is gone: the job could not
    record its end anyway; its URL comes back through its lease (a SystemExit, so that no
    `except Exception` of the job's code takes it for a failed page)."""


def raise_first_error(replies: Sequence[object]) -> None:
    """Raise the first error among a pipeline's `replies`, as redis-py would: the worker's
    pipelines that carry rqcrawl's own scripts run with raise_on_error=False, so that their
    replies are looked at first (a script the server forgot is not RQ's error)."""
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
