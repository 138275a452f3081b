"""CrawlWorker sends RQ's bookkeeping in fewer round trips without changing what RQ and its
tools rely on: the worker stays registered with its full time-to-live and a current state and
heartbeat, `rq suspend` still stops it, and a job with callbacks still gets them; a page's
politeness release rides with its job's success."""

from __future__ import annotations

import itertools
import threading
import time

from helpers import command_calls, wait_until
from redis.client import Pipeline
from rq import Callback, Queue
from rq.job import Job, JobStatus
from rq.registry import FailedJobRegistry, FinishedJobRegistry
from rq.suspension import resume, suspend
from rq.utils import now, str_to_date
from rq.worker import BaseWorker, WorkerStatus
from servers import HTTPSite, reply

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import keys, scripts
from rqcrawl.frontier.dispatch import JOB_FUNC
from rqcrawl.frontier.messages import HostPace
from rqcrawl.frontier.recovery import LOST_AFTER
from rqcrawl.ops import control, stats
from rqcrawl.workers import jobs
from rqcrawl.workers.crawljob import CrawlJob
from rqcrawl.workers.threadworkers import threaded_class
from rqcrawl.workers.worker import CrawlWorker


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


def test_between_two_jobs_the_worker_stays_busy_in_redis_and_says_idle_once_it_waits(
    conn, monkeypatch
):
    """RQ writes `idle` after each job and `busy` before the next: two writes a job. A
    CrawlWorker given jobs back to back writes `busy` once, and `idle` when its queue is empty."""
    written = []
    rq_set_state = BaseWorker.set_state

    def noted(worker, state, pipeline=None):
        if worker.name == "states-worker":
            written.append(state)
        rq_set_state(worker, state, pipeline=pipeline)

    monkeypatch.setattr(BaseWorker, "set_state", noted)
    queue = Queue("states", connection=conn)
    jobs = [queue.enqueue(square, i) for i in range(10)]
    worker = threaded_class(CrawlWorker)([queue], connection=conn, name="states-worker")
    thread = threading.Thread(target=worker.work, kwargs={"logging_level": "WARNING"})
    thread.start()
    try:
        wait_until(lambda: conn.hget(worker.key, "state") == b"idle", 30, "the worker idle")
        assert all(j.get_status(refresh=True) == JobStatus.FINISHED for j in jobs)
    finally:
        worker._stop_requested = True
        thread.join(15)
    # (a full heartbeat, at most every HEARTBEAT_EVERY, may send the state once more)
    assert written.count(WorkerStatus.BUSY) <= 2 and written.count(WorkerStatus.IDLE) <= 2


def test_a_crawl_jobs_success_is_one_hset_of_what_its_end_changed_and_expires_its_own_keys(
    conn,
):
    job = CrawlJob.create(JOB_FUNC, args=("c", "http://a.test/", 0), connection=conn)
    job.save()
    job.meta["outcome"] = "fetched"
    job.ended_at = now()
    fields = conn.hgetall(job.key)
    before = {c: command_calls(conn, c) for c in ("hset", "expire")}
    with conn.pipeline() as pipe, job.succeeding():
        job._handle_success(30, pipe, worker_name="w")
        job.cleanup(30, pipeline=pipe, remove_from_queue=False)
        pipe.execute()
    assert command_calls(conn, "hset") - before["hset"] == 1  # status, end and meta at once
    changed = {k: v for k, v in conn.hgetall(job.key).items() if fields.get(k) != v}
    assert set(changed) == {b"status", b"ended_at", b"meta"}  # the rest as enqueued
    assert command_calls(conn, "expire") - before["expire"] == 2  # the job and its result
    stored = Job.fetch(job.id, connection=conn)
    assert stored.get_status() == JobStatus.FINISHED and stored.meta == {"outcome": "fetched"}
    assert 0 < conn.ttl(job.key) <= 30
    other = CrawlJob.create(square, args=(3,), connection=conn)  # may have dependents
    other.save()
    before = command_calls(conn, "expire")
    other.cleanup(30)
    assert command_calls(conn, "expire") - before == 3


