"""rq-dashboard (the `dashboard` extra, also in the `test` extra) reads a running crawl:
its queue, its jobs by their short descriptions, and the workers busy on them."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from helpers import BIN, seed_local, wait_finished, wait_until, worker_names
from servers import HTTPSite, free_port
from testsite import Site

from rqcrawl import api
from rqcrawl.ops import stats
from rqcrawl.untrusted import inert
from rqcrawl.workers.runner import WORKER_CLASS, LocalWorkers

DASHBOARD = BIN / "rq-dashboard"
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get_json(url: str) -> dict:
    with NO_PROXY.open(url, timeout=5) as resp:
        return json.load(resp)


def poll(url: str, check, timeout: float = 30) -> dict:
    """GET `url` until `check(data)` holds (the server may still be starting)."""
    what = f"{url} to pass {check.__name__}"
    return wait_until(
        lambda: get_json(url), timeout, what, accept=check, ignoring=(OSError,), every=0.2
    )


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
        seed_local(
            redis_url, http.base + "/p0.html", "dash", 2, "--host-concurrency", "2",
            "--delay", "0",
        )  # fmt: skip

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

            # Each page takes a second: after the seed, two workers fetch level-1 pages.
            found = poll(f"{dashboard}/workers.json", both_on_level_1)["workers"]
    assert all(w["queues"] == ["crawl"] for w in found)


def dashboard_jobs(dashboard: str, registry: str) -> list[dict]:
    """Every job the dashboard lists in `registry` of the queue `crawl`, page by page, as a
    user paging through it sees them."""
    listed, page = [], 1
    while True:
        data = get_json(f"{dashboard}/jobs/crawl/{registry}/8/asc/{page}.json")
        listed += data["jobs"]
        if page >= data["pagination"]["num_pages"]:
            return listed
        page += 1


def job_outcome(dashboard: str, job_id: str) -> str | int:
    """The page's outcome in the `meta` of the dashboard's page of job `job_id`, or the
    HTTP status of that page if it is an error (500: the job is gone)."""
    try:
        with NO_PROXY.open(f"{dashboard}/job/{job_id}.json", timeout=5) as resp:
            return json.loads(json.load(resp)["metadata"])["outcome"]
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize("worker_class", [WORKER_CLASS, None], ids=["recommended", "stock"])
def test_each_page_has_one_live_job_from_queued_to_finished(
    redis_url, conn, dashboard, worker_class
):
    """A one-host site at its pace: a URL becomes an RQ job only when its host can take it,
    so none waits in the Deferred list, each page has one job whose id stays the same from
    Queued to Finished, and once the crawl is over the Finished list holds one live job per
    page (no dead link) and opens on jobs."""
    site = Site(pages=12)
    with HTTPSite(site.handle, max_requests=200, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/p0.html", "dash", 2, "--delay", "0.5")
        listed: set[str] = set()  # the jobs seen Queued or Started
        deferred = []
        with LocalWorkers(redis_url, 2, worker_class=worker_class):

            def watch(counts: dict) -> bool:
                deferred.append(counts["queues"][0]["deferred_job_registry_count"])
                for registry in ("queued", "started"):
                    listed.update(j["id"] for j in dashboard_jobs(dashboard, registry))
                return stats.status(conn, "dash")["state"] == "finished"

            poll(f"{dashboard}/queues.json", watch, timeout=90)
    assert max(deferred) == 0, deferred
    pages = {r["url"] for r in api.records(conn, "dash")}
    finished = dashboard_jobs(dashboard, "finished")
    described = [j["description"].split(" ", 2)[2] for j in finished]
    assert sorted(described) == sorted(map(inert, pages))  # one job per page (URLs inert)
    assert listed and listed <= {j["id"] for j in finished}  # the same jobs, then done
    outcomes = {job_outcome(dashboard, j["id"]) for j in finished}
    assert outcomes == {"fetched", "failed"}  # live links, each to a page's last visit
    first = get_json(f"{dashboard}/jobs/crawl/finished/8/asc/1.json")["jobs"]
    assert first  # not "No jobs."


def test_expired_jobs_do_not_fill_the_finished_list(redis_url, conn, dashboard, tmp_path):
    """Jobs of an earlier crawl expire (job_ttl); while a later crawl runs, the Finished list
    still opens on its jobs, and links to none that are gone."""
    short = tmp_path / "short.toml"
    short.write_text("job_ttl = 1\n")
    site = Site(pages=20)
    with HTTPSite(site.handle, max_requests=200, max_seconds=120) as http:
        with LocalWorkers(redis_url, 2):
            seed_local(redis_url, http.base + "/p0.html", "old", 2, "--config", str(short))
            wait_finished(redis_url, "old")
            time.sleep(2)  # every job of crawl `old` expired; the registry still names them
            seed_local(redis_url, http.base + "/p0.html", "new", 1)
            wait_finished(redis_url, "new")
    first = get_json(f"{dashboard}/jobs/crawl/finished/8/asc/1.json")["jobs"]
    assert first, "the Finished list opens on 'No jobs.'"
    finished = dashboard_jobs(dashboard, "finished")
    outcomes = {job_outcome(dashboard, j["id"]) for j in finished}
    assert outcomes <= {"fetched", "failed"}, outcomes  # no link to a job that is gone
    assert {
        j["description"].split(" ")[0] for j in finished if "/missing" not in j["description"]
    } == {"new"}
