"""Long-lived CrawlWorkers keep serving: the release thread outlives a broken crawl, and an
idle worker takes new work at once (its blocking dequeue never times out on the socket)."""

from __future__ import annotations

import threading
import time

from rq import Queue

from rqcrawl import config, keys
from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import Frontier, InFlight
from rqcrawl.worker import Tender


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def deferred_crawl(conn, name: str, url: str) -> Frontier:
    """A crawl whose only URL waits in `later`, due in 0.2 s."""
    cfg = CrawlConfig(scope_hosts=["example.test"])
    config.save(conn, name, cfg)
    frontier = Frontier(conn, name, cfg)
    frontier.seed([url])
    entry = InFlight.parse(conn.hget(frontier.inflight, url))
    assert frontier.defer(url, entry, time.time() + 0.2)
    return frontier


def test_tender_outlives_a_crawl_it_cannot_read(conn):
    # A crawl whose stored config no longer loads (here: a setting this version does not
    # know), with a URL in flight so that the tender looks at it on every pass.
    conn.set(keys.key("broken", "config"), '{"no_such_setting": 1}')
    conn.sadd(keys.CRAWLS, "broken")
    conn.hset(keys.key("broken", "inflight"), "http://example.test/x", "0 0.0 0 0")
    tender = Tender(conn)
    stop = threading.Event()
    thread = threading.Thread(target=tender.run, args=(stop,), daemon=True)
    thread.start()
    try:
        # Both orders: a broken crawl sorted before and after the good one.
        for name in ("a-good", "z-good"):
            frontier = deferred_crawl(conn, name, "http://example.test/")
            tender.refreshed = 0.0  # read the set of crawls again now
            wait_for(lambda f=frontier: conn.zcard(f.later) == 0, 10, f"{name} never released")
            assert thread.is_alive()
    finally:
        stop.set()
        thread.join(5)
    assert Queue(keys.QUEUE_NAME, connection=conn).count == 4  # per crawl: seeded, released
