"""A worker killed with SIGKILL mid-job loses nothing: its URL is brought back and the crawl
still ends with exactly the expected pages, each recorded once."""

from __future__ import annotations

import contextlib
import itertools
import signal
import time
from contextlib import ExitStack
from urllib.parse import urlsplit

import pytest
from helpers import (
    child_pids,
    read_jsonl,
    rqcrawl,
    seed_local,
    status,
    stop_pids,
    wait_finished,
    wait_until,
    worker_names,
)
from rq import Worker
from rq.exceptions import NoSuchJobError
from rq.job import Job
from servers import HTTPSite, RedisServer
from testsite import Site

from rqcrawl.frontier import leases
from rqcrawl.frontier.dispatch import JOB_FUNC
from rqcrawl.ops import stats
from rqcrawl.parse.urls import canonicalize
from rqcrawl.workers.runner import WORKER_CLASS, LocalWorkers


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def expected_paths(site: Site, max_depth: int) -> set[str]:
    """The canonical paths (with query) of the pages a crawl to `max_depth` must record."""
    return {path_of(canonicalize("http://h" + p)) for p in site.expected(max_depth)}


def busy(conn, name: str) -> bool:
    worker = Worker.find_by_key(Worker.redis_worker_namespace_prefix + name, connection=conn)
    return worker is not None and worker.get_current_job_id() is not None


def busy_jobs(conn, pid: int) -> list[str]:
    """The ids of the jobs the workers of process `pid` (its slots) are in."""
    found = [w.get_current_job_id() for w in Worker.all(connection=conn) if w.pid == pid]
    return [job_id for job_id in found if job_id]


def finished_untouched(conn, crawl: str, timeout: float) -> dict:
    """Wait for the end reading Redis only: unlike `rqcrawl status`, this never runs a
    recovery pass, so the surviving worker's own watchdog has to bring the URL back."""
    return wait_until(
        lambda: stats.status(conn, crawl),
        timeout,
        f"crawl {crawl} to finish",
        accept=lambda s: s["state"] == "finished",
        every=0.3,
    )


def kill_when_busy(
    conn, workers: LocalWorkers, progress: int, http: HTTPSite, orphans: ExitStack
) -> tuple[float, list[str]]:
    """SIGKILL `workers`' first process once `progress` pages were requested and it is in a
    job (mid-request when pages are slow); returns the time of the kill and the paths of the
    URLs of its jobs (one per slot in a job). Its RQ scheduler, if it holds the lock,
    outlives it as it would in production: `orphans` (an ExitStack) stops it at the end."""
    victim = workers.procs[0]
    worker_names(conn, workers)
    wait_until(
        lambda: sum(http.hits.values()) >= progress and busy_jobs(conn, victim.pid),
        300,  # (RQ alone takes minutes per kill)
        f"{progress} pages requested and worker process {victim.pid} in a job",
        every=0.01,
    )
    jobs = []
    for job_id in busy_jobs(conn, victim.pid):  # read before the kill: a job may end
        with contextlib.suppress(NoSuchJobError):
            jobs.append(Job.fetch(job_id, connection=conn))
    orphans.callback(stop_pids, child_pids(victim.pid))
    victim.send_signal(signal.SIGKILL)
    killed_at = time.time()
    victim.wait()
    return killed_at, [path_of(job.args[1]) for job in jobs if job.func_name == JOB_FUNC]


def test_sigkill_of_a_worker_mid_crawl_leaves_an_exact_result(redis_url, conn, tmp_path):
    site = Site(pages=40, slow={i: 0.3 for i in range(40)})
    conf = tmp_path / "short.toml"  # RQ notices a dead worker's job job_timeout + 60 s late
    conf.write_text("[crawl]\njob_timeout = 20\ndownload_timeout = 10.0\n")
    with HTTPSite(site.handle, max_requests=400, max_seconds=400) as http:
        seed_local(
            redis_url, http.base + "/p0.html", "k", 3, "--config", str(conf),
            "--host-concurrency", "4",
        )  # fmt: skip
        with LocalWorkers(redis_url, 2, log_dir=tmp_path) as workers, ExitStack() as orphans:
            _, paths = kill_when_busy(conn, workers, 6, http, orphans)  # pages take 0.3 s
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
    # the killed jobs were brought back by the recovery pass (its slots seen in a job, and
    # any that started one between that look and the kill)
    assert s["recovered"] >= max(1, len(paths) - 1), (s["recovered"], paths)
    # The killed jobs' pages may have been requested twice (once by the dead worker); no other.
    assert sum(n - 1 for n in http.hits.values()) <= s["recovered"], http.hits


def test_a_killed_worker_frees_its_host_slot_in_seconds(redis_url, conn, tmp_path):
    """With one request at a time per host (the default), the slot a killed worker held in
    the politeness gate is a lease like its URL's: the host is not blocked for a whole
    download timeout."""
    site = Site(pages=40, slow={i: 0.3 for i in range(40)})
    with HTTPSite(site.handle, max_requests=400, max_seconds=300) as http:
        seed_local(redis_url, http.base + "/p0.html", "h", 3)
        with LocalWorkers(redis_url, 2, log_dir=tmp_path) as workers, ExitStack() as orphans:
            killed_at, _ = kill_when_busy(conn, workers, 6, http, orphans)  # 0.3 s a page
            s = finished_untouched(conn, "h", timeout=240)
    assert s["admitted"] == len(expected_paths(site, 3)) and s["in_flight"] == 0
    # The host's next request after the kill: its slot's lease (6 s) and a recovery pass (every
    # 5 s), not the 45 s download timeout. (Measured at the server, not as the crawl's end,
    # which adds the pages' own 12 s and stretches with a loaded machine.)
    waited = min(t for t, _ in http.log if t > killed_at) - killed_at
    assert waited < 30, f"the host's next request came {waited:.1f} s after the kill"