class Spy:
    """A script of rqcrawl.frontier.scripts, noting its runs sent on their own and queued in
    a pipeline."""

    def __init__(self, script):
        self.script, self.runs = script, []

    def __call__(self, redis, **named):
        self.runs.append("own round trip")
        return self.script(redis, **named)

    def queue(self, pipe, **named):
        self.runs.append("queued")
        return self.script.queue(pipe, **named)


def run_crawl_worker(conn, name: str, until) -> None:
    """A CrawlWorker (in a thread) working the crawl queue until `until()`."""
    queue = Queue(keys.QUEUE_NAME, connection=conn)
    worker = threaded_class(CrawlWorker)([queue], connection=conn, name=f"{name}-worker")
    thread = threading.Thread(target=worker.work, kwargs={"logging_level": "WARNING"})
    thread.start()
    try:
        wait_until(until, 30, f"crawl {name}")
    finally:
        worker._stop_requested = True
        thread.join(15)


def one_host_crawl(conn, site: HTTPSite, name: str, delay: float = 0.4) -> None:
    cfg = CrawlConfig(
        scope_hosts=[f"{site.host}:{site.port}"], allow_private=True, delay=delay, max_depth=1,
        obey_robots=False, sitemaps=False,
    )  # fmt: skip
    control.start(conn, name, cfg, [site.base + "/"])


THREE_PAGES = {"/": b'<a href="/a">a</a><a href="/b">b</a>', "/a": b"a", "/b": b"b"}


def pages_of(pages: dict[str, bytes]):
    """A site's handler: each path's page, 404 for others."""

    def handle(req):
        found = req.path in pages
        reply(req, 200 if found else 404, b"<html>" + pages.get(req.path, b"") + b"</html>")

    return handle


def test_a_pages_claim_goes_with_its_jobs_start_and_its_slot_is_freed_as_it_ends(conn, monkeypatch):
    """The claim of a page's URL rides in the round trip that starts its job; its host's
    slot is freed in the step that ends the URL: the pace is kept (requests `delay` apart)
    and no slot is left taken. The server forgot the scripts before the crawl: the first
    claim is sent again by the job."""
    claims = Spy(scripts.CLAIM)
    monkeypatch.setattr(scripts, "CLAIM", claims)
    with HTTPSite(pages_of(THREE_PAGES), max_requests=20, max_seconds=60) as site:
        one_host_crawl(conn, site, "ride")
        conn.script_flush()
        run_crawl_worker(conn, "ride", lambda: stats.status(conn, "ride")["state"] == "finished")
    starts = sorted(t for t, _ in site.log)
    assert len(starts) == 3
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.4
    # every job's claim queued (its host had a slot for each: no job parked), the first
    # one's sent again by the job itself
    assert claims.runs == ["queued", "own round trip", "queued", "queued"]
    host = f"{site.host}:{site.port}"
    assert conn.zcard(keys.CrawlKeys("ride").host_leases(host)) == 0


def test_the_jobs_a_page_released_ride_with_its_jobs_success(conn, monkeypatch):
    """The RQ jobs of the URLs a page's links released (its host free at once: no delay)
    are written in the pipeline of the page's success, not in a round trip of their own:
    every pipeline of the worker's job thread that pushes a job to the crawl queue also
    records a success."""
    sent: list[tuple[int, list[str]]] = []
    execute = Pipeline.execute

    def noted(pipe, *args, **kwargs):
        commands = [" ".join(map(str, c[0])).upper() for c in pipe.command_stack]
        sent.append((threading.get_ident(), commands))
        return execute(pipe, *args, **kwargs)

    monkeypatch.setattr(Pipeline, "execute", noted)
    with HTTPSite(pages_of(THREE_PAGES), max_requests=20, max_seconds=60) as site:
        one_host_crawl(conn, site, "ride-along", delay=0)
        run_crawl_worker(
            conn, "ride-along", lambda: stats.status(conn, "ride-along")["state"] == "finished"
        )
    successes = [(t, p) for t, p in sent if any("SUCCESSFUL_JOB_COUNT" in c for c in p)]
    assert len(successes) == 3
    worker_thread = successes[0][0]
    push = f"RPUSH {Queue(keys.QUEUE_NAME, connection=conn).key} ".upper()
    pushes = [(t, p) for t, p in sent if t == worker_thread and any(push in c for c in p)]
    assert pushes  # the root page released /a and /b
    assert all(push in successes for push in pushes)


