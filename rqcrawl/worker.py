"""The recommended worker: `rq worker crawl -w rqcrawl.worker.CrawlWorker --with-scheduler`.

It is RQ's SimpleWorker (no fork per job, so the HTTP keep-alive sessions, the crawl configs and
the robots.txt verdicts stay warm across jobs) plus one background thread that tends every
crawl of the Redis: it releases deferred URLs the moment they are due (RQ's scheduler only has
whole seconds) and runs the recovery pass even when no job ends, so URLs of a killed worker
come back although nobody runs `rqcrawl status`. A stock `rq worker crawl --with-scheduler`
stays correct without it, only coarser: deferred URLs then wait for a job start or a
wake-up job, up to a second late.

It also trims RQ's per-job bookkeeping, which at crawl speed costs more Redis round trips than
the crawl itself (27 of 33 per page): a heartbeat that would only repeat one sent seconds
ago with the same time-to-live is skipped and the others go in one round trip instead of
three, the worker's state is written only when it changes, the `rq suspend` flag is read
once a second rather than before every job, and a job without callbacks gets no heartbeat
for them. What RQ stores is otherwise unchanged.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

from redis import Redis, RedisError
from redis.client import Pipeline
from rq.job import Job
from rq.queue import Queue
from rq.utils import now
from rq.worker import SimpleWorker, WorkerStatus

from . import keys
from .jobs import crawl_of
from .metrics import serve_from_env as serve_metrics

MAX_SLEEP = 0.1  # seconds between two looks at the running crawls when nothing is due sooner
REFRESH_CRAWLS = 5.0  # seconds between two reads of the set of crawls (and recovery passes)
HEARTBEAT_EVERY = 5.0  # seconds a full-TTL heartbeat (minutes of TTL) stands for the next ones
SUSPENSION_EVERY = 1.0  # seconds between two reads of RQ's suspend flag

log = logging.getLogger(__name__)


def worker_name(suffix: str = "") -> str:
    """`host:pid` (and a thread's suffix): rq-dashboard and `rq info` then say where a worker
    runs, instead of RQ's random hex."""
    return f"{socket.gethostname()}:{os.getpid()}{suffix}"


class CrawlJob(Job):
    """An RQ job whose success also saves its `meta` (the page's outcome, see
    jobs._describe) in the worker's success pipeline: RQ's own leaves `meta` out, and
    `job.save_meta()` would cost a round trip per page."""

    saves_meta = True

    def _handle_success(self, result_ttl: int, pipeline: Pipeline, **kwargs) -> None:
        super()._handle_success(result_ttl, pipeline, **kwargs)
        if self.meta:
            pipeline.hset(self.key, "meta", self._serialize_meta())


class CrawlWorker(SimpleWorker):
    """SimpleWorker plus the release-and-recovery thread (see the module docstring)."""

    # One tender per process, however many workers run in its threads (rqcrawl.threadworkers).
    _tending = threading.Lock()
    _full_beat_at: float | None = None  # when the last heartbeat with the worker's full TTL went
    _suspension_checked_at = 0.0

    def __init__(self, *args, **kwargs) -> None:
        kwargs["name"] = kwargs.get("name") or worker_name()
        super().__init__(*args, **kwargs)
        if self.job_class is Job:  # RQ's default: a custom --job-class is left alone
            self.job_class = CrawlJob

    def heartbeat(self, timeout: int | None = None, pipeline: Pipeline | None = None) -> None:
        """RQ's heartbeat, skipped when a full-TTL one went less than HEARTBEAT_EVERY ago and
        no shorter TTL was set since (the worker's key then has minutes left), else sent in
        one round trip."""
        if pipeline is not None:
            super().heartbeat(timeout, pipeline=pipeline)
        else:
            recent = self._full_beat_at is not None and (
                time.monotonic() - self._full_beat_at < HEARTBEAT_EVERY
            )
            if timeout is None and recent:
                return
            with self.connection.pipeline(transaction=False) as pipe:
                super().heartbeat(timeout, pipeline=pipe)
                pipe.execute()
        self._full_beat_at = time.monotonic() if timeout is None else None

    def execute_job(self, job: Job, queue: Queue) -> None:
        """SimpleWorker's, with the `idle` state and the heartbeat after the job sent in one
        round trip (the work loop's own heartbeat then finds it recent)."""
        self.perform_job(job, queue, self.prepare_execution(job))
        with self.connection.pipeline(transaction=False) as pipe:
            self.set_state(WorkerStatus.IDLE, pipeline=pipe)
            self.heartbeat(pipeline=pipe)
            pipe.execute()

    def handle_execution_ended(self, job: Job, queue: Queue, heartbeat_ttl: int) -> None:
        """RQ extends the job's heartbeat here to cover its success or failure callback;
        crawl jobs have none, so that round trip is skipped for them."""
        if job.success_callback or job.failure_callback:
            super().handle_execution_ended(job, queue, heartbeat_ttl)
        else:
            job.ended_at = now()

    def set_state(self, state: str, pipeline: Pipeline | None = None) -> None:
        """RQ writes the state before every dequeue and after every job, the same `idle`."""
        if pipeline is None and state == self.get_state():
            return
        super().set_state(state, pipeline=pipeline)

    def check_for_suspension(self, burst: bool) -> None:
        """`rq suspend` takes effect within SUSPENSION_EVERY instead of at the next job."""
        if time.monotonic() - self._suspension_checked_at < SUSPENSION_EVERY:
            return
        self._suspension_checked_at = time.monotonic()
        super().check_for_suspension(burst)

    def work(self, *args, **kwargs) -> bool:
        if not self._tending.acquire(blocking=False):
            return super().work(*args, **kwargs)
        try:
            return self._work_tended(*args, **kwargs)
        finally:
            self._tending.release()

    def _work_tended(self, *args, **kwargs) -> bool:
        serve_metrics(Redis(connection_pool=self.connection.connection_pool))
        stop = threading.Event()
        tender = Tender(Redis(connection_pool=self.connection.connection_pool))
        thread = threading.Thread(target=tender.run, args=(stop,), name="rqcrawl-tender")
        thread.daemon = True
        thread.start()
        try:
            return super().work(*args, **kwargs)
        finally:
            stop.set()
            thread.join(5)


class Tender:
    """Releases due deferred URLs of every running crawl and runs their recovery passes."""

    def __init__(self, redis: Redis):
        self.redis = redis
        self.crawls: list[str] = []
        self.refreshed = 0.0

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                wait = self.tick()
            except RedisError as exc:
                log.warning("rqcrawl tender: %s", exc)
                wait = 1.0
            stop.wait(wait)

    def tick(self) -> float:
        """One pass over the crawls; returns how long to sleep before the next one."""
        now = time.time()
        refresh = now - self.refreshed >= REFRESH_CRAWLS
        if refresh:
            self.crawls = self.running()
            self.refreshed = now
        wait = MAX_SLEEP
        for name in self.crawls:
            c = crawl_of(self.redis, name)
            if c is None:
                continue
            nxt = c.frontier.next_due()
            if nxt is not None and nxt <= time.time():
                c.frontier.release_due()
                nxt = c.frontier.next_due()
            if nxt is not None:
                wait = min(wait, max(0.005, nxt - time.time()))
            if refresh:
                c.frontier.maybe_reap()
        return wait

    def running(self) -> list[str]:
        """The crawls with URLs in flight: finished ones cost nothing per tick."""
        names = sorted(m.decode() for m in self.redis.smembers(keys.CRAWLS))
        with self.redis.pipeline(transaction=False) as pipe:
            for name in names:
                pipe.hlen(keys.key(name, "inflight"))
            return [n for n, size in zip(names, pipe.execute(), strict=True) if size]