def test_restarting_redis_with_aof_resumes_without_refetching(tmp_path):
    site = Site(pages=40, slow={i: 0.1 for i in range(40)})
    want = expected_paths(site, 3)
    server = RedisServer(tmp_path / "aof", aof=True).start()
    try:
        with HTTPSite(site.handle, max_requests=200, max_seconds=200) as http:
            base = http.base
            seed_local(server.url, base + "/p0.html", "a", 3)
            with LocalWorkers(server.url, 2):
                wait_until(lambda: sum(http.hits.values()) >= 10, 60, "10 pages requested")
            before = sum(http.hits.values())
            server.stop()  # a clean shutdown writes the append-only file out
            server.start()
            assert status(server.url, "a")["state"] == "running"
            with LocalWorkers(server.url, 2):
                s = wait_finished(server.url, "a", timeout=120)
    finally:
        server.stop()
    assert before < len(want)
    assert http.hits.pop("/robots.txt") == 1
    assert all(n == 1 for n in http.hits.values()), http.hits
    assert {path_of(canonicalize(base + p)) for p in http.hits} == want
    assert s["admitted"] == len(want) and s["in_flight"] == 0


def test_repeated_sigkills_recover_in_seconds(redis_url, conn, tmp_path, record_testsuite_property):
    """Chaos: worker processes (4 slots each) SIGKILLed five times across an 864-URL crawl,
    each replaced by a new one. A dead worker's URLs come back within seconds (their lease
    expires), not when RQ's heartbeat does (job_timeout + 60 s), and none is fetched twice
    by live workers."""
    site = Site(pages=720, slow={i: 0.2 for i in range(720)})  # 12 slots: about 60 pages/s
    want = expected_paths(site, 20)
    kills, workers_at_once = 5, 3
    with HTTPSite(site.handle, max_requests=5000, max_seconds=600) as http:
        seed_local(redis_url, http.base + "/p0.html", "z", 20, "--host-concurrency", "32")
        with ExitStack() as stack:
            numbers = itertools.count(1)  # each worker its own log directory

            def start_worker() -> LocalWorkers:
                logs = tmp_path / f"worker{next(numbers)}"
                return stack.enter_context(LocalWorkers(redis_url, 1, 4, log_dir=logs))

            slots = [start_worker() for _ in range(workers_at_once)]
            killed = []  # (time of the kill, paths of the URLs the killed worker was on)
            for n in range(kills):
                slot = n % 2  # slots 0 and 1 are killed again and again, slot 2 never
                progress = (n + 1) * len(want) // (kills + 2)  # the last at 5/7: work remains
                killed.append(kill_when_busy(conn, slots[slot], progress, http, stack))
                slots[slot] = start_worker()
            s = finished_untouched(conn, "z", timeout=400)

    out = tmp_path / "z.jsonl"
    rqcrawl(redis_url, "export", "z", "-o", str(out))
    rows = read_jsonl(out)
    assert sorted(path_of(r["url"]) for r in rows) == sorted(want)  # each exactly once
    assert not [r for r in rows if r["outcome"] not in ("fetched", "failed")]
    assert not [r for r in rows if r["outcome"] == "failed" and r["status"] != 404]
    assert s["admitted"] == len(want) and s["in_flight"] == 0
    refetches = {p: n for p, n in http.hits.items() if n > 1}
    assert sum(n - 1 for n in refetches.values()) <= s["recovered"], refetches
    # a killed job's URL is back within a lease and a recovery pass or two (RQ alone would
    # bring it back after job_timeout + 60 s): whether the kill came before its request or
    # during it, it is requested again within 20 s of the kill (or never, had the job just
    # ended, and then it is recorded once like every URL, above)
    times = {p: [t for t, q in http.log if q == p] for p in refetches}
    gaps = [t[1] - t[0] for t in times.values()]
    record_testsuite_property("refetch_gaps_s", " ".join(f"{g:.1f}" for g in gaps))
    assert all(g < 20 for g in gaps), times
    for killed_at, paths in killed:
        for path in paths:
            after = [t - killed_at for t, q in http.log if q == path and t >= killed_at]
            back = round(after[0], 1) if after else ""
            record_testsuite_property(f"back_after_kill_s {path}", back)
            assert not after or after[0] < 20, (path, after)


@pytest.mark.parametrize("worker", [WORKER_CLASS, None], ids=["crawl", "stock"])
def test_a_slow_but_alive_job_keeps_its_url(redis_url, conn, tmp_path, worker):
    """A page that takes longer than a lease plus a recovery pass is not taken for lost
    while its worker lives: the job renews its lease (from a thread of the process running
    it, a stock worker's work-horse too), so nothing is fetched twice."""
    slow = leases.LEASE + leases.REAP_EVERY + 4
    site = Site(pages=4, slow={1: slow})
    patient = tmp_path / "patient.toml"  # the slow page must not time out (read_timeout 15 s)
    patient.write_text(f"read_timeout = {4 * slow}\ndownload_timeout = {5 * slow}\n")
    with HTTPSite(site.handle, max_requests=100, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/p0.html", "s", 2, "--config", str(patient))
        with LocalWorkers(redis_url, 2, log_dir=tmp_path, worker_class=worker):
            s = finished_untouched(conn, "s", timeout=90)
    assert s["recovered"] == 0 and s["fetched"] == len(expected_paths(site, 2)) - 1, s
    assert all(n == 1 for n in http.hits.values()), http.hits
