"""Cookies are kept per crawl and per host, within a cap: a site that sets a new cookie on
every page cannot grow the Cookie header without bound, and two crawls served by the same
worker never see each other's cookies."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

from helpers import seed_local, wait_finished
from servers import HTTPSite, reply

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch import cookies
from rqcrawl.fetch.cookies import Cookies
from rqcrawl.fetch.http import fetch
from rqcrawl.workers.runner import LocalWorkers

PAGES = 40  # pages per crawl, each setting a new 200-byte cookie: 8 KB if nothing is capped
CAP = 4096  # the default max_cookie_bytes_per_host


def flooding(sent: list[tuple[str, str]]):
    """A site whose every page /X/N sets a new cookie; /X/0 also sets `crawl=X` and links
    to the others. `sent` receives (path, Cookie header) of every request."""

    def handle(req: BaseHTTPRequestHandler) -> None:
        sent.append((req.path, req.headers.get("Cookie", "")))
        if req.path == "/robots.txt":
            reply(req, 404, b"")
            return
        crawl, n = req.path.strip("/").split("/")
        cookies = [f"{crawl}{n}={'v' * 200}; Path=/"]
        links = ""
        if n == "0":
            cookies.append(f"crawl={crawl}; Path=/")
            links = "".join(f'<a href="/{crawl}/{i}">{i}</a>' for i in range(1, PAGES))
        req.send_response(200)
        for cookie in cookies:
            req.send_header("Set-Cookie", cookie)
        body = f"<title>{req.path}</title>{links}".encode()
        req.send_header("Content-Type", "text/html")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    return handle


def test_cookies_are_per_crawl_and_capped(redis_url, tmp_path):
    sent: list[tuple[str, str]] = []
    with HTTPSite(flooding(sent), max_requests=200, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/a/0", "a", 1)
        seed_local(redis_url, http.base + "/b/0", "b", 1)
        with LocalWorkers(redis_url, 1, log_dir=tmp_path):
            wait_finished(redis_url, "a")
            wait_finished(redis_url, "b")
    pages = [(path, cookie) for path, cookie in sent if path != "/robots.txt"]
    assert len(pages) == 2 * PAGES
    for path, cookie in pages:
        crawl = path.split("/")[1]
        other = "b" if crawl == "a" else "a"
        assert f"crawl={other}" not in cookie and f"{other}0=" not in cookie, (path, cookie)
        if not path.endswith("/0"):
            assert f"crawl={crawl}" in cookie, (path, cookie)  # cookies are kept at all
        assert len(cookie) <= CAP, (path, len(cookie))
    assert max(len(cookie) for _, cookie in pages) > CAP // 2  # the cap, not a lack of pages


def test_a_long_lived_worker_keeps_a_bounded_number_of_jars():
    cfg = CrawlConfig()
    crawls = [Cookies(cfg) for _ in range(cookies.MAX_JARS + 50)]
    for c in crawls:
        c.header("http://example.org/")
    assert len(cookies._jars) == cookies.MAX_JARS
    assert Cookies(CrawlConfig.from_dict({"cookies": False})).header("http://example.org/") is None


def test_a_cookie_the_site_deletes_is_no_longer_sent():
    seen: list[str] = []

    def handle(req: BaseHTTPRequestHandler) -> None:
        seen.append(req.headers.get("Cookie", ""))
        cookie = {"/set": "a=1; Path=/", "/delete": "a=; Max-Age=0; Path=/"}.get(req.path)
        reply(req, 200, b"<title>x</title>", headers={"Set-Cookie": cookie} if cookie else {})

    cfg = CrawlConfig.from_dict({"allow_private": True})
    jar = Cookies(cfg)
    with HTTPSite(handle, max_requests=10, max_seconds=30) as http:
        for path in ("/set", "/check", "/delete", "/check"):
            fetch(http.base + path, cfg, lambda hop: None, cookies=jar)
    assert seen == ["", "a=1", "a=1", ""]
