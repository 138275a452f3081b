"""A shard behind Redis Sentinel survives its primary's failover: a real primary, replica and
sentinel on loopback, a crawl over that shard and a plain one, SENTINEL FAILOVER midway, and
the crawl still finishes with every URL recorded once at its depth (pages that the old
primary had acknowledged in the instant of the switch are fetched again: see the test)."""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack

import pytest
import redis
from helpers import rqcrawl, status, wait_finished, wait_until
from servers import RedisServer, SentinelServer
from test_shards import HOSTS, PAGES, Web, seed_sharded, start_sites

from rqcrawl import api
from rqcrawl.frontier.shards import shard_map
from rqcrawl.parse.urls import host_of
from rqcrawl.redisurl import client, sentinel_settings
from rqcrawl.workers.runner import LocalWorkers


@pytest.fixture
def sentinel(tmp_path):
    """A primary, its replica and a sentinel that knows both (it finds a replica through
    the primary's INFO, every 10 s: a failover before that has no replica to promote)."""
    with ExitStack() as stack:
        primary = RedisServer(tmp_path / "primary").start()
        stack.callback(primary.stop)
        replica = RedisServer(
            tmp_path / "replica", extra=("--replicaof", "127.0.0.1", str(primary.port))
        ).start()
        stack.callback(replica.stop)
        watcher = SentinelServer(tmp_path / "sentinel", primary, "shard0").start()
        stack.callback(watcher.stop)
        with redis.Redis(port=watcher.port, decode_responses=True) as conn:
            wait_until(lambda: conn.sentinel_master("shard0")["num-slaves"] == 1, 30,
                       "the sentinel to know the replica")  # fmt: skip
        yield watcher, primary, replica


def failover(watcher: SentinelServer) -> None:
    """SENTINEL FAILOVER, retried while the sentinel has no fresh view of the replica."""
    with redis.Redis(port=watcher.port) as conn:
        wait_until(lambda: conn.execute_command("SENTINEL", "FAILOVER", "shard0"), 30,
                   "the failover to start", ignoring=(redis.ResponseError,))  # fmt: skip


def test_a_sentinel_url_is_checked_in_one_line():
    assert sentinel_settings("redis+sentinel://:pw@a:26379,b:26380/main/2") == (
        [("a", 26379), ("b", 26380)], {"name": "main", "db": 2}, {"password": "pw"})  # fmt: skip
    bad = rqcrawl("redis://127.0.0.1:1/0", "seed", "http://127.0.0.1:9/", "--shards",
                  "redis+sentinel://a/main,redis://b/0", check=False)  # fmt: skip
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "bad Redis URL 'redis+sentinel://a/main': a sentinel must be host:port" in bad.stderr


def test_a_shard_survives_its_primarys_failover(sentinel, second_redis_url, tmp_path):
    watcher, primary, replica = sentinel
    urls = [watcher.url, second_redis_url]
    web = Web(slow={(h, i): 0.2 for h in range(HOSTS) for i in range(PAGES)})
    max_depth = 4
    with ExitStack() as stack:
        sites = start_sites(stack, web, max_seconds=240)
        seed_sharded(urls, web, tmp_path, max_depth)
        stack.enter_context(LocalWorkers(urls, 1, log_dir=tmp_path / "workers"))
        shard0 = client(watcher.url)
        wait_until(lambda: status(urls[1], "sh")["fetched"] >= 6, 60, "a few pages fetched")
        assert shard0.connection_pool.get_master_address() == ("127.0.0.1", primary.port)
        failover(watcher)
        wait_until(shard0.connection_pool.get_master_address, 30, "the replica promoted",
                   accept=lambda a: a == ("127.0.0.1", replica.port))  # fmt: skip
        final = wait_finished(urls[0], "sh", timeout=180)  # through the sentinel
    want = web.expected(max_depth)
    rows = list(api.records(shard0, "sh"))
    assert Counter(r["url"] for r in rows) == Counter(want.keys()), "each URL recorded once"
    assert {r["url"]: r["depth"] for r in rows} == want
    assert final["fetched"] == final["admitted"] == len(want)
    assert status(urls[1], "sh")["state"] == "finished"
    # Replication is asynchronous: what the old primary acknowledged between the promotion
    # of its replica and its own demotion is lost (Redis Sentinel's documented window), so
    # the pages that shard 0 finished then are fetched again, and recorded once. Shard 1,
    # which did not fail over, fetched each of its pages once.
    placement = shard_map(api.crawl_config(shard0, "sh"))
    again = [s.base + p for s in sites for p, n in s.hits.items() if n > 1 and p != "/robots.txt"]
    assert all(placement.index_of(host_of(url)) == 0 for url in again), again
