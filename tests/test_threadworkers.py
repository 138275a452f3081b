"""Several RQ workers in the threads of one process crawl exactly the expected pages, each
once, overlap their requests, and stop on SIGTERM after their current job."""

from __future__ import annotations

import socket
import threading
from urllib.parse import urlsplit

from helpers import seed_local, wait_finished
from rq import Worker
from servers import HTTPSite
from testsite import Site

from rqcrawl.parse.urls import canonicalize
from rqcrawl.workers import slot_name
from rqcrawl.workers.runner import LocalWorkers


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


class Concurrency:
    """Wraps a request handler and remembers the most requests it served at once."""

    def __init__(self, handle):
        self.handle, self.now, self.most = handle, 0, 0
        self.lock = threading.Lock()

    def __call__(self, req) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            self.handle(req)
        finally:
            with self.lock:
                self.now -= 1


def test_one_process_of_four_slots_crawls_exactly_the_site(redis_url, conn):
    site = Site(pages=40, slow={i: 0.2 for i in range(40)})
    expected = site.expected(3)
    handler = Concurrency(site.handle)
    with HTTPSite(handler, max_requests=400, max_seconds=200) as http:
        seed_local(redis_url, http.base + "/p0.html", "t", 3, "--host-concurrency", "4")
        with LocalWorkers(redis_url, 1, threads=4) as pool:
            final = wait_finished(redis_url, "t", timeout=120)
            names = sorted(w.name for w in Worker.all(connection=conn))
            host, pid = socket.gethostname(), pool.procs[0].pid
            first = f"{host}:{pid}"  # where each runs: the process's first slot, then its others
            assert names == [first] + [slot_name(first, i) for i in range(1, 4)]
        assert pool.procs[0].returncode == 0  # a warm stop, not a kill
    assert http.hits.pop("/robots.txt") == 1
    assert all(n == 1 for n in http.hits.values()), http.hits
    canonical = {path_of(canonicalize(http.base + p)) for p in expected}
    assert {path_of(canonicalize(http.base + p)) for p in http.hits} == canonical
    assert final["admitted"] == len(expected)
    assert handler.most > 1  # the threads had requests in flight together
    assert Worker.count(connection=conn) == 0  # each thread's worker was unregistered
