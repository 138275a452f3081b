"""CrawlJob: RQ's Job, whose success is written in one round trip."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime
from functools import cached_property

from redis.client import Pipeline
from rq.job import Job, JobStatus
from rq.registry import FinishedJobRegistry, StartedJobRegistry
from rq.utils import utcformat

from rqcrawl.frontier.dispatch import (
    JOB_FUNC,
    RENDER_FUNC,
    REQUISITE_FUNC,
    SITEMAP_FUNC,
    handed,
)

# the jobs of the crawl queue, and those that claim a URL (jobs._job)
CRAWL_QUEUE_FUNCS = (JOB_FUNC, SITEMAP_FUNC, REQUISITE_FUNC)
CLAIMING = (*CRAWL_QUEUE_FUNCS, RENDER_FUNC)


class CrawlJob(Job):
    """An RQ job whose success is written in one HSET of what the job's end changed: its
    status, `ended_at` and `meta` (the page's outcome, see jobs._describe). RQ's own writes
    the status on its own, then every field but `meta` again (the arguments compressed anew),
    and `job.save_meta()` would cost a round trip per page. A crawl
    job's expiry (or deletion) leaves out the keys of dependencies and dependents, which it
    never has, and its start writes its heartbeat once (see heartbeat)."""

    saves_meta = True
    _succeeding = False  # inside the worker's handle_job_success (succeeding)
    claimed: list | None = None  # the claim's reply, sent with the job's start (jobs.claim)

    @contextlib.contextmanager
    def succeeding(self) -> Iterator[None]:
        """While the worker records the job's success: the status is written by the save
        that follows, with `meta`."""
        self._succeeding = True
        try:
            yield
        finally:
            self._succeeding = False

    @cached_property
    def started_job_registry(self) -> StartedJobRegistry:
        """RQ's, made once a job (its start and its end each ask), the serializer `handed`."""
        return StartedJobRegistry(
            self.origin, self.connection, job_class=type(self), serializer=handed(self.serializer)
        )

    @cached_property
    def finished_job_registry(self) -> FinishedJobRegistry:
        """RQ's, the serializer `handed`."""
        return FinishedJobRegistry(
            self.origin, self.connection, job_class=type(self), serializer=handed(self.serializer)
        )

    def heartbeat(
        self, timestamp: datetime, ttl: int, pipeline: Pipeline | None = None, xx: bool = False
    ) -> None:
        """RQ's; but the one queued in the pipeline that prepares the job's execution is only
        noted: prepare_for_execution writes the same field next, in the same pipeline."""
        if pipeline is not None and not xx:
            self.last_heartbeat = timestamp
            return
        super().heartbeat(timestamp, ttl, pipeline=pipeline, xx=xx)

    def set_status(self, status: JobStatus, pipeline: Pipeline | None = None) -> None:
        if self._succeeding:  # the save that follows writes it
            self._status = status
            return
        super().set_status(status, pipeline=pipeline)

    def save(
        self,
        pipeline: Pipeline | None = None,
        include_meta: bool = True,
        include_result: bool = True,
    ) -> None:
        """RQ's; but a success writes only what the job's end changed: its enqueue wrote
        the other fields, its start (prepare_for_execution) the start's."""
        if not self._succeeding:
            super().save(pipeline, include_meta, include_result)
            return
        conn = pipeline if pipeline is not None else self.connection
        ended = {
            "status": self._status,
            "ended_at": utcformat(self.ended_at) if self.ended_at else "",
            "meta": self._serialize_meta(),  # (RQ's: a meta it could not read goes back as read)
        }
        conn.hset(self.key, mapping=ended)

    def cleanup(
        self,
        ttl: int | None = None,
        pipeline: Pipeline | None = None,
        remove_from_queue: bool = True,
    ) -> None:
        if ttl is not None and ttl >= 0 and self.func_name in CRAWL_QUEUE_FUNCS:
            conn = pipeline if pipeline is not None else self.connection
            if ttl:
                conn.expire(self.key, ttl)
            else:  # a job that passed its URL on (settle.Passed): it had no result saved
                conn.delete(self.key)
            return
        super().cleanup(ttl, pipeline, remove_from_queue)
