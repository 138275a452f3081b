"""Connections kept: every answer, whatever was read of its body (an error's, a 304's, a
refused type's, a truncated one's), gives its connection back for the host's next request,
unless much of its body is left; judged from the servers' count of TCP connections, for
each HTTP client (the `http_client` fixture)."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace

import pytest
from helpers import seed_local, wait_finished
from servers import HTTPSite, reply

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch import clients
from rqcrawl.fetch.clients.requests_client import DRAIN_BYTES
from rqcrawl.fetch.http import FetchError, fetch
from rqcrawl.workers.runner import LocalWorkers

CFG = CrawlConfig.from_dict({"allow_private": True})
LONG = b"x" * (2 * DRAIN_BYTES)


class Counted:
    """A site's requests and TCP connections (a connection is its client's address)."""

    def __init__(self) -> None:
        self.requests = 0
        self.connections: set[tuple[str, int]] = set()
        self.lock = threading.Lock()
        self.asked: Counter[str] = Counter()

    def count(self, req) -> int:
        """Note `req`; how many times its path was asked, this one included."""
        with self.lock:
            self.requests += 1
            self.connections.add(req.client_address)
            self.asked[req.path] += 1
            return self.asked[req.path]


ANSWERS = {
    "/304": (304, b"", "text/html", {"ETag": '"v1"'}),
    "/404": (404, b"<html>not here</html>" * 50, "text/html", {}),
    "/429": (429, b"slow down", "text/plain", {"Retry-After": "1"}),
    "/503": (503, b"<html>busy</html>", "text/html", {}),
    "/pdf": (200, b"%PDF-1.4 " * 500, "application/pdf", {}),
    "/long-404": (404, LONG, "text/html", {}),
}


def answers(counted: Counted):
    def handle(req) -> None:
        counted.count(req)
        if req.path == "/truncated":  # robots.txt's cut at truncate_at: the rest is drained
            reply(req, 200, b"User-agent: *\n" + b"#" * 5000, "text/plain")
        else:
            reply(req, *ANSWERS[req.path])

    return handle


@pytest.fixture
def fresh_sessions(monkeypatch):
    """Clients made anew: no connection of another test's server is counted here."""
    monkeypatch.setattr(clients, "_clients", {})


@pytest.mark.parametrize("path", ["/304", "/404", "/429", "/503", "/pdf", "/truncated"])
def test_an_answer_whose_body_is_not_read_keeps_its_connection(fresh_sessions, http_client, path):
    counted = Counted()
    cfg = replace(CFG, http_client=http_client)
    with HTTPSite(answers(counted), max_requests=10, max_seconds=30) as site:
        for _ in range(3):
            try:
                fetch(site.base + path, cfg, lambda hop: None, truncate_at=100,
                      conditional={"If-None-Match": '"v1"'})  # fmt: skip
            except FetchError:
                pass
    assert counted.requests == 3 and len(counted.connections) == 1


def test_an_answer_with_a_long_body_left_is_closed(fresh_sessions, http_client):
    counted = Counted()
    cfg = replace(CFG, http_client=http_client)
    with HTTPSite(answers(counted), max_requests=10, max_seconds=30) as site:
        for _ in range(2):
            with pytest.raises(FetchError):
                fetch(site.base + "/long-404", cfg, lambda hop: None)
    assert counted.requests == 2 and len(counted.connections) == 2  # not read for a reuse


HOSTS = 50
PAGES = ["/a", "/b", "/c", "/d", "/e", "/old", "/gone", "/busy"]


def site_of_many(counted: Counted):
    """A host's pages: five pages, a redirect, a 404, a 503 the first time, no robots.txt."""
    links = "".join(f'<a href="{p}">{p}</a>' for p in PAGES)

    def handle(req) -> None:
        asked = counted.count(req)
        if req.path == "/":
            reply(req, 200, f"<html><body>{links}</body></html>".encode())
        elif req.path == "/old":
            reply(req, 301, b"<html>moved</html>", headers={"Location": "/new"})
        elif req.path == "/busy" and asked == 1:
            reply(req, 503, b"<html>busy</html>" * 20, headers={"Retry-After": "1"})
        elif req.path in ("/a", "/b", "/c", "/d", "/e", "/new", "/busy"):
            reply(req, 200, b"<html><title>page</title></html>")
        else:
            reply(req, 404, b"<html>not found</html>" * 20)

    return handle


def test_a_crawl_of_fifty_hosts_keeps_its_connections(redis_url, tmp_path):
    """Redirects, 404s (robots.txt's too) and 503s on each of 50 hosts: at least 4 requests
    per TCP connection over the crawl (a new connection for nearly every request before)."""
    counts = [Counted() for _ in range(HOSTS)]
    sites = [
        HTTPSite(site_of_many(c), host=f"127.0.0.{i + 2}", max_requests=100, max_seconds=120)
        for i, c in enumerate(counts)
    ]
    for site in sites:
        site.__enter__()
    try:
        seeds = [site.base + "/" for site in sites]
        seed_local(redis_url, seeds[0], "kept", 1, *seeds[1:])
        with LocalWorkers(redis_url, 1, log_dir=tmp_path):
            assert wait_finished(redis_url, "kept", 120)["failed"] == HOSTS  # the 404s
    finally:
        for site in sites:
            site.stop()
    requests = sum(c.requests for c in counts)
    connections = sum(len(c.connections) for c in counts)
    assert requests == HOSTS * 12  # robots.txt, /, 5 pages, /old, /new, /gone, /busy twice
    print(f"{requests} requests over {connections} connections")
    assert requests / connections >= 4, (requests, connections)
