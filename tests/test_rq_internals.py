"""What CrawlWorker (rqcrawl.workers.worker, with its crawljob, crawlqueue and threaded) relies
on in RQ beyond its public surface, each checked so that a new RQ release that changes it fails
here, naming the override to re-read: the RQ methods whose steps it restates (by their source),
RQ's answer to a stop request, the private attributes it reads or sets, and the Redis layout
of a dequeue."""

from __future__ import annotations

import hashlib
import inspect
import re
import signal
from functools import cached_property
from pathlib import Path

import pytest
from rq import Queue
from rq.exceptions import StopRequested
from rq.job import Job, JobStatus
from rq.scheduler import RQScheduler
from rq.worker import BaseWorker, SimpleWorker, WorkerStatus

from rqcrawl.workers.crawljob import CrawlJob
from rqcrawl.workers.crawlqueue import CrawlQueue
from rqcrawl.workers.threaded import StopBetweenDequeues, ThreadedMixin
from rqcrawl.workers.worker import CrawlWorker

# RQ's method -> the SHA-256 (first 16 hex digits) of its source in each RQ release checked,
# and what of rqcrawl's restates it or depends on its exact steps.
RESTATED = {
    BaseWorker.work: ({"04b5cdf8e554d8a2"}, "StopBetweenDequeues: the loop's order of steps"),
    BaseWorker.request_stop: ({"f934e7e7e6eecfee"}, "CrawlWorker.request_stop"),
    BaseWorker._shutdown: ({"828be105b616d1d6"}, "CrawlWorker.request_stop (StopRequested)"),
    BaseWorker.prepare_execution: ({"899b4eaa689fcf35"}, "CrawlWorker.prepare_execution"),
    BaseWorker.prepare_job_execution: ({"d08dd32962e3f82a"}, "prepare_job_execution"),
    BaseWorker.handle_job_success: ({"9dda7c7d3ca18ee6"}, "CrawlWorker._handle_crawl_success"),
    BaseWorker.handle_execution_ended: ({"23748b027980a6cd"}, "handle_execution_ended"),
    BaseWorker.stop_scheduler: ({"b90d9019bcaf7b95"}, "CrawlWorker.stop_scheduler"),
    BaseWorker._install_signal_handlers: ({"f30e3c58661a235a"}, "ThreadedMixin"),
    SimpleWorker.execute_job: ({"eae0f23110aeb280"}, "CrawlWorker.execute_job"),
    Job._handle_success: (
        {"35b96f8229b6053d"},
        "CrawlJob.succeeding, set_status and save; CrawlWorker._handle_crawl_success",
    ),
    Queue.dequeue_any: ({"2452e56ad5197396"}, "CrawlQueue.dequeue_any"),
    Queue.lmove: ({"7aa797ad300b8aec"}, "CrawlQueue.dequeue_any (scripts.DEQUEUE)"),
}


def source_hash(function) -> str:
    return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()[:16]


@pytest.mark.parametrize("function", RESTATED, ids=lambda f: f.__qualname__)
def test_rq_methods_rqcrawl_restates_are_unchanged(function):
    hashes, ours = RESTATED[function]
    assert source_hash(function) in hashes, (
        f"RQ's {function.__qualname__} changed: re-read {ours} against it, then add the new "
        f"hash ({source_hash(function)}) here"
    )


def test_rq_has_the_private_attributes_rqcrawl_uses(conn):
    """`_stop_requested` (read and set: StopBetweenDequeues), a job's `_status` (set after a
    crawl job's success) and `_serialize_meta` (its meta as a success writes it), the
    scheduler's `_process` (stop_scheduler) and the worker's
    connection pool's `connection_kwargs` (CrawlWorker._tune_pool)."""
    worker = SimpleWorker([Queue("q", connection=conn)], connection=conn)
    assert worker._stop_requested is False
    assert worker.connection.connection_pool.connection_kwargs["socket_timeout"] >= (
        worker.connection_timeout
    )
    job = Job.create(len, args=("a",), connection=conn)
    job._status = JobStatus.FINISHED
    assert job.get_status(refresh=False) == JobStatus.FINISHED
    job.meta["outcome"] = "fetched"  # (CrawlJob.save writes a success's meta with it)
    assert job.serializer.loads(job._serialize_meta()) == {"outcome": "fetched"}
    assert RQScheduler([], connection=conn)._process is None


