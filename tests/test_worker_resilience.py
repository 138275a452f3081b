"""Long-lived CrawlWorkers keep serving: the release thread outlives a broken crawl, and an
idle worker takes new work at once (its blocking dequeue never times out on the socket)."""

from __future__ import annotations

import threading
import time

import pytest
from helpers import seed_local, status, wait_until
from rq import Queue, Worker
from rq.exceptions import DequeueTimeout
from rq.intermediate_queue import IntermediateQueue
from rq.utils import get_version
from servers import HTTPSite, reply

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import keys, scripts
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.messages import Slot
from rqcrawl.frontier.state import InFlight
from rqcrawl.ops import control
from rqcrawl.workers import tender as tender_module
from rqcrawl.workers.crawljob import CrawlJob
from rqcrawl.workers.crawlqueue import CrawlQueue
from rqcrawl.workers.runner import LocalWorkers
from rqcrawl.workers.tender import Tender
from rqcrawl.workers.worker import CrawlWorker


def deferred_crawl(conn, name: str, url: str, defer: bool = True) -> Frontier:
    """A crawl whose only URL waits in `later`, due in 0.2 s (or, without `defer`, is in
    flight)."""
    cfg = CrawlConfig(scope_hosts=["example.test"], sitemaps=False)
    control.start(conn, name, cfg, [url])
    frontier = Frontier(conn, name, cfg)
    if defer:
        park(conn, frontier, url, time.time() + 0.2)
    return frontier


def park(conn, frontier: Frontier, url: str, until: float) -> None:
    entry = InFlight.parse(conn.hget(frontier.keys.inflight, url))
    assert frontier.defer(url, entry, until, Slot(frontier.key_of(url)))


def test_a_url_parked_for_sooner_than_the_tenders_next_look_is_released_on_time(conn, monkeypatch):
    """The tender sleeps up to MAX_SLEEP between two looks; a URL this process parks for
    sooner wakes it (a job whose host's slot moved by a few ms parks again, and lost up to
    MAX_SLEEP a time). MAX_SLEEP is made 10 s here: only the wake releases the URL in time."""
    monkeypatch.setattr(tender_module, "MAX_SLEEP", 10.0)
    frontier = deferred_crawl(conn, "soon", "http://example.test/", defer=False)
    tender, stop = Tender(conn), threading.Event()
    thread = threading.Thread(target=tender.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: tender.crawls == ["soon"], 5, "the tender's first look")
        time.sleep(0.1)  # the tender asleep, for 10 s
        due = time.time() + 0.3
        park(conn, frontier, "http://example.test/", due)
        wait_until(lambda: conn.zcard(frontier.keys.later) == 0, 5, "the release")
        assert due <= time.time() < due + 2.0
    finally:
        stop.set()
        tender.wake.set()
        thread.join(5)


def test_tender_outlives_a_crawl_it_cannot_read(conn):
    # A crawl whose stored config no longer loads (here: a setting this version does not
    # know), with a URL in flight so that the tender looks at it on every pass.
    conn.set(keys.CrawlKeys("broken").config, '{"no_such_setting": 1}')
    conn.sadd(keys.CRAWLS, "broken")
    conn.hset(keys.CrawlKeys("broken").inflight, "http://example.test/x", "0 0.0 0 0")
    tender = Tender(conn)
    stop = threading.Event()
    thread = threading.Thread(target=tender.run, args=(stop,), daemon=True)
    thread.start()
    try:
        # Both orders: a broken crawl sorted before and after the good one.
        for name in ("a-good", "z-good"):
            frontier = deferred_crawl(conn, name, "http://example.test/")
            tender.refreshed = 0.0  # read the set of crawls again now
            wait_until(lambda f=frontier: conn.zcard(f.keys.later) == 0, 10, f"{name} released")
            assert thread.is_alive()
    finally:
        stop.set()
        thread.join(5)
    # per crawl: seeded, released (a wake-up job that some RQ scheduler moved in is not ours)
    url_jobs = [i for i in Queue(keys.QUEUE_NAME, connection=conn).job_ids if "-wake-" not in i]
    assert len(url_jobs) == 4


def test_a_waiting_job_is_dequeued_in_one_round_trip(conn):
    """CrawlQueue: the job id moves to RQ's intermediate list and its hash is read by one
    script; a job whose hash is gone is passed over, as RQ does; an empty queue is RQ's."""
    queue = Queue("one-trip", connection=conn)
    gone, job = queue.enqueue(len, "a"), queue.enqueue(len, "bc")
    gone.delete(remove_from_queue=False)
    sent = []

    class Counting(type(conn)):
        def execute_command(self, *args, **options):
            sent.append(args[0])
            return super().execute_command(*args, **options)

    counting = Counting(connection_pool=conn.connection_pool)
    get_version(counting)  # (RQ keeps the server's version on the connection)
    scripts.load(conn, scripts.DEQUEUE)  # (a server that does not know it yet: one more)
    worker = CrawlWorker([queue], connection=counting)
    assert worker.queue_class is CrawlQueue
    sent.clear()
    got, got_queue = CrawlQueue.dequeue_any([queue], 1, counting, CrawlJob)
    assert sent == ["EVALSHA", "EVALSHA"]  # the gone job's, then the waiting one's
    assert (got.id, got.args, got.func_name) == (job.id, ("bc",), "builtins.len")
    assert got_queue.name == "one-trip" and isinstance(got, CrawlJob)
    intermediate = IntermediateQueue(queue.key, conn).key
    assert [i.decode() for i in conn.lrange(intermediate, 0, -1)] == [gone.id, job.id]
    with pytest.raises(DequeueTimeout):  # empty: RQ's blocking dequeue, which timed out
        CrawlQueue.dequeue_any([queue], 1, counting, CrawlJob)


