"""The frontier's RQ jobs: saved without their empty fields, read back whole by RQ."""

from __future__ import annotations

from helpers import command_calls
from rq import Queue
from rq.job import Job, JobStatus

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import configs
from rqcrawl.frontier.dispatch import JOB_FUNC, CompactJob, Frontier

URL = "http://127.0.0.1:9/a/page.html"


def seeded_job(conn, crawl: str) -> bytes:
    cfg = CrawlConfig.from_dict({"allow_private": True, "bloom_capacity": 1000, "sitemaps": False})
    configs.save(conn, crawl, cfg)
    Frontier(conn, crawl, cfg).seed([URL])
    [key] = [k for k in conn.scan_iter(match=f"rq:job:rqcrawl-{crawl}-*")]
    return key


def test_a_pending_job_hash_holds_no_empty_field(conn):
    key = seeded_job(conn, "compact1")
    fields = conn.hgetall(key)
    assert all(fields.values()), [f for f, v in fields.items() if not v]
    assert b"worker_name" not in fields and b"started_at" not in fields
    assert len(fields) < 12
    job = Job.fetch(key.decode().removeprefix("rq:job:"), connection=conn)
    assert (job.func_name, job.args) == (JOB_FUNC, ("compact1", URL, 0))
    assert job.description == f"compact1 d0 {URL}"
    assert job.get_status() == JobStatus.QUEUED
    assert job.worker_name is None and job.started_at is None


def test_a_saved_again_job_clears_fields_that_became_empty(conn):
    """RQ clears a requeued job's worker and times by saving empty values: a job read back
    from Redis must write them, or the old ones would stay."""
    job_id = seeded_job(conn, "compact2").decode().removeprefix("rq:job:")
    job = CompactJob.fetch(job_id, connection=conn)
    job.worker_name = "w1"
    job.save()
    assert conn.hget(job.key, "worker_name") == b"w1"
    job = CompactJob.fetch(job_id, connection=conn)
    job.worker_name = None
    job.save()
    assert conn.hget(job.key, "worker_name") == b""


def test_a_new_job_is_written_in_one_hset_its_status_included(conn):
    queue = Queue("compact3", connection=conn, job_class=CompactJob)
    before = command_calls(conn, "hset")
    with conn.pipeline() as pipe:
        data = Queue.prepare_data(JOB_FUNC, args=("compact3", URL, 0), job_id="compact3-job")
        queue.enqueue_many([data], pipeline=pipe)
        pipe.execute()
    assert command_calls(conn, "hset") - before == 1
    job = Job.fetch("compact3-job", connection=conn)
    assert job.get_status() == JobStatus.QUEUED and job.args == ("compact3", URL, 0)
