"""What a site owner sees of a crawl at default settings: who is asking (the User-Agent and the
operator's contact), and no request for /sitemap.xml unless asked."""

from __future__ import annotations

import threading

import pytest
from helpers import rqcrawl, seed_local, status, wait_finished
from servers import HTTPSite, reply

from rqcrawl.workers.runner import LocalWorkers


class Logged:
    """A one-page site that notes each request's path and User-Agent."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def handle(self, req) -> None:
        with self.lock:
            self.seen.append((req.path, req.headers.get("User-Agent", "")))
        if req.path == "/":
            reply(req, 200, b"<html><title>one</title></html>")
        else:
            reply(req, 404, b"no")


@pytest.mark.parametrize(
    "flags, agent",
    [
        ((), "rqcrawl/0.1.0 (+https://pypi.org/project/rqcrawl/)"),
        (("--contact", "mailto:ops@example.org"), "rqcrawl/0.1.0 (+mailto:ops@example.org)"),
        (("--user-agent", "ExampleBot/2.0 (+https://example.org/bot)"),
         "ExampleBot/2.0 (+https://example.org/bot)"),
    ],
)  # fmt: skip
def test_every_request_names_rqcrawl_and_the_operator_or_the_agent_given(redis_url, flags, agent):
    site = Logged()
    with HTTPSite(site.handle, max_requests=20, max_seconds=60) as http:
        seed_local(redis_url, http.base + "/", "ua", 1, "--sitemaps", *flags)
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "ua")
    assert [path for path, _ in site.seen] == ["/robots.txt", "/"]  # no /sitemap.xml probe
    assert {ua for _, ua in site.seen} == {agent}


def test_status_says_at_once_that_no_worker_serves_the_crawl(redis_url):
    """Right after `rqcrawl seed` with no worker running: a fact, not a stall to wait for."""
    seed_local(redis_url, "http://127.0.0.2:9/", "alone", 1)
    s = status(redis_url, "alone")
    assert s["stall"]["reason"] == "no_worker" and s["eta_s"] is None, s
    shown = rqcrawl(redis_url, "status", "alone").stdout
    assert "nothing serves them" in shown and "rq worker crawl" in shown, shown