def test_crawl_worker_connections_outlast_its_blocking_dequeue(conn):
    conn.ping()  # as `rq worker` does (its `rq suspend` check) before it builds the worker
    worker = CrawlWorker([Queue("q", connection=conn)], connection=conn)
    pool = conn.connection_pool
    taken = [pool.get_connection() for _ in range(3)]
    try:
        assert all(c.socket_timeout > worker.dequeue_timeout for c in taken)
    finally:
        for c in taken:
            pool.release(c)


def test_an_idle_crawl_worker_takes_new_work_within_a_second(redis_url, conn, tmp_path):
    hits: list[float] = []

    def handle(req):
        hits.append(time.monotonic())
        reply(req, 200, b"<html><title>t</title></html>")

    with (
        HTTPSite(handle, max_requests=20, max_seconds=120) as site,
        LocalWorkers(redis_url, 1, log_dir=tmp_path),
    ):
        wait_until(lambda: Worker.all(connection=conn), 30, "the worker to register")
        # The behaviour under test: idle for longer than redis-py's default 5 s socket
        # timeout (twice over).
        time.sleep(12)
        cfg = CrawlConfig(scope_hosts=[site.host], allow_private=True, delay=0.0)
        seeded = time.monotonic()
        control.start(conn, "idle", cfg, [site.base + "/"])
        wait_until(lambda: len(hits) >= 2, 30, "robots.txt and the seed requested")
        log = (tmp_path / "1.log").read_text()
    assert hits[0] - seeded < 1.0, (hits[0] - seeded, log)
    assert "Timeout reading from socket" not in log, log


def test_status_warns_when_urls_wait_and_no_worker_starts_their_jobs(redis_url, conn):
    seed_local(redis_url, "http://127.0.0.1:9/", "stuck", 1)  # queued; no worker runs
    # said at once: that no worker listens on the queue is a fact, not a stall to wait for
    warned = [w for w in status(redis_url, "stuck")["warnings"] if "no worker" in w]
    assert len(warned) == 1 and "nothing serves them" in warned[0], warned
    counters = keys.CrawlKeys("stuck").counters
    with LocalWorkers(redis_url, 1):  # a worker starts the job: no more warning
        wait_until(
            lambda: float(conn.hget(counters, "last_claim_at") or 0) > time.time() - 60,
            30,
            "a worker to claim the job",
        )
        assert not [w for w in status(redis_url, "stuck")["warnings"] if "no worker" in w]


SLOW_FETCH_JOB = '''
import time
from rq.job import Job

class SlowFetchJob(Job):
    """Loads slowly: a worker spends long between taking a job and starting it (RQ's
    dequeue reads the job's hash, then restores it; CrawlQueue's restores what its
    script read with the id)."""

    def restore(self, raw):
        time.sleep(1.0)
        return super().restore(raw)
'''


def test_stopping_an_idle_worker_never_strands_a_dequeued_job(
    redis_url, conn, tmp_path, monkeypatch
):
    # RQ stops an idle worker by raising from its signal handler wherever it is, also after
    # its dequeue moved a job into RQ's intermediate list and before the job starts: the job
    # then stays there `queued`, run by nobody, until RQ's maintenance fails it a minute or
    # more later (its crawl's level cannot end meanwhile).
    (tmp_path / "slowjob.py").write_text(SLOW_FETCH_JOB)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    queue = Queue(keys.QUEUE_NAME, connection=conn)  # one queue: RQ's dequeue moves the job
    env = {"RQ_JOB_CLASS": "slowjob.SlowFetchJob"}  # `rq worker --job-class`
    with LocalWorkers(redis_url, 1, log_dir=tmp_path, env=env) as workers:
        wait_until(lambda: Worker.all(connection=conn), 30, "the worker to register")
        job = queue.enqueue(len, "abc")
        wait_until(lambda: conn.llen(queue.intermediate_queue_key), 10, "the job dequeued")
        workers.stop()  # SIGTERM while the worker loads the job
        assert workers.procs[0].returncode == 0
    assert conn.lrange(queue.intermediate_queue_key, 0, -1) == []
    assert job.get_status(refresh=True) == "finished"
