"""Transient failures are retried with backoff, at their exact time; none is lost."""

from __future__ import annotations

import time
from collections import Counter
from http.server import BaseHTTPRequestHandler

import pytest
from helpers import read_jsonl, rqcrawl, seed_local, wait_finished
from servers import HTTPSite, reply

from rqcrawl.workers.runner import WORKER_CLASS, LocalWorkers


def flaky_site():
    calls: Counter[str] = Counter()

    def handle(req: BaseHTTPRequestHandler) -> None:
        calls[req.path] += 1
        if req.path == "/":
            links = "".join(f'<a href="/{p}">{p}</a>' for p in ("flaky", "down", "busy", "gone"))
            reply(req, 200, f"<title>home</title>{links}".encode())
        elif req.path == "/flaky" and calls[req.path] <= 2:
            reply(req, 500, b"oops")
        elif req.path == "/flaky":
            reply(req, 200, b"<title>third time lucky</title>")
        elif req.path == "/down":
            reply(req, 503, b"down")
        elif req.path == "/busy" and calls[req.path] == 1:
            reply(req, 429, b"slow down", headers={"Retry-After": "2"})
        elif req.path == "/busy":
            reply(req, 200, b"<title>busy</title>")
        else:
            reply(req, 404, b"gone")

    return handle


def test_transient_failures_are_retried_and_permanent_ones_are_not(redis_url, tmp_path):
    conf = tmp_path / "fast.toml"
    conf.write_text("[crawl]\nretries = 2\nretry_base = 0.2\n")
    with HTTPSite(flaky_site(), max_requests=50, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/", "f", 1, "--config", str(conf))
        with LocalWorkers(redis_url, 2, worker_class=None):
            s = wait_finished(redis_url, "f", timeout=90)
    out = tmp_path / "f.jsonl"
    rqcrawl(redis_url, "export", "f", "-o", str(out))
    rows = {r["url"].rsplit("/", 1)[1]: r for r in read_jsonl(out)}

    assert rows["flaky"]["outcome"] == "fetched" and rows["flaky"]["attempts"] == 3
    assert rows["down"]["outcome"] == "failed" and rows["down"]["attempts"] == 3
    assert rows["down"]["status"] == 503 and "503" in rows["down"]["error"]
    assert rows["gone"]["outcome"] == "failed" and rows["gone"]["attempts"] == 1
    assert rows["busy"]["outcome"] == "fetched" and rows["busy"]["attempts"] == 2
    assert http.hits["/flaky"] == 3 and http.hits["/down"] == 3 and http.hits["/gone"] == 1

    busy = [t for t, path in http.log if path == "/busy"]
    assert busy[1] - busy[0] >= 2.0  # Retry-After honoured, longer than the 0.2 s backoff
    down = [t for t, path in http.log if path == "/down"]
    assert down[2] - down[1] >= 0.4 and down[1] - down[0] >= 0.2  # 1x, 2x the base
    assert s["retries"] == 2 + 2 + 1 and s["fetched"] == 3 and s["failed"] == 2


def test_retries_come_at_their_exact_time_with_the_recommended_worker(redis_url, tmp_path):
    """retry_base x 1, 2, 4 between the requests, on the server's clock, within 0.3 s (RQ's
    scheduler keeps whole seconds and made them 1.9, 3.0, 5.0 s)."""
    calls: Counter[str] = Counter()

    def handle(req: BaseHTTPRequestHandler) -> None:
        calls[req.path] += 1
        if req.path == "/" and calls["/"] <= 3:
            reply(req, 503, b"down")
        else:
            reply(req, 200, b"<title>up</title>")

    conf = tmp_path / "retry.toml"
    conf.write_text("[crawl]\nretries = 3\nretry_base = 1.0\n")
    with HTTPSite(handle, max_requests=20, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/", "r", 0, "--config", str(conf), "--no-robots")
        with LocalWorkers(redis_url, 1, log_dir=tmp_path):
            s = wait_finished(redis_url, "r", timeout=60)
    times = [t for t, path in http.log if path == "/"]
    gaps = [round(b - a, 2) for a, b in zip(times, times[1:], strict=False)]
    assert len(gaps) == 3 and s["fetched"] == 1 and s["retries"] == 3, (gaps, s)
    assert all(abs(gap - want) <= 0.3 for gap, want in zip(gaps, (1, 2, 4), strict=True)), gaps


FLEETS = {  # the recommended worker, a stock forking one, two in threads of one process
    "crawl": {"worker_class": WORKER_CLASS},
    "stock": {"worker_class": None},
    "threads": {"worker_class": WORKER_CLASS, "threads": 2},  # a timer, not SIGALRM
}


@pytest.mark.parametrize("kind", FLEETS)
def test_a_job_killed_by_job_timeout_is_a_timeout_of_its_url(redis_url, tmp_path, kind):
    """RQ's job_timeout ends a job that waits on a slow server: the URL is retried like any
    timeout and finally recorded as a failed timeout, not as lost by its worker."""

    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/slow":
            time.sleep(7)
            reply(req, 200, b"<title>too late</title>")
        else:
            reply(req, 200, b'<title>home</title><a href="/slow">slow</a>')

    conf = tmp_path / "tight.toml"
    conf.write_text(  # 3 s: a stock worker's work-horse first imports rqcrawl and requests
        "[crawl]\njob_timeout = 3\nread_timeout = 10.0\ndownload_timeout = 10.0\n"
        "retries = 1\nretry_base = 0.2\n"
    )
    with HTTPSite(handle, max_requests=20, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/", "t", 1, "--config", str(conf), "--no-robots")
        with LocalWorkers(redis_url, 1, log_dir=tmp_path, **FLEETS[kind]):
            s = wait_finished(redis_url, "t", timeout=50)  # a lost job takes minutes
    out = tmp_path / "t.jsonl"
    rqcrawl(redis_url, "export", "t", "-o", str(out))
    slow = next(r for r in read_jsonl(out) if r["url"].endswith("/slow"))
    assert slow["outcome"] == "failed" and slow["attempts"] == 2, slow
    assert "job_timeout" in slow["error"], slow
    assert http.hits["/slow"] == 2 and s["retries"] == 1 and s["recovered"] == 0, s
