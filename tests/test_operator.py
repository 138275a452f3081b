"""The operator's view: failures by reason (status, `rqcrawl failures`, the dashboard's job
metadata), per-host progress and the recent rate, worker names, the worker command hint."""

from __future__ import annotations

import json
import socket
import time
from http.server import BaseHTTPRequestHandler

from helpers import rqcrawl, seed_local, status, wait_finished, wait_until
from rq import Worker
from rq.job import Job
from servers import HTTPSite, free_port, reply
from test_dashboard import dashboard, get_json  # noqa: F401 (a fixture)

from rqcrawl.defaults import RATE_BUCKET
from rqcrawl.frontier import keys
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.ops import stats
from rqcrawl.workers.runner import WORKER_CLASS, LocalWorkers


def failing_site(slow: float):
    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/":
            links = "".join(f'<a href="/{p}">{p}</a>' for p in ("ok", "gone", "down", "slow"))
            reply(req, 200, f"<title>home</title>{links}".encode())
        elif req.path == "/ok":
            reply(req, 200, b"<title>ok</title>")
        elif req.path == "/down":
            reply(req, 503, b"down")
        elif req.path == "/slow":
            time.sleep(slow)
            reply(req, 200, b"<title>late</title>")
        else:
            reply(req, 404, b"gone")

    return handle


def test_failures_by_reason_in_status_failures_and_the_dashboard(
    redis_url,
    conn,
    tmp_path,
    dashboard,  # noqa: F811
):
    closed = free_port()
    conf = tmp_path / "c.toml"
    with HTTPSite(failing_site(slow=3), max_requests=50, max_seconds=120) as http:
        refused = f"http://127.0.0.1:{closed}/x"
        conf.write_text(
            "[crawl]\nretries = 0\nread_timeout = 0.5\nobey_robots = false\n"
            f'scope_hosts = ["127.0.0.1:{http.port}", "127.0.0.1:{closed}"]\n'
        )
        seed_local(redis_url, http.base + "/", "fail", 1, "--config", str(conf))
        seed_local(redis_url, refused, "fail", 1)
        with LocalWorkers(redis_url, 2):
            s = wait_finished(redis_url, "fail", timeout=90)

    assert s["fetched"] == 2 and s["failed"] == 4
    assert s["failed_by_reason"] == {
        "http_404": 1,
        "http_5xx": 1,
        "timeout": 1,
        "connection_refused": 1,
    }
    shown = rqcrawl(redis_url, "status", "fail").stdout
    assert "connection_refused 1" in shown and "http_404 1" in shown

    listing = rqcrawl(redis_url, "failures", "fail").stdout.splitlines()
    assert len(listing) == 4
    gone = next(line for line in listing if line.endswith("/gone"))
    assert gone.split()[:2] == ["http_404", "404"]
    only = rqcrawl(redis_url, "failures", "fail", "--reason", "timeout", "--json").stdout
    rows = [json.loads(line) for line in only.splitlines()]
    assert [(r["url"], r["reason"]) for r in rows] == [(http.base + "/slow", "timeout")]

    # The dashboard lists the finished jobs; a failed page's job says why in its metadata.
    jobs = get_json(f"{dashboard}/jobs/crawl/finished/50/asc/1.json")["jobs"]
    by_url = {j["description"].split(" ", 2)[2]: j["id"] for j in jobs}
    info = get_json(f"{dashboard}/job/{by_url[http.base + '/gone']}.json")
    meta = json.loads(info["metadata"])
    assert meta == {
        "outcome": "failed",
        "reason": "http_404",
        "status": 404,
        "error": "HTTP 404",
        "attempts": 1,
    }
    ok = json.loads(get_json(f"{dashboard}/job/{by_url[http.base + '/ok']}.json")["metadata"])
    assert ok["outcome"] == "fetched" and ok["status"] == 200
    # The failed page's job outlives a fetched page's (job_ttl, 600 s): the dashboard's link
    # stays alive.
    assert conn.ttl(f"rq:job:{by_url[http.base + '/gone']}") > 3600
    assert 0 < conn.ttl(f"rq:job:{by_url[http.base + '/ok']}") <= 600


