"""Recommended workers ride out a Redis crash and restart (AOF, as the README advises): they
wait, reconnect within seconds of Redis coming back and finish the crawl exactly."""

from __future__ import annotations

import time

import pytest
import redis
from helpers import read_jsonl, rqcrawl, seed_local, wait_finished, wait_until, worker_names
from rq import Worker
from servers import HTTPSite, RedisServer
from test_crash import expected_paths, path_of
from testsite import Site

from rqcrawl.defaults import HEARTBEAT_EVERY
from rqcrawl.parse.urls import canonicalize
from rqcrawl.workers.runner import LocalWorkers


def beat_since(conn: redis.Redis, name: str, since: float) -> bool:
    """Whether worker `name` sent a heartbeat (or started a job) after `since`."""
    worker = Worker.find_by_key(Worker.redis_worker_namespace_prefix + name, connection=conn)
    return worker is not None and worker.last_heartbeat.timestamp() > since


@pytest.mark.parametrize(
    "outage",
    [
        3.0,  # a restart: the workers' commands retry until Redis is back
        35.0,  # a long failover, past REDIS_RETRY_FOR: the workers wait for Redis
    ],
)
def test_workers_ride_out_a_redis_crash_and_restart(tmp_path, outage):
    site = Site(pages=60, slow={i: 0.1 for i in range(60)})
    want = expected_paths(site, 3)
    server = RedisServer(tmp_path / "aof", aof=True).start()
    try:
        with HTTPSite(site.handle, max_requests=400, max_seconds=300) as http:
            base = http.base
            seed_local(server.url, base + "/p0.html", "rs", 3, "--host-concurrency", "2")
            with LocalWorkers(server.url, 2, log_dir=tmp_path) as workers:
                conn = redis.Redis.from_url(server.url)
                names = worker_names(conn, workers)
                wait_until(lambda: sum(http.hits.values()) >= 12, 60, "12 pages requested")
                server.proc.kill()  # SIGKILL: no chance to write anything out
                server.proc.wait()
                killed_at = time.time()
                time.sleep(outage)  # the behaviour under test: the outage itself
                server.start()  # same port, same directory: the append-only file is read
                restarted_at = time.time()
                wait_until(  # every slot back: its heartbeat, sent every HEARTBEAT_EVERY
                    lambda: all(beat_since(conn, n, restarted_at) for n in names),
                    HEARTBEAT_EVERY + 5,
                    "every worker's heartbeat after the restart",
                )
                s = wait_finished(server.url, "rs", timeout=180)
                alive = [p.poll() is None for p in workers.procs]
                logs = [p.read_text() for p in sorted(tmp_path.glob("*.log"))]
            out = tmp_path / "rs.jsonl"
            rqcrawl(server.url, "export", "rs", "-o", str(out))
    finally:
        server.stop()
    assert alive == [True, True], logs
    rows = read_jsonl(out)
    assert sorted(path_of(r["url"]) for r in rows) == sorted(want)  # each recorded once
    assert s["admitted"] == len(want) and s["in_flight"] == 0
    # The workers were back at work within seconds of the restart.
    after = sorted(t for t, _ in http.log if t > restarted_at)
    assert after and after[0] - restarted_at < 5, after[:1]
    # Refetched: only what the last writes before the crash or the requests in progress at
    # the crash can explain. AOF fsyncs every second, and postpones it up to 2 s more while
    # the disk is busy; a page's end is written after its request arrived, later still on a
    # loaded machine (a clean-clone suite run refetched a page requested more than 1.5 s
    # before the crash).
    explained = {p for t, p in http.log if killed_at - 3.5 <= t <= killed_at}
    refetched = {p for p, n in http.hits.items() if n > 1}
    assert refetched <= explained | {"/robots.txt"}, (refetched, explained)
    assert {path_of(canonicalize(base + p)) for p in http.hits} - {"/robots.txt"} == want
