"""A worker killed with SIGKILL mid-job loses nothing: its URL is brought back and the crawl
still ends with exactly the expected pages, each recorded once."""

from __future__ import annotations

import signal
import time
from contextlib import ExitStack
from urllib.parse import urlsplit

from helpers import (
    Workers,
    child_pids,
    read_jsonl,
    rqcrawl,
    seed_local,
    status,
    stop_pids,
    wait_finished,
)
from rq import Worker
from servers import HTTPSite, RedisServer
from testsite import Site

from rqcrawl import stats
from rqcrawl.urls import canonicalize

CRAWL_WORKER = ("-w", "rqcrawl.worker.CrawlWorker", "--with-scheduler")


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def expected_paths(site: Site, max_depth: int) -> set[str]:
    """The canonical paths (with query) of the pages a crawl to `max_depth` must record."""
    return {path_of(canonicalize("http://h" + p)) for p in site.expected(max_depth)}


def busy(conn, name: str) -> bool:
    worker = Worker.find_by_key(Worker.redis_worker_namespace_prefix + name, connection=conn)
    return worker is not None and worker.get_current_job_id() is not None


def finished_untouched(conn, crawl: str, timeout: float) -> dict:
    """Wait for the end reading Redis only: unlike `rqcrawl status`, this never runs a
    recovery pass, so the surviving worker's own watchdog has to bring the URL back."""
    deadline = time.monotonic() + timeout
    while (s := stats.status(conn, crawl))["state"] != "finished":
        assert time.monotonic() < deadline, s
        time.sleep(0.3)
    return s


def test_sigkill_of_a_worker_mid_crawl_leaves_an_exact_result(redis_url, conn, tmp_path):
    site = Site(pages=40, slow={i: 0.3 for i in range(40)})
    conf = tmp_path / "short.toml"  # RQ notices a dead worker's job job_timeout + 60 s late
    conf.write_text("[crawl]\njob_timeout = 20\ndownload_timeout = 10.0\n")
    with HTTPSite(site.handle, max_requests=400, max_seconds=400) as http:
        seed_local(
            redis_url, http.base + "/p0.html", "k", 3, "--config", str(conf),
            "--host-concurrency", "4",
        )  # fmt: skip
        extra = (*CRAWL_WORKER, "--job-monitoring-interval", "5")
        with Workers(redis_url, 2, *extra, log_dir=tmp_path) as workers, ExitStack() as orphans:
            victim = workers.procs[0]
            deadline = time.monotonic() + 60
            while not (sum(http.hits.values()) >= 6 and busy(conn, workers.names[0])):
                assert time.monotonic() < deadline, "the worker never took a job"
                time.sleep(0.02)
            # Its RQ scheduler (if it holds the lock) outlives it, as it would in production.
            orphans.callback(stop_pids, child_pids(victim.pid))
            victim.send_signal(signal.SIGKILL)  # mid-request: every page takes 0.3 s
            victim.wait()
            killed_at = time.monotonic()
            s = finished_untouched(conn, "k", timeout=240)
            recovery = time.monotonic() - killed_at
    assert recovery < 120, recovery

    out = tmp_path / "k.jsonl"
    rqcrawl(redis_url, "export", "k", "-o", str(out))
    rows = read_jsonl(out)
    want = expected_paths(site, 3)
    assert sorted(path_of(r["url"]) for r in rows) == sorted(want)
    assert s["admitted"] == len(want) and s["in_flight"] == 0
    assert s["recovered"] == 1  # the killed job was brought back by the recovery pass
    # The killed job's page may have been requested twice (once by the dead worker); no other.
    assert sum(n - 1 for n in http.hits.values()) <= 1, http.hits


def test_restarting_redis_with_aof_resumes_without_refetching(tmp_path):
    site = Site(pages=40, slow={i: 0.1 for i in range(40)})
    want = expected_paths(site, 3)
    server = RedisServer(tmp_path / "aof", aof=True).start()
    try:
        with HTTPSite(site.handle, max_requests=200, max_seconds=200) as http:
            base = http.base
            seed_local(server.url, base + "/p0.html", "a", 3)
            with Workers(server.url, 2, *CRAWL_WORKER):
                deadline = time.monotonic() + 60
                while sum(http.hits.values()) < 10:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            before = sum(http.hits.values())
            server.stop()  # a clean shutdown writes the append-only file out
            server.start()
            assert status(server.url, "a")["state"] == "running"
            with Workers(server.url, 2, *CRAWL_WORKER):
                s = wait_finished(server.url, "a", timeout=120)
    finally:
        server.stop()
    assert before < len(want)
    assert http.hits.pop("/robots.txt") == 1
    assert all(n == 1 for n in http.hits.values()), http.hits
    assert {path_of(canonicalize(base + p)) for p in http.hits} == want
    assert s["admitted"] == len(want) and s["in_flight"] == 0
