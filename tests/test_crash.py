"""A worker killed with SIGKILL mid-job loses nothing: its URL is brought back and the crawl
still ends with exactly the expected pages, each recorded once."""

from __future__ import annotations

import signal
import time
from urllib.parse import urlsplit

from helpers import Workers, read_jsonl, rqcrawl, seed_local, wait_finished
from rq import Worker
from servers import HTTPSite
from testsite import Site

from rqcrawl.urls import canonicalize


def busy(conn, name: str) -> bool:
    worker = Worker.find_by_key(Worker.redis_worker_namespace_prefix + name, connection=conn)
    return worker is not None and worker.get_current_job_id() is not None


def test_sigkill_of_a_worker_mid_crawl_leaves_an_exact_result(redis_url, conn, tmp_path):
    site = Site(pages=40, slow={i: 0.3 for i in range(40)})
    expected = site.expected(3)
    conf = tmp_path / "short.toml"  # RQ notices a dead worker's job job_timeout + 60 s late
    conf.write_text("[crawl]\njob_timeout = 20\ndownload_timeout = 10.0\n")
    with HTTPSite(site.handle, max_requests=400, max_seconds=400) as http:
        seed_local(redis_url, http.base + "/p0.html", "k", 3, "--config", str(conf))
        extra = ("--worker-class", "rq.worker.SimpleWorker", "--job-monitoring-interval", "5")
        with Workers(redis_url, 2, *extra, log_dir=tmp_path) as workers:
            victim = workers.procs[0]
            deadline = time.monotonic() + 60
            while not (sum(http.hits.values()) >= 6 and busy(conn, workers.names[0])):
                assert time.monotonic() < deadline, "the worker never took a job"
                time.sleep(0.02)
            victim.send_signal(signal.SIGKILL)  # mid-request: every page takes 0.3 s
            victim.wait()
            killed_at = time.monotonic()
            s = wait_finished(redis_url, "k", timeout=240)
            recovery = time.monotonic() - killed_at
    assert recovery < 120, recovery

    out = tmp_path / "k.jsonl"
    rqcrawl(redis_url, "export", "k", "-o", str(out))
    rows = read_jsonl(out)
    parts = [urlsplit(canonicalize(http.base + p)) for p in expected]
    want = {p.path + (f"?{p.query}" if p.query else "") for p in parts}
    got = [urlsplit(r["url"]) for r in rows]
    assert sorted(p.path + (f"?{p.query}" if p.query else "") for p in got) == sorted(want)
    assert s["admitted"] == len(want) and s["in_flight"] == 0
    assert s["recovered"] == 1  # the killed job was brought back by the recovery pass
    # The killed job's page may have been requested twice (once by the dead worker); no other.
    assert sum(n - 1 for n in http.hits.values()) <= 1, http.hits
