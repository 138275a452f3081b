"""download_timeout bounds the whole download, headers included: a server that drips its
answer a byte at a time ends as a transient download_timeout, retried like one and finally
recorded as failed, never lost to RQ's job timeout."""

from __future__ import annotations

import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler

import pytest
from helpers import read_jsonl, rqcrawl, seed_local, wait_finished
from servers import HTTPSite, drip, reply

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.http import FetchError, fetch
from rqcrawl.workers.runner import LocalWorkers

CFG = CrawlConfig.from_dict({"allow_private": True, "download_timeout": 2.0, "read_timeout": 1.0})
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 40\r\n\r\n"


def dripping(req: BaseHTTPRequestHandler) -> None:
    if req.path == "/":
        reply(req, 200, b'<title>home</title><a href="/headers">h</a><a href="/body">b</a>')
    elif req.path == "/headers":
        drip(req, HEAD + b"x" * 40)
    elif req.path == "/body":
        req.wfile.write(HEAD)
        drip(req, b"x" * 40)
    elif req.path == "/slow":  # 40 bytes at 0.3 s each: 12 s, over a job_timeout of 2 s
        req.wfile.write(HEAD)
        drip(req, b"x" * 40)
    else:
        reply(req, 404, b"")


@pytest.mark.parametrize("path", ["/headers", "/body"])
def test_a_drip_fed_answer_ends_at_the_download_timeout(path, http_client):
    with HTTPSite(dripping, max_requests=5, max_seconds=60) as http:
        started = time.monotonic()
        with pytest.raises(FetchError) as err:
            fetch(http.base + path, replace(CFG, http_client=http_client), lambda hop: None)
        elapsed = time.monotonic() - started
    assert err.value.reason == "download_timeout" and err.value.transient
    assert "2.0s" in str(err.value)
    assert elapsed < 3.5, elapsed


def test_a_drip_fed_page_is_retried_then_failed_not_lost(redis_url, tmp_path, http_client):
    conf = tmp_path / "drip.toml"
    conf.write_text(
        "[crawl]\nread_timeout = 1.0\ndownload_timeout = 2.0\njob_timeout = 8\n"
        f'retries = 1\nretry_base = 0.2\nhttp_client = "{http_client}"\n'
    )
    with HTTPSite(dripping, max_requests=20, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/", "d", 1, "--config", str(conf))
        with LocalWorkers(redis_url, 1, log_dir=tmp_path):
            s = wait_finished(redis_url, "d", timeout=90)
    out = tmp_path / "d.jsonl"
    rqcrawl(redis_url, "export", "d", "-o", str(out))
    rows = {r["url"][len(http.base) :]: r for r in read_jsonl(out)}
    assert set(rows) == {"/", "/headers", "/body"}, rows
    for path in ("/headers", "/body"):
        assert rows[path]["outcome"] == "failed", rows[path]
        assert "download took over 2.0s" in rows[path]["error"]
        assert rows[path]["attempts"] == 2 and http.hits[path] == 2
    assert s["failed"] == 2 and s["fetched"] == 1


def test_a_page_over_job_timeout_is_a_failure_by_reason(redis_url, tmp_path):
    """A page whose job RQ cuts at job_timeout (the download's own deadline is longer) is
    failed with the reason `job_timeout`, counted among the failures by reason."""
    conf = tmp_path / "slow.toml"
    conf.write_text(
        "[crawl]\nread_timeout = 5.0\ndownload_timeout = 60.0\njob_timeout = 2\nretries = 0\n"
    )
    with HTTPSite(dripping, max_requests=5, max_seconds=60) as http:
        seed_local(redis_url, http.base + "/slow", "jt", 0, "--config", str(conf))
        with LocalWorkers(redis_url, 1, log_dir=tmp_path):
            s = wait_finished(redis_url, "jt", timeout=60)
    assert s["failed"] == 1 and s["failed_by_reason"] == {"job_timeout": 1}, s
    shown = rqcrawl(redis_url, "status", "jt").stdout
    assert "failed     1 (job_timeout 1)" in shown, shown
