"""Hostile links: malformed hrefs, a bad <base href> or Location, URLs with spaces, and pages
with 100,000 links. Every page ends recorded, its good links crawled, the bad ones counted."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

from helpers import read_jsonl, rqcrawl, seed_local, status, wait_finished, wait_until
from servers import HTTPSite, reply

from rqcrawl.config import CrawlConfig
from rqcrawl.ops.sinks import iter_records
from rqcrawl.workers.runner import LocalWorkers
from rqcrawl.workers.visit import visit

HOSTILE_PAGE = (
    '<html><head><base href="http://[bad/"><title>hostile</title></head><body>'
    '<a href="http://[bad/">ipv6</a><a href="//[::1/x">ipv6 too</a>'
    '<a href="http://ex ample.com/">space in host</a><a href="/a b">space in path</a>'
    '<a href="/good">good</a><a href="/redirect">bad Location</a></body></html>'
)


def hostile(req: BaseHTTPRequestHandler) -> None:
    if req.path == "/":
        reply(req, 200, HOSTILE_PAGE.encode())
    elif req.path == "/redirect":
        reply(req, 302, b"", headers={"Location": "http://[bad/"})
    else:
        reply(req, 200, b"<title>fine</title>")


def test_malformed_links_never_stop_a_page(redis_url, tmp_path):
    with HTTPSite(hostile, max_requests=40, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/", "hl", 1)
        with LocalWorkers(redis_url, 1):
            s = wait_finished(redis_url, "hl", timeout=60)
    out = tmp_path / "hl.jsonl"
    rqcrawl(redis_url, "export", "hl", "-o", str(out))
    rows = {r["url"].removeprefix(http.base): r for r in read_jsonl(out)}
    assert rows["/"]["outcome"] == "fetched" and rows["/"]["attempts"] == 1
    assert rows["/good"]["outcome"] == "fetched"
    assert rows["/a%20b"]["outcome"] == "fetched"
    assert rows["/redirect"]["outcome"] == "failed"
    assert rows["/redirect"]["error"].startswith("bad redirect: invalid URL 'http://[bad/'")
    assert set(rows) == {"/", "/good", "/a%20b", "/redirect"}
    assert s["links_dropped"] == {"bad": 3} and s["fetched"] == 3 and s["failed"] == 1
    assert "dropped: bad 3" in rqcrawl(redis_url, "status", "hl").stdout


def links_page(n: int) -> bytes:
    return "".join(f'<a href="/p/{i}">{i}</a>' for i in range(n)).encode()


def test_a_page_keeps_its_first_links_in_page_order_and_records_the_cut():
    def site(req: BaseHTTPRequestHandler) -> None:
        reply(req, 200, links_page(10))

    with HTTPSite(site, max_requests=5, max_seconds=60) as http:
        host = http.base.removeprefix("http://")
        settings = {"allow_private": True, "max_links_per_page": 3, "scope_hosts": [host]}
        result = visit(http.base + "/", 0, CrawlConfig.from_dict(settings))
    assert [u for _, u in result.children] == [f"{http.base}/p/{i}" for i in range(3)]
    assert result.record["outlinks"] == 10 and result.record["links_cut"] == 7
    assert result.counts["links:max_links_per_page"] == 7


def test_a_page_with_100000_links_is_recorded_in_short_redis_calls(redis_url, conn, slowlog):
    page = links_page(100_000)

    def site(req: BaseHTTPRequestHandler) -> None:
        reply(req, 200, page if req.path == "/" else b"<title>child</title>")

    with HTTPSite(site, max_requests=3000, max_seconds=240) as http:
        seed_local(redis_url, http.base + "/", "big", 1, "--no-robots")
        conn.slowlog_reset()  # creating the Bloom filter is once per crawl, not per page
        with LocalWorkers(redis_url, 1):
            wait_until(
                lambda: status(redis_url, "big")["fetched"], 180, "the page recorded", every=0.2
            )
            rqcrawl(redis_url, "cancel", "big")
    s = status(redis_url, "big")
    [first] = [r for r in iter_records(conn, "big") if r["url"] == http.base + "/"]
    assert first["outcome"] == "fetched" and first["outlinks"] == 100_000
    cap = CrawlConfig().max_links_per_page
    assert first["links_cut"] == 100_000 - cap
    assert s["admitted"] == 1 + cap
    assert s["links_dropped"]["max_links_per_page"] == 100_000 - cap
    assert [(e["duration"], e["command"][:40]) for e in slowlog()] == []
