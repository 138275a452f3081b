"""What a per-IP politeness gate costs (docs/howto/politeness.md): one request's gate calls
(acquire and release, scripts.HOST_GATE and HOST_RELEASE) timed on two embedded Redis shards,
for a host's gate (on the job's shard), an address's gate on the job's shard, and an
address's gate on another shard (its home); and the resolution of a host to its address,
cached and not. Run: `python -m rqcrawl.bench.gate [REQUESTS]`.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.politeness import Politeness
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.frontier.shards import connect
from rqcrawl.workers.embedded import EmbeddedRedis

CRAWL = "gatebench"


def per_request(politeness: Politeness, host: str, n: int) -> float:
    """Microseconds per request for the gate's two calls (no delay: every acquire goes)."""
    start = time.perf_counter()
    for i in range(n):
        lease = f"job-{i}"
        assert politeness.acquire(host, lease, 0.0, booked=False) is None
        politeness.release(host, lease, 0.0, time.time())
    return (time.perf_counter() - start) / n * 1e6


def resolution(politeness: Politeness, n: int) -> tuple[float, float]:
    """Microseconds per gate key: resolved through the guard's resolver, and cached."""
    start = time.perf_counter()
    for _ in range(n):
        politeness._ips.clear()
        politeness.gate("localhost:80")
    fresh = (time.perf_counter() - start) / n * 1e6
    start = time.perf_counter()
    for _ in range(n):
        politeness.gate("localhost:80")
    return fresh, (time.perf_counter() - start) / n * 1e6


def main(n: int = 5000) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        servers = [EmbeddedRedis(Path(tmp) / str(i)).start() for i in range(2)]
        try:
            urls = [s.url for s in servers]
            own, other = (connect(u) for u in urls)
            base = CrawlConfig(delay=0.0, shards=urls, adaptive_throttle=True)
            keys = CrawlKeys(CRAWL)
            by_host = Politeness(own, keys, base)
            by_ip = CrawlConfig.from_dict({"politeness_by": "ip"}, base)
            local = Politeness(own, keys, by_ip)
            remote = Politeness(own, keys, by_ip, home=lambda key: other)
            rows = [
                ("host gate, job's shard", per_request(by_host, "a.example:80", n)),
                ("IP gate, home = job's shard", per_request(local, "localhost:80", n)),
                ("IP gate, home = another shard", per_request(remote, "localhost:80", n)),
            ]
            fresh, cached = resolution(local, min(n, 1000))
            rows += [("resolve host -> IP (getaddrinfo)", fresh), ("resolve, cached", cached)]
            for name, us in rows:
                print(f"{name:<34} {us:8.1f} us per request")
        finally:
            for s in servers:
                s.stop()


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
