"""Every hop is a request like any other (rqcrawl.fetch.hops): a redirect's or a meta refresh's
target is a URL of its own, at the same depth, that passes robots.txt and its host's gate."""

from __future__ import annotations

import itertools
import time
from http.server import BaseHTTPRequestHandler

import pytest
from helpers import read_jsonl, rqcrawl, seed_local, wait_finished
from servers import HTTPSite, reply
from test_politeness import gaps, scope, tree_site

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.hops import chain_problem, meta_refresh
from rqcrawl.workers.runner import LocalWorkers


def with_client(tmp_path, http_client: str, conf=None) -> str:
    """A settings file for `rqcrawl seed --config`: `conf`'s, and the client under test."""
    out = tmp_path / "client.toml"
    base = conf.read_text() if conf else "[crawl]\n"
    out.write_text(base + f'http_client = "{http_client}"\n')
    return str(out)


def records(redis_url: str, crawl: str, tmp_path) -> dict[str, dict]:
    out = tmp_path / f"{crawl}.jsonl"
    rqcrawl(redis_url, "export", crawl, "-o", str(out))
    return {r["url"]: r for r in read_jsonl(out)}


def test_redirect_into_a_disallowed_path_is_never_requested(redis_url, tmp_path, http_client):
    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/robots.txt":
            reply(req, 200, b"User-agent: *\nDisallow: /private\n", ctype="text/plain")
        elif req.path == "/":
            reply(req, 200, b'<a href="/a">a</a>')
        elif req.path == "/a":
            reply(req, 302, b"", headers={"Location": "/private/secret"})
        else:
            reply(req, 200, b"<title>secret</title>")

    with HTTPSite(handle, max_requests=20, max_seconds=60) as http:
        seed_local(
            redis_url, http.base + "/", "dis", 2, "--config", with_client(tmp_path, http_client)
        )
        with LocalWorkers(redis_url, 1):
            s = wait_finished(redis_url, "dis")
    assert "/private/secret" not in http.hits  # the server never saw a request for it
    rows = records(redis_url, "dis", tmp_path)
    secret = rows[http.base + "/private/secret"]
    assert secret["outcome"] == "robots_disallowed"
    assert secret["via"] == [http.base + "/a"] and secret["depth"] == 1
    assert rows[http.base + "/a"]["redirect_to"] == http.base + "/private/secret"
    assert s["skipped"] == {"redirected": 1, "robots_disallowed": 1}


def test_cross_host_redirect_asks_its_robots_txt_and_keeps_its_delay(
    redis_url, tmp_path, http_client
):
    def other(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/robots.txt":
            reply(req, 200, b"User-agent: *\nCrawl-delay: 0.6\n", ctype="text/plain")
        else:
            reply(req, 200, f"<title>{req.path}</title>".encode())

    with HTTPSite(other, host="127.0.0.3", max_requests=20, max_seconds=90) as b:

        def first(req: BaseHTTPRequestHandler) -> None:
            if req.path == "/robots.txt":
                reply(req, 404, b"")
            elif req.path == "/":
                reply(req, 200, "".join(f'<a href="/r{i}">r</a>' for i in range(5)).encode())
            else:
                reply(req, 302, b"", headers={"Location": f"{b.base}/p{req.path[2:]}"})

        with HTTPSite(first, host="127.0.0.2", max_requests=20, max_seconds=90) as a:
            conf = with_client(tmp_path, http_client, scope(tmp_path, a, b))
            seed_local(redis_url, a.base + "/", "cross", 1, "--config", conf)
            with LocalWorkers(redis_url, 2):
                wait_finished(redis_url, "cross")
    assert b.hits["/robots.txt"] == 1  # the second host's robots.txt was asked
    assert sorted(b.hits) == ["/p0", "/p1", "/p2", "/p3", "/p4", "/robots.txt"]
    assert all(n == 1 for n in b.hits.values())
    assert min(gaps(b)) >= 0.6, gaps(b)  # its Crawl-delay held between every request
    rows = records(redis_url, "cross", tmp_path)
    assert rows[b.base + "/p3"]["via"] == [a.base + "/r3"]


def test_meta_refresh_target_is_fetched_at_the_same_depth(redis_url, tmp_path):
    pages = {
        "/": b'<a href="/old">old</a>',
        "/old": b'<head><meta http-equiv="refresh" content="0; url=/new"></head><a href="/x">x</a>',
        "/slow": b'<meta http-equiv="refresh" content="500; url=/never">',
        "/new": b'<title>new</title><a href="/deeper">d</a>',
    }

    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path in pages:
            reply(req, 200, pages[req.path])
        elif req.path == "/robots.txt":
            reply(req, 404, b"")
        else:
            reply(req, 200, b"<title>other</title>")

    pages["/"] += b'<a href="/slow">s</a>'
    with HTTPSite(handle, max_requests=30, max_seconds=60) as http:
        seed_local(redis_url, http.base + "/", "meta", 1)
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "meta")
    assert http.hits["/new"] == 1  # the refresh's target was fetched
    assert "/never" not in http.hits  # a refresh of 500 s is over max_meta_refresh_delay
    assert "/x" not in http.hits and "/deeper" not in http.hits  # depth 2: over max_depth
    rows = records(redis_url, "meta", tmp_path)
    old, new = rows[http.base + "/old"], rows[http.base + "/new"]
    assert old["outcome"] == "redirected" and old["redirect_to"] == http.base + "/new"
    assert new["outcome"] == "fetched" and new["via"] == [http.base + "/old"]
    assert new["depth"] == old["depth"] == 1
    assert rows[http.base + "/slow"]["outcome"] == "fetched"


