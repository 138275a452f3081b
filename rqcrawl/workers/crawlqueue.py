"""CrawlQueue: RQ's Queue, whose dequeue takes a job and its hash in one round trip."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from redis import Redis
from rq.intermediate_queue import IntermediateQueue
from rq.job import Job
from rq.queue import Queue
from rq.utils import as_text, backend_class, get_version

from rqcrawl.frontier import scripts
from rqcrawl.frontier.dispatch import handed

_waiting = threading.local()  # what this thread's worker does before its dequeue blocks


def before_waiting(hook: Callable[[], None]) -> None:
    """Run `hook` before each dequeue of this thread that would block (no job waiting): a
    worker then tells Redis it is idle (CrawlWorker.set_state)."""
    _waiting.hook = hook


class CrawlQueue(Queue):
    """RQ's Queue, but a worker's dequeue of one queue that has a job waiting takes the job
    id and reads its hash in one round trip (scripts.DEQUEUE) instead of two (LMOVE, then
    HGETALL); an empty queue is left to RQ's blocking dequeue, before which the thread's
    worker may act (before_waiting)."""

    @classmethod
    def dequeue_any(
        cls,
        queues: Iterable[Queue],
        timeout: int | None,
        connection: Redis,
        job_class: type[Job] | None = None,
        serializer: object = None,
        death_penalty_class: type | None = None,
    ) -> tuple[Job, Queue] | None:
        queues, serializer = list(queues), handed(serializer)
        if len(queues) == 1 and get_version(connection) >= (6, 2, 0):
            job_cls = backend_class(cls, "job_class", override=job_class)
            queue_key = queues[0].key
            intermediate = IntermediateQueue(queue_key, connection).key
            prefix = job_cls.redis_job_namespace_prefix
            while found := scripts.DEQUEUE(
                connection, queue=queue_key, intermediate=intermediate, prefix=prefix
            ):
                if len(found) == 1:  # its hash is gone: RQ passes over it too
                    continue
                queue = cls.from_queue_key(
                    queue_key, connection=connection, job_class=job_cls,
                    serializer=serializer, death_penalty_class=death_penalty_class,
                )  # fmt: skip
                job = job_cls(as_text(found[0]), connection=connection, serializer=serializer)
                try:
                    job.restore(dict(zip(found[1::2], found[2::2], strict=True)))
                except Exception as exc:  # as RQ's dequeue reports it
                    exc.job_id, exc.queue = job.id, queue
                    raise
                return job, queue
        if hook := getattr(_waiting, "hook", None):
            hook()
        return super().dequeue_any(
            queues, timeout, connection, job_class, serializer, death_penalty_class
        )
