"""Servers that misbehave on purpose: every page ends with a recorded outcome, quickly, and
nothing a server sends can make a worker download without bound."""

from __future__ import annotations

import gzip
import time
from http.server import BaseHTTPRequestHandler

from helpers import read_jsonl, rqcrawl, seed_local, wait_finished
from servers import HTTPSite, reply

from rqcrawl.workers.runner import LocalWorkers

PAGES = ["slow", "trickle", "endless", "bomb", "pdf", "latin1", "meta1251", "broken", "ok"]
BOMB = gzip.compress(b"\0" * 30_000_000, compresslevel=9)  # 30 MB of zeros in ~30 KB


def stream(req: BaseHTTPRequestHandler, chunk: bytes, pause: float, limit: int) -> None:
    """An unbounded-looking body without Content-Length, up to `limit` bytes or a hang-up."""
    req.send_response(200)
    req.send_header("Content-Type", "text/html")
    req.send_header("Connection", "close")
    req.end_headers()
    sent = 0
    try:
        while sent < limit:
            req.wfile.write(chunk)
            req.wfile.flush()
            sent += len(chunk)
            time.sleep(pause)
    except OSError:
        pass  # the crawler hung up, as it should
    req.close_connection = True


def hostile(req: BaseHTTPRequestHandler) -> None:
    path = req.path.strip("/")
    if path == "":
        links = "".join(f'<a href="/{p}">{p}</a>' for p in PAGES)
        reply(req, 200, f"<title>index</title>{links}".encode())
    elif path == "slow":
        time.sleep(3)  # longer than the read timeout
        reply(req, 200, b"<title>too late</title>")
    elif path == "trickle":
        stream(req, b"<!-- -->", pause=0.3, limit=200)  # always under the read timeout
    elif path == "endless":
        stream(req, b"<p>" + b"x" * 65_533, pause=0, limit=200_000_000)
    elif path == "bomb":
        reply(req, 200, BOMB, headers={"Content-Encoding": "gzip"})
    elif path == "pdf":
        reply(req, 200, b"%PDF-1.4" + b"\0" * 3_000_000, ctype="application/pdf")
    elif path == "latin1":
        reply(req, 200, "<title>café</title>".encode("latin-1"), "text/html; charset=iso-8859-1")
    elif path == "meta1251":
        body = '<meta charset="windows-1251"><title>Привет</title>'.encode("cp1251")
        reply(req, 200, body)
    elif path == "broken":
        body = b"<title>broken</title><a href='/ok?a=1'>x<div><<>>\x00\xff\xfe<td><a href=/ok?b=2>"
        reply(req, 200, body)
    else:
        reply(req, 200, b"<title>fine</title>")


def test_every_misbehaving_page_ends_with_a_precise_outcome(redis_url, tmp_path):
    conf = tmp_path / "tight.toml"
    conf.write_text(
        "[crawl]\nread_timeout = 1.0\ndownload_timeout = 3.0\nmax_body_bytes = 1_000_000\n"
        "retries = 0\n"
    )
    with HTTPSite(hostile, max_requests=40, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/", "h", 2, "--config", str(conf))
        started = time.monotonic()
        with LocalWorkers(redis_url, 2, worker_class=None):  # stock `rq worker`
            s = wait_finished(redis_url, "h", timeout=60)
        elapsed = time.monotonic() - started
    out = tmp_path / "h.jsonl"
    rqcrawl(redis_url, "export", "h", "-o", str(out))
    rows = {r["url"][len(http.base) + 1 :]: r for r in read_jsonl(out)}

    assert rows["slow"]["outcome"] == "failed" and "timeout" in rows["slow"]["error"]
    assert rows["trickle"]["outcome"] == "failed" and "3.0s" in rows["trickle"]["error"]
    for cut in ("endless", "bomb"):  # read up to the cap on decoded bytes, no further
        assert rows[cut]["outcome"] == "fetched" and rows[cut]["truncated"] is True, rows[cut]
        assert rows[cut]["bytes"] == 1_000_000
    assert rows["pdf"]["outcome"] == "not_html" and rows["pdf"]["bytes"] is None
    assert rows["latin1"]["title"] == "café"
    assert rows["meta1251"]["title"] == "Привет"
    assert rows["broken"]["outcome"] == "fetched" and rows["broken"]["title"].startswith("broken")
    assert {"ok?a=1", "ok?b=2"} <= set(rows)  # links are still found in broken HTML
    assert s["failed"] == 2 and s["skipped"] == {"not_html": 1}
    assert elapsed < 45  # bounded by the timeouts, not by the servers' patience


BIG_LINKS = [f"/only{i}" for i in range(3)]


def big_page(req: BaseHTTPRequestHandler) -> None:
    """`/`: 3 MB declared in its Content-Length, its links first (Derby's 17 MB javadoc
    index-all.html is the only page linking some of its pages); `/stream`: the same without
    a Content-Length."""
    links = "".join(f'<a href="{p}">{p}</a>' for p in BIG_LINKS).encode()
    if req.path == "/":
        reply(req, 200, b'<title>big</title><a href="/stream">s</a>' + links + b"x" * 3_000_000)
    elif req.path == "/stream":
        stream(req, links + b"<p>" + b"x" * 65_533, pause=0, limit=200_000_000)
    elif req.path == "/robots.txt":
        req.send_error(404)
    else:
        reply(req, 200, b"<title>linked only from a big page</title>")


def test_a_page_over_the_size_cap_is_read_to_the_cap_and_its_links_followed(redis_url, tmp_path):
    conf = tmp_path / "cap.toml"
    conf.write_text("[crawl]\nmax_body_bytes = 1_000_000\n")
    with HTTPSite(big_page, max_requests=20, max_seconds=60) as http:
        seed_local(redis_url, http.base + "/", "big", 2, "--config", str(conf))
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "big", timeout=60)
    out = tmp_path / "big.jsonl"
    rqcrawl(redis_url, "export", "big", "-o", str(out))
    rows = {r["url"].removeprefix(http.base): r for r in read_jsonl(out)}
    assert set(rows) == {"/", "/stream", *BIG_LINKS}
    for cut in ("/", "/stream"):
        assert rows[cut]["outcome"] == "fetched" and rows[cut]["truncated"] is True, rows[cut]
        assert rows[cut]["bytes"] == 1_000_000
    assert all(rows[p]["outcome"] == "fetched" and rows[p]["truncated"] is None for p in BIG_LINKS)
