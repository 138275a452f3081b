"""CrawlWorker sends RQ's bookkeeping in fewer round trips without changing what RQ and its
tools rely on: the worker stays registered with its full time-to-live and a current state and
heartbeat, `rq suspend` still stops it, and a job with callbacks still gets them."""

from __future__ import annotations

import threading
import time

from helpers import command_calls, wait_until
from rq import Callback, Queue
from rq.job import Job, JobStatus
from rq.suspension import resume, suspend
from rq.utils import str_to_date

from rqcrawl.frontier.dispatch import JOB_FUNC
from rqcrawl.workers.threadworkers import threaded_class
from rqcrawl.workers.worker import CrawlJob, CrawlWorker


def square(x: int) -> int:
    return x * x


def remember(job, connection, result, *args, **kwargs) -> None:
    connection.rpush("callbacks", job.id)


def test_crawl_worker_keeps_rq_informed(conn):
    queue = Queue("trim", connection=conn)
    worker = threaded_class(CrawlWorker)([queue], connection=conn, name="trim-worker")
    thread = threading.Thread(target=worker.work, kwargs={"logging_level": "WARNING"})
    thread.start()
    try:
        jobs = [
            queue.enqueue(square, i, on_success=Callback(remember) if i % 4 == 0 else None)
            for i in range(20)
        ]
        wait_until(
            lambda: all(j.get_status(refresh=True) == JobStatus.FINISHED for j in jobs),
            30,
            "every job to finish",
        )
        assert [j.return_value() for j in jobs] == [i * i for i in range(20)]
        assert sorted(conn.lrange("callbacks", 0, -1)) == sorted(j.id.encode() for j in jobs[::4])
        # After the jobs, the worker's key has its full TTL again (worker_ttl + 60), not
        # the shorter one a job's heartbeat sets, and says idle with a fresh heartbeat.
        wait_until(lambda: conn.hget(worker.key, "state") == b"idle", 5, "the worker idle")
        assert conn.ttl(worker.key) > worker.worker_ttl
        beat = Job.fetch(jobs[-1].id, connection=conn).ended_at.timestamp()
        stored = str_to_date(conn.hget(worker.key, "last_heartbeat")).timestamp()
        assert abs(stored - beat) < 10

        # `rq suspend` while a job runs: the worker takes no other job after it.
        slow = queue.enqueue(time.sleep, 1.5)
        wait_until(lambda: slow.get_status(refresh=True) == JobStatus.STARTED, 10, "slow start")
        # The worker heartbeat RQ sends before the job (with the job's shorter TTL) was
        # skipped: the full one sent after the dequeue stands for it, and leaves more time.
        assert conn.ttl(worker.key) > worker.worker_ttl
        suspend(conn)
        held = queue.enqueue(square, 7)
        wait_until(lambda: slow.get_status(refresh=True) == JobStatus.FINISHED, 10, "slow's end")
        time.sleep(2)  # the behaviour under test: suspended, it takes nothing meanwhile
        assert held.get_status(refresh=True) == JobStatus.QUEUED
        resume(conn)
        wait_until(
            lambda: held.get_status(refresh=True) == JobStatus.FINISHED,
            10,
            "the held job to run after rq resume",
        )
    finally:
        resume(conn)
        worker._stop_requested = True
        thread.join(15)
    assert not thread.is_alive()


def test_a_crawl_jobs_success_is_one_hset_with_its_meta_and_expires_only_its_own_keys(conn):
    job = CrawlJob.create(JOB_FUNC, args=("c", "http://a.test/", 0), connection=conn)
    job.save()
    job.meta["outcome"] = "fetched"
    before = {c: command_calls(conn, c) for c in ("hset", "expire")}
    with conn.pipeline() as pipe:
        job._handle_success(30, pipe, worker_name="w")
        job.cleanup(30, pipeline=pipe, remove_from_queue=False)
        pipe.execute()
    assert command_calls(conn, "hset") - before["hset"] == 1  # status, fields and meta at once
    assert command_calls(conn, "expire") - before["expire"] == 2  # the job and its result
    stored = Job.fetch(job.id, connection=conn)
    assert stored.get_status() == JobStatus.FINISHED and stored.meta == {"outcome": "fetched"}
    assert 0 < conn.ttl(job.key) <= 30
    other = CrawlJob.create(square, args=(3,), connection=conn)  # may have dependents
    other.save()
    before = command_calls(conn, "expire")
    other.cleanup(30)
    assert command_calls(conn, "expire") - before == 3
