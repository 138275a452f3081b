"""CrawlQueue: RQ's Queue, whose dequeue takes a job and its hash in one round trip, or in
none: with the round trip of the worker's last success (ask_ahead)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from redis import Redis
from redis.client import Pipeline
from rq.intermediate_queue import IntermediateQueue
from rq.job import Job
from rq.queue import Queue
from rq.utils import as_text, backend_class, get_version

from rqcrawl.frontier import scripts
from rqcrawl.frontier.dispatch import handed

_waiting = threading.local()  # what this thread's worker does before its dequeue blocks
_ahead = threading.local()  # this thread's worker's next job, dequeued ahead (ask_ahead)


def before_waiting(hook: Callable[[], None]) -> None:
    """Run `hook` before each dequeue of this thread that would block (no job waiting): a
    worker then tells Redis it is idle (CrawlWorker.set_state)."""
    _waiting.hook = hook


def ask_ahead(pipe: Pipeline, queue: Queue, job_class: type[Job]) -> None:
    """Queue in `pipe`, last, the dequeue of this thread's worker's next job from `queue`
    (the one queue it serves): sent with the success of the job it ends, it spares the
    next dequeue its round trip. Its reply is the pipeline's last; `hold` keeps it."""
    prefix = job_class.redis_job_namespace_prefix
    scripts.DEQUEUE.queue(
        pipe, queue=queue.key, intermediate=queue.intermediate_queue_key, prefix=prefix
    )


def hold(queue: Queue, found: list | None) -> None:
    """Keep the reply of ask_ahead's dequeue for this thread's next dequeue of `queue`."""
    _ahead.held = (queue.key, found) if found else None


def put_back(redis: Redis) -> None:
    """A job this thread's worker dequeued ahead and will not run (it stops, or `rq
    suspend` holds it) goes back to the head of its queue; one whose hash is gone leaves
    RQ's intermediate list, as RQ's dequeue passes over it."""
    held, _ahead.held = getattr(_ahead, "held", None), None
    if held is None:
        return
    queue_key, found = held
    job_id = found[0]
    with redis.pipeline() as pipe:  # (MULTI: in one list or the other, never both)
        pipe.lrem(IntermediateQueue(queue_key, redis).key, 1, job_id)
        if len(found) > 1:
            pipe.lpush(queue_key, job_id)
        pipe.execute()


def _held(queue_key: str) -> list | None:
    """The job dequeued ahead from `queue_key`, taken (None: none)."""
    held = getattr(_ahead, "held", None)
    if held is None or held[0] != queue_key:
        return None  # (another queue's stays held, for put_back)
    _ahead.held = None
    return held[1]


class CrawlQueue(Queue):
    """RQ's Queue, but a worker's dequeue of one queue that has a job waiting takes the job
    id and reads its hash in one round trip (scripts.DEQUEUE) instead of two (LMOVE, then
    HGETALL), or takes the one its worker dequeued ahead (ask_ahead); an empty queue is
    left to RQ's blocking dequeue, before which the thread's worker may act
    (before_waiting)."""

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
            while found := _held(queue_key) or scripts.DEQUEUE(
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