def test_a_pages_next_job_is_dequeued_with_its_success(conn, monkeypatch):
    """The worker's next job comes with the pipeline of the page's success, not in a round
    trip of its own: the root page's success carries the jobs of /a and /b and takes /a,
    and /a's takes /b."""
    taken: list[tuple[list[str], object]] = []
    execute = Pipeline.execute

    def noted(pipe, *args, **kwargs):
        commands = [" ".join(map(str, c[0])).upper() for c in pipe.command_stack]
        replies = execute(pipe, *args, **kwargs)
        if any("SUCCESSFUL_JOB_COUNT" in c for c in commands):
            taken.append(replies[-1])
        return replies

    monkeypatch.setattr(Pipeline, "execute", noted)
    with HTTPSite(pages_of(THREE_PAGES), max_requests=20, max_seconds=60) as site:
        one_host_crawl(conn, site, "ahead", delay=0)
        run_crawl_worker(conn, "ahead", lambda: stats.status(conn, "ahead")["state"] == "finished")
    assert len(taken) == 3
    urls = [Job.fetch(found[0].decode(), connection=conn).args[1] for found in taken[:2]]
    assert sorted(urls) == [site.base + "/a", site.base + "/b"]
    assert not taken[2]  # the queue was empty after /b: the worker waits on it as RQ's does


def test_a_pages_success_stands_when_redis_forgot_the_dequeue_script(conn):
    """Redis forgets its scripts (a restart, SCRIPT FLUSH) during a page: the page's
    success, which ends with the dequeue script, is still recorded, and the crawl goes on."""

    def forgetful(req):
        if req.path == "/":
            conn.script_flush()
        pages_of(THREE_PAGES)(req)

    with HTTPSite(forgetful, max_requests=20, max_seconds=60) as site:
        one_host_crawl(conn, site, "forgot", delay=0)
        run_crawl_worker(
            conn, "forgot", lambda: stats.status(conn, "forgot")["state"] == "finished"
        )
    assert FailedJobRegistry(keys.QUEUE_NAME, connection=conn).get_job_ids() == []
    assert sorted(path for _, path in site.log) == ["/", "/a", "/b"]


def ahead_of_a_slow_root(conn, name: str, during_root, **work) -> None:
    """A worker (`work`: its work's arguments) on a crawl of THREE_PAGES whose root page
    takes 1.5 s, during which `during_root()` is called; the root's success queues the job of
    /a or /b (the host's one request at a time) and dequeues it ahead. Checks that the job
    is then back in the crawl queue, not run."""

    def slow_root(req):
        if req.path == "/":
            time.sleep(1.5)
        pages_of(THREE_PAGES)(req)

    queue = Queue(keys.QUEUE_NAME, connection=conn)
    with HTTPSite(slow_root, max_requests=20, max_seconds=60) as site:
        one_host_crawl(conn, site, name, delay=0)
        worker = threaded_class(CrawlWorker)([queue], connection=conn, name=f"{name}-worker")
        kwargs = {"logging_level": "WARNING", **work}
        thread = threading.Thread(target=worker.work, kwargs=kwargs)
        thread.start()
        try:
            wait_until(lambda: site.log, 10, "the root's request")
            during_root()
            wait_until(lambda: len(queue) == 1, 10, "the job back in the crawl queue")
            assert conn.llen(queue.intermediate_queue_key) == 0
            assert [path for _, path in site.log] == ["/"]  # neither ran
        finally:
            worker._stop_requested = True
            thread.join(15)