def test_chain_bounds_and_meta_refresh_delays():
    cfg = CrawlConfig(max_redirects=2)
    assert chain_problem("http://a/2", "http://a/3", ["http://a/1"], cfg) is None
    assert chain_problem("http://a/3", "http://a/4", ["http://a/1", "http://a/2"], cfg) == (
        "too_many_redirects"
    )
    assert chain_problem("http://a/2", "http://a/1", ["http://a/1"], cfg) == "redirect_loop"
    page = '<meta http-equiv="refresh" content="{}; url=/next">'
    assert meta_refresh(page.format(5), "http://a/", cfg) == "http://a/next"
    assert meta_refresh(page.format(101), "http://a/", cfg) is None  # over 100 s
    assert meta_refresh('<meta http-equiv="refresh" content="0">', "http://a/", cfg) is None
    assert meta_refresh("<noscript>" + page.format(0) + "</noscript>", "http://a/", cfg) is None
    assert meta_refresh(page.format(0), "http://a/", CrawlConfig(follow_meta_refresh=False)) is None


def test_a_redirect_target_loses_its_tracking_parameters_like_a_link(
    redis_url, tmp_path, http_client
):
    """`/go` redirects to `/page?utm_source=x&jsessionid=1` while `/` also links `/page`: the
    target is stripped of strip_params as a link is, so the page is fetched once."""

    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/":
            reply(req, 200, b'<a href="/go">go</a><a href="/page">page</a>')
        elif req.path == "/go":
            req.send_response(302)
            req.send_header("Location", "/page?utm_source=x&jsessionid=1")
            req.send_header("Content-Length", "0")
            req.end_headers()
        elif req.path == "/robots.txt":
            reply(req, 404, b"")
        else:
            reply(req, 200, b"<title>page</title>")

    with HTTPSite(handle, max_requests=30, max_seconds=60) as http:
        seed_local(
            redis_url, http.base + "/", "strip", 1, "--config", with_client(tmp_path, http_client)
        )
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "strip")
    pages = {path: n for path, n in http.hits.items() if path.startswith("/page")}
    assert pages == {"/page": 1}, http.hits
    assert records(redis_url, "strip", tmp_path)[http.base + "/go"]["redirect_to"] == (
        http.base + "/page"
    )


def test_robots_txt_redirect_hops_each_wait_for_their_host(redis_url, tmp_path):
    """robots.txt takes no turn of its host's pace, but its redirect hops do: three hops on
    one host, each a delay after the request before it (they came within milliseconds)."""

    def handle(req: BaseHTTPRequestHandler) -> None:
        hops = {"/robots.txt": "/r1", "/r1": "/r2", "/r2": "/r3"}
        if req.path in hops:
            reply(req, 301, b"moved", headers={"Location": hops[req.path]})
        elif req.path == "/r3":
            reply(req, 200, b"User-agent: *\nDisallow: /private\n", ctype="text/plain")
        else:
            reply(req, 200, b'<a href="/a">a</a><a href="/private">p</a>')

    with HTTPSite(handle, max_requests=20, max_seconds=60) as http:
        seed_local(redis_url, http.base + "/", "hops", 1, "--delay", "0.5")
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "hops")
    log = sorted(http.log)
    assert [p for _, p in log] == ["/robots.txt", "/r1", "/r2", "/r3", "/", "/a"]
    spacing = [b[0] - a[0] for a, b in itertools.pairwise(log[:4])]
    assert min(spacing) >= 0.5, spacing  # the host's delay between the hops


HOP_ANSWER = 0.3  # seconds the other host takes to answer the hop


@pytest.mark.parametrize("stock", [False, True])
def test_a_robots_txt_hop_to_another_host_waits_for_that_hosts_turn(redis_url, tmp_path, stock):
    """A site's robots.txt redirected to a host being crawled: the hop takes a turn of that
    host's pace, between its pages, not on top of them nor after them all (a stock worker
    releases a host's next URL as the one before ends: the hop holds the slot it waits for)."""
    tree = tree_site(12)

    def other(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/a-rules.txt":
            time.sleep(HOP_ANSWER)
            reply(req, 200, b"User-agent: *\nDisallow: /private\n", ctype="text/plain")
        else:
            tree(req)

    with HTTPSite(other, host="127.0.0.3", max_requests=40, max_seconds=90) as b:

        def first(req: BaseHTTPRequestHandler) -> None:
            if req.path == "/robots.txt":
                reply(req, 302, b"", headers={"Location": f"{b.base}/a-rules.txt"})
            else:
                reply(req, 200, b"<title>a</title>")

        with HTTPSite(first, host="127.0.0.2", max_requests=20, max_seconds=90) as a:
            conf = str(scope(tmp_path, a, b))
            seed_local(redis_url, a.base + "/", "crosshop", 3, b.base + "/0", "--delay", "0.6",
                       "--config", conf)  # fmt: skip
            kind = {"worker_class": None} if stock else {}  # None: a stock forking `rq worker`
            with LocalWorkers(redis_url, 2 if stock else 1, **kind):
                wait_finished(redis_url, "crosshop")
    assert a.hits["/"] == 1 and b.hits["/a-rules.txt"] == 1
    assert min(gaps(b)) >= 0.6, sorted(b.log)  # the hop too, a delay from the pages
    paths = [p for _, p in sorted(b.log)]
    assert paths.index("/a-rules.txt") < len(paths) - 3, paths  # not starved by the pages
    hop = paths.index("/a-rules.txt")
    after_hop = sorted(b.log)[hop + 1][0] - sorted(b.log)[hop][0]
    assert after_hop >= HOP_ANSWER + 0.6, sorted(b.log)  # a delay from its end, as a page's