@pytest.fixture
def main_thread_signals():
    """RQ's request_stop installs its cold-stop handlers: put the test run's back."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    for number, handler in saved.items():
        signal.signal(number, handler)


def test_rq_stops_an_idle_worker_by_raising_after_its_cold_stop_handlers(conn, main_thread_signals):
    """CrawlWorker.request_stop catches this StopRequested to stop an idle worker only
    between two dequeues, and lets RQ's cold-stop handlers (a second signal) stand."""
    worker = SimpleWorker([Queue("q", connection=conn)], connection=conn)
    worker.set_state(WorkerStatus.IDLE)
    with pytest.raises(StopRequested):
        worker.request_stop(signal.SIGTERM, None)
    assert signal.getsignal(signal.SIGTERM) == worker.request_force_stop
    crawl_worker = CrawlWorker([Queue("q", connection=conn)], connection=conn)
    crawl_worker.set_state(WorkerStatus.IDLE)
    crawl_worker.request_stop(signal.SIGTERM, None)  # noted, not raised: Redis answers
    assert crawl_worker._stop_requested
    assert signal.getsignal(signal.SIGTERM) == crawl_worker.request_force_stop


def test_crawl_queue_dequeues_as_rqs_dequeue_does(conn):
    """scripts.DEQUEUE moves the job id as RQ's LMOVE does (its intermediate list, at its
    tail) and reads the hash of RQ's job key: the same jobs, and the same keys after."""
    states = []
    for queue_class, job_class in ((Queue, Job), (CrawlQueue, CrawlJob)):
        conn.flushdb()
        queue = queue_class("same", connection=conn)
        first = queue.enqueue(len, "a", job_id="first")
        queue.enqueue(len, "bc", job_id="second")
        job, _ = queue_class.dequeue_any([queue], None, conn, job_class)
        assert (job.id, job.args) == (first.id, ("a",))
        job, _ = queue_class.dequeue_any([queue], None, conn, job_class)
        assert (job.id, job.args, job.get_status()) == ("second", ("bc",), "queued")
        states.append(layout(conn))
    assert states[0] == states[1]


def layout(conn) -> dict:
    """Every key's type, with every list's items."""
    return {
        key: conn.lrange(key, 0, -1) if conn.type(key) == b"list" else conn.type(key)
        for key in conn.scan_iter()
    }


# Where the recommended worker's overrides are: (the name the docs use, its classes, RQ's).
OVERRIDING = (
    ("CrawlWorker", (CrawlWorker, StopBetweenDequeues), SimpleWorker),
    ("ThreadedMixin", (ThreadedMixin,), SimpleWorker),
    ("CrawlJob", (CrawlJob,), Job),
    ("CrawlQueue", (CrawlQueue,), Queue),
)


def overrides() -> set[str]:
    """`Class.method` of every RQ method the recommended worker's classes override."""
    found = set()
    for label, classes, rqs in OVERRIDING:
        for ours in classes:
            for name, value in vars(ours).items():
                overriding = isinstance(value, property | cached_property)
                if callable(getattr(rqs, name, None)) or overriding:
                    if name != "death_penalty_class":  # an attribute RQ reads, not a method
                        found.add(f"{label}.{name}")
    return found


def test_the_workers_howto_lists_every_override_with_why():
    """docs/howto/workers.md, the table of "What the recommended worker changes in RQ"."""
    howto = (Path(__file__).parents[1] / "docs" / "howto" / "workers.md").read_text()
    table = howto.split("## What the recommended worker changes in RQ")[1].split("\n\n")[2]
    listed = set()
    for row in table.splitlines()[2:]:
        cell = row.split("|")[1]
        names = re.findall(r"`(\w+)(?:\.(\w+))?`", cell)
        owner = "CrawlWorker"
        for first, second in names:
            owner, name = (first, second) if second else (owner, first)
            listed.add(f"{owner}.{name}")
    assert listed == overrides()