def test_a_job_dequeued_ahead_goes_back_to_its_queue_when_the_worker_ends(conn):
    """A worker that ends after a page (here its `--max-jobs`) puts the job its success
    dequeued ahead back in the crawl queue, not in RQ's intermediate list, where nobody
    would run it until RQ's maintenance failed it."""
    ahead_of_a_slow_root(conn, "ahead-end", lambda: None, max_jobs=1)


def test_a_job_dequeued_ahead_goes_back_to_its_queue_while_rq_suspend_holds_the_worker(conn):
    """`rq suspend` during a page: the worker takes no job after it, and the one its
    success dequeued ahead goes back to the crawl queue while the suspension lasts."""
    try:
        ahead_of_a_slow_root(conn, "ahead-suspend", lambda: suspend(conn))
    finally:
        resume(conn)


def test_a_pages_released_jobs_are_sent_when_its_job_fails_after_its_finish(conn, monkeypatch):
    """A job that fails after its page's finish step has no success to carry what the page
    released: those RQ jobs are sent as the job ends, not left to the recovery pass."""
    describe = jobs._describe

    def broken(job, c, outcome):
        if job.args[1].endswith(":" + str(site.port) + "/"):
            raise RuntimeError("the root page's description failed")
        describe(job, c, outcome)

    monkeypatch.setattr(jobs, "_describe", broken)
    pages = {"/": b'<a href="/a">a</a>', "/a": b"a"}
    with HTTPSite(pages_of(pages), max_requests=20, max_seconds=60) as site:
        one_host_crawl(conn, site, "ride-failed", delay=0)  # /a released by the finish
        started = time.time()
        run_crawl_worker(conn, "ride-failed", lambda: len(site.log) == 2)
    assert time.time() - started < LOST_AFTER  # /a was queued by its job, not recovered
    assert sorted(path for _, path in site.log) == ["/", "/a"]


def test_a_pages_job_is_listed_finished_with_its_outcome_in_meta_and_no_rq_result(conn):
    """A page's job keeps what rq-dashboard shows (the finished list, the outcome in its
    meta) without an RQ result of its own: its return value is the outcome again."""
    with HTTPSite(lambda req: reply(req, 200, b"<html>x</html>"), max_seconds=60) as site:
        one_host_crawl(conn, site, "kept")
        run_crawl_worker(conn, "kept", lambda: stats.status(conn, "kept")["state"] == "finished")
    finished = FinishedJobRegistry(keys.QUEUE_NAME, connection=conn).get_job_ids()
    ours = [Job.fetch(i, connection=conn) for i in finished if i.startswith("rqcrawl-kept-")]
    assert [(j.get_status(), j.meta["outcome"]) for j in ours] == [(JobStatus.FINISHED, "fetched")]
    assert list(conn.scan_iter("rq:results:rqcrawl-kept-*")) == []


def test_a_failed_page_job_still_frees_its_hosts_slot_at_once(conn, monkeypatch):
    """A job that fails after its request (here its last step raises) frees its host's slot
    before its failure: no lease waits to expire, the pace is kept."""

    def broken(*args, **kwargs):
        raise RuntimeError("the page's last step failed")

    monkeypatch.setattr(jobs.settle, "page", broken)
    failed = FailedJobRegistry(keys.QUEUE_NAME, connection=conn)  # (other tests' jobs too)

    def ours_failed() -> bool:
        return any(i.startswith("rqcrawl-step-failed-") for i in failed.get_job_ids())

    with HTTPSite(lambda req: reply(req, 200, b"<html>x</html>"), max_seconds=60) as site:
        one_host_crawl(conn, site, "step-failed")
        started = time.time()
        run_crawl_worker(conn, "step-failed", ours_failed)
    host, crawl_keys = f"{site.host}:{site.port}", keys.CrawlKeys("step-failed")
    assert conn.zcard(crawl_keys.host_leases(host)) == 0  # (not after LEASE)
    pace = HostPace.parse(conn.hget(crawl_keys.hosts, host))
    assert pace.ready >= started + 0.4, site.log  # pushed from the request's end
