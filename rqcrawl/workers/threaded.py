"""What an RQ worker needs to stop between two dequeues and to run in a thread: the slots of
a CrawlWorker process, and rqcrawl.workers.threadworkers."""

from __future__ import annotations

import os
from collections.abc import Collection

from redis import Redis, RedisError
from redis.sentinel import SentinelConnectionPool
from rq.exceptions import StopRequested
from rq.timeouts import TimerDeathPenalty

from rqcrawl.config import ConfigError
from rqcrawl.defaults import DEFAULT_SLOTS, MAX_SLOTS, PING_TIMEOUT, STOP_CHECK_S
from rqcrawl.redisurl import REDIS_DOWN
from rqcrawl.workers import SLOTS_ENV


class StopBetweenDequeues:
    """An idle worker blocks on the queue at most STOP_CHECK_S at a time and honours a stop
    request between two dequeues, never in the middle of one (see CrawlWorker.request_stop)."""

    _stop_requested: bool  # RQ's; read and set here only (stop_asked, ask_to_stop)
    connection: Redis
    name: str

    def ask_to_stop(self) -> None:
        """A warm stop from outside the worker's thread (rqcrawl.workers.threadworkers)."""
        self._stop_requested = True

    def stop_asked(self) -> bool:
        """Whether a warm stop was asked: RQ's own flag, which its work loop honours."""
        return self._stop_requested

    def _probe(self, *command: str) -> object:
        """`command`'s reply on a connection of its own, which waits PING_TIMEOUT at most
        (the pool's may be in use by the interrupted job, or blocked on a dequeue)."""
        pool = self.connection.connection_pool
        kwargs = {"socket_timeout": PING_TIMEOUT, "socket_connect_timeout": PING_TIMEOUT}
        probe = pool.connection_class(**{**pool.connection_kwargs, **kwargs})
        try:
            probe.send_command(*command)
            return probe.read_response()
        finally:
            probe.disconnect()

    def redis_answers(self) -> bool:
        """Whether Redis answers a PING within PING_TIMEOUT."""
        try:
            self._probe("PING")
            return True
        except (*REDIS_DOWN, OSError):
            return False

    def end_blocked_dequeues(self, names: Collection[str]) -> set[str]:
        """Which workers of `names` had their blocking dequeue ended now, by CLIENT UNBLOCK
        (Redis 5 and later): such a dequeue returns as if it timed out, so no job moved, and
        a stop need not wait for it (up to STOP_CHECK_S). A worker's connections carry its
        name (CrawlWorker._tune_pool). None of a worker between two dequeues, or whose
        job just came, or when Redis cannot tell."""
        ended: set[str] = set()
        try:
            listing = self._probe("CLIENT", "LIST", "TYPE", "normal")
            if isinstance(listing, bytes):
                listing = listing.decode()
            for line in listing.splitlines():
                client = dict(pair.partition("=")[::2] for pair in line.split(" "))
                name = client.get("name")
                if name in names and "b" in client.get("flags", ""):
                    if self._probe("CLIENT", "UNBLOCK", client["id"]) == 1:
                        ended.add(name)
        except (RedisError, OSError):  # gone, or a Redis before 5 (no TYPE, no UNBLOCK)
            pass
        return ended

    @property
    def should_run_maintenance_tasks(self) -> bool:
        """RQ asks this at the top of each turn of its idle loop, before the dequeue: where a
        stop can end the loop with no job taken. A dequeue ended by CLIENT UNBLOCK would
        otherwise block again for the rest of its idle time (RQ's loop goes on)."""
        if self.stop_asked():
            raise StopRequested()
        return super().should_run_maintenance_tasks

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        if timeout is None:  # burst mode: one non-blocking look
            return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        while not self.stop_asked():
            block = STOP_CHECK_S if self.get_redis_server_version() >= (6,) else 1
            result = super().dequeue_job_and_maintain_ttl(block, block)
            if result is not None:
                return result
        raise StopRequested()


class ThreadedMixin(StopBetweenDequeues):
    """What an RQ worker class needs to run outside the main thread (an idle thread notices
    a stop request within STOP_CHECK_S, see StopBetweenDequeues): one of the slots of a
    CrawlWorker, or of rqcrawl.workers.threadworkers."""

    death_penalty_class = TimerDeathPenalty  # SIGALRM would only reach the main thread
    threaded = True

    def _install_signal_handlers(self) -> None:
        """Signals are the main thread's: it asks every thread to stop."""


def threaded_class(worker_class: type) -> type:
    return type(f"Threaded{worker_class.__name__}", (ThreadedMixin, worker_class), {})


def slots_from_env() -> int:
    """The requests in flight of a worker process: $RQCRAWL_SLOTS, or DEFAULT_SLOTS."""
    raw = os.environ.get(SLOTS_ENV, "").strip()
    if not raw:
        return DEFAULT_SLOTS
    if not (raw.isdigit() and 1 <= int(raw) <= MAX_SLOTS):
        raise ConfigError(f"{SLOTS_ENV} must be a whole number from 1 to {MAX_SLOTS}, not {raw!r}")
    return int(raw)


def own_connection(connection: Redis) -> Redis:
    """A client of the same server as `connection` with a connection pool of its own: a
    worker's blocking dequeue holds a connection, and its connections carry its name."""
    pool = connection.connection_pool
    dropped = ("connection_pool", "client_name", "retry", "maint_notifications_pool_handler")
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if k not in dropped}
    if isinstance(pool, SentinelConnectionPool):
        fresh = SentinelConnectionPool(
            pool.service_name, pool.sentinel_manager, is_master=pool.is_master,
            check_connection=pool.check_connection, connection_class=pool.connection_class,
            **kwargs,
        )  # fmt: skip
    else:
        fresh = type(pool)(
            connection_class=pool.connection_class, max_connections=pool.max_connections, **kwargs
        )
    return type(connection)(connection_pool=fresh)
