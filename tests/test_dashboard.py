"""rq-dashboard (the `dashboard` extra, also in the `test` extra) reads a running crawl:
its queue, its jobs by their short descriptions, and the workers busy on them."""

from __future__ import annotations

import json
import subprocess
import urllib.request

import pytest
from helpers import BIN, seed_local, wait_until, worker_names
from servers import HTTPSite, free_port
from testsite import Site

from rqcrawl.runner import LocalWorkers

DASHBOARD = BIN / "rq-dashboard"
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get_json(url: str) -> dict:
    with NO_PROXY.open(url, timeout=5) as resp:
        return json.load(resp)


def poll(url: str, check) -> dict:
    """GET `url` until `check(data)` holds (the server may still be starting)."""
    what = f"{url} to pass {check.__name__}"
    return wait_until(lambda: get_json(url), 30, what, accept=check, ignoring=(OSError,), every=0.2)


@pytest.fixture
def dashboard(redis_url, tmp_path):
    if not DASHBOARD.exists():
        pytest.skip("rq-dashboard is not installed: pip install -e '.[test]' (or '.[dashboard]')")
    port = free_port()
    log = open(tmp_path / "dashboard.log", "w")
    proc = subprocess.Popen(
        [str(DASHBOARD), "--redis-url", redis_url, "--port", str(port), "--bind", "127.0.0.1"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield f"http://127.0.0.1:{port}/0/data"
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def test_dashboard_shows_the_crawl_queue_jobs_and_busy_workers(redis_url, conn, dashboard):
    site = Site(pages=20, slow={i: 1.0 for i in range(20)})
    with HTTPSite(site.handle, max_requests=100, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/p0.html", "dash", 2, "--host-concurrency", "2")

        queues = poll(f"{dashboard}/queues.json", lambda d: d["queues"])["queues"]
        assert [(q["name"], q["count"]) for q in queues] == [("crawl", 1)]
        jobs = get_json(f"{dashboard}/jobs/crawl/queued/20/asc/1.json")["jobs"]
        assert [j["description"] for j in jobs] == [f"dash d0 {http.base}/p0.html"]

        with LocalWorkers(redis_url, 2) as workers:
            level_1 = f"dash d1 {http.base}/"
            names = worker_names(conn, workers)

            def both_on_level_1(data: dict) -> bool:
                ours = [w for w in data["workers"] if w["name"] in names]
                jobs = [w["current_job"] for w in ours if w["state"] == "busy"]
                return len(jobs) == 2 and all(
                    isinstance(j, dict) and j["description"].startswith(level_1) for j in jobs
                )

            # Each page takes a second: after the seed, both workers fetch level-1 pages.
            found = poll(f"{dashboard}/workers.json", both_on_level_1)["workers"]
    assert all(w["queues"] == ["crawl"] for w in found)