def test_a_stock_forking_worker_saves_the_meta_and_is_warned_about(redis_url, conn):
    with HTTPSite(failing_site(slow=0), max_requests=50, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/gone", "stock", 0, "--retries", "0")
        with LocalWorkers(redis_url, 1, worker_class=None):
            s = wait_finished(redis_url, "stock", timeout=60)
    assert s["failed_by_reason"] == {"http_404": 1}
    assert any("forking" in w and "RQ_WORKER_CLASS" in w for w in s["warnings"]), s
    job_ids = [k.decode().split(":", 2)[2] for k in conn.scan_iter("rq:job:rqcrawl-stock-*")]
    meta = Job.fetch(job_ids[0], connection=conn).get_meta()
    assert meta["reason"] == "http_404" and meta["status"] == 404


def test_status_shows_hosts_recent_rate_and_eta(redis_url, conn):
    def handle(req: BaseHTTPRequestHandler) -> None:
        i = int(req.path.strip("/") or 0)
        links = "".join(f'<a href="/{k}">{k}</a>' for k in range(1, 9)) if i == 0 else ""
        reply(req, 200, f"<title>{i}</title>{links}".encode())

    with HTTPSite(handle, max_requests=50, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/", "eta", 1, "--delay", "0.8", "--no-robots")
        with LocalWorkers(redis_url, 1):

            def mid_crawl(s: dict) -> bool:
                """2 pages fetched, 2 to go (a finished crawl came too far: fail now)."""
                assert s["state"] != "finished", s
                return s["fetched"] >= 2 and s["hosts"] and s["hosts"][0]["remaining"] >= 2

            # read in this process: a `status` command's start-up can outlast the crawl
            s = wait_until(lambda: stats.status(conn, "eta"), 60, "mid-crawl", accept=mid_crawl)
            host = s["hosts"][0]
            assert host["host"] == f"127.0.0.1:{http.port}" and host["admitted"] == 9
            assert host["in_flight"] + host["held"] == host["remaining"]
            # 0.8 s between two requests: the remaining URLs need at least that much each.
            assert host["eta_s"] >= 0.8 * (host["remaining"] - 1)
            assert s["eta_s"] >= host["eta_s"] and s["recent_pages_per_s"] > 0
            final = wait_finished(redis_url, "eta", timeout=60)
    assert final["hosts"][0]["fetched"] == 9 and final["hosts"][0]["remaining"] == 0
    assert final["eta_s"] == 0
    assert "127.0.0.1:" in rqcrawl(redis_url, "status", "eta").stdout


def test_seed_prints_the_worker_command_to_run(redis_url):
    out = seed_local(redis_url, "http://127.0.0.1:9/", "hint", 0).stdout
    assert "RQ_WORKER_CLASS=rqcrawl.workers.CrawlWorker rq worker crawl\n" in out
    assert out.splitlines()[-1] == "hint"  # the name stays the last line, for scripts


def test_crawl_workers_are_named_host_and_pid(redis_url, conn):
    # The class named as the README says (RQ_WORKER_CLASS), not by LocalWorkers' option.
    env = {"RQ_WORKER_CLASS": WORKER_CLASS}
    with LocalWorkers(redis_url, 1, worker_class=None, env=env) as workers:
        name = f"{socket.gethostname()}:{workers.procs[0].pid}"  # its slots: name:s1, ...
        found = wait_until(
            lambda: Worker.all(connection=conn), 30, "the worker to register",
            accept=lambda found: name in [w.name for w in found],
        )  # fmt: skip
    assert all(w.name == name or w.name.startswith(name + ":s") for w in found)


def test_failure_reasons_are_short_stable_words():
    assert stats.failure_reason("http_404", 404) == "http_404"
    assert stats.failure_reason("http_503", 503) == "http_5xx"
    assert stats.failure_reason("download_timeout", 200) == "timeout"
    assert stats.failure_reason("connection_refused", None) == "connection_refused"
    assert stats.failure_reason("redirect_loop", None) == "redirect_loop"


def test_status_drops_rate_buckets_older_than_a_minute(redis_url, conn):
    seed_local(redis_url, "http://127.0.0.1:9/", "old", 0)
    now = int(time.time()) // RATE_BUCKET
    counters = CrawlKeys("old").counters
    old, current = f"{keys.RATE}{now - 100}", f"{keys.RATE}{now}"
    conn.hset(counters, mapping={old: 5, current: 3})
    s = status(redis_url, "old")
    assert s["recent_pages_per_s"] > 0
    assert conn.hget(counters, old) is None
    assert conn.hget(counters, current) == b"3"


def test_a_crawl_over_keeps_the_rate_of_its_last_minute(redis_url, conn):
    """Read 5 minutes after its end, a crawl's recent pages/s are those of its last minute:
    its buckets are kept (pruned a minute before its last URL's end, not before now)."""
    seed_local(redis_url, "http://127.0.0.1:9/", "past", 0)
    rqcrawl(redis_url, "cancel", "past")  # over: its end is its last URL's
    now = time.time()
    last = f"{keys.RATE}{int(now - 305) // RATE_BUCKET}"
    counters = CrawlKeys("past").counters
    conn.hset(counters, mapping={keys.STARTED_AT: now - 330, keys.LAST_AT: now - 300, last: 30})
    s = status(redis_url, "past")
    assert s["state"] == "cancelled" and s["recent_pages_per_s"] > 0, s
    assert conn.hget(counters, last) == b"30"


def test_the_recent_rate_of_a_crawl_younger_than_a_minute_counts_from_its_start():
    now = 1_000_005.0  # 5 s into a 10-second bucket
    bucket = int(now) // RATE_BUCKET
    buckets = {str(bucket): 5, str(bucket - 1): 5}
    assert stats.recent_rate(buckets, now - 10, now) == 1.0  # 10 pages in its 10 s
    assert stats.recent_rate(buckets, now - 600, now) == 10 / 65  # the last 6.5 buckets
