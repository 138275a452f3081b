"""Transient failures are retried with backoff through RQ's scheduler; none is lost."""

from __future__ import annotations

from collections import Counter
from http.server import BaseHTTPRequestHandler

from helpers import Workers, read_jsonl, rqcrawl, seed_local, wait_finished
from servers import HTTPSite, reply


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
        with Workers(redis_url, 2, "--with-scheduler"):
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
