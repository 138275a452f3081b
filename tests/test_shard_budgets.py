"""max_pages and max_host_share hold for a whole crawl over several shards, not per shard:
each shard admits only the pages it took, a block at a time, from the crawl's first shard,
and a host's share is of every shard's admitted URLs."""

from __future__ import annotations

import random
from collections import Counter
from contextlib import ExitStack

import redis
from test_shards import HOSTS, Web, finished_untouched, records_of, seed_sharded, start_sites

from rqcrawl.config import CrawlConfig
from rqcrawl.defaults import PAGE_BLOCK
from rqcrawl.frontier import keys, shards
from rqcrawl.frontier.state import CrawlState
from rqcrawl.ops import control
from rqcrawl.workers.runner import LocalWorkers

PAGES = 80  # per host: 320 in all, over 100 on each shard whichever way the hash falls


class BigWeb(Web):
    """test_shards.Web with PAGES pages per host."""

    def __init__(self, seed: int = 7):
        rnd = random.Random(seed)
        self.slow = {}
        self.bases: list[str] = []
        self.links: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for h in range(HOSTS):
            for i in range(PAGES):
                tree = [(h, c) for c in (2 * i + 1, 2 * i + 2) if c < PAGES]
                cross = [((h + rnd.randrange(1, HOSTS)) % HOSTS, rnd.randrange(PAGES))
                         for _ in range(2)]  # fmt: skip
                self.links[(h, i)] = tree + cross


def test_max_pages_holds_over_two_shards(redis_url, second_redis_url, tmp_path):
    urls = [redis_url, second_redis_url]
    web = BigWeb()
    with ExitStack() as stack:
        sites = start_sites(stack, web, max_seconds=240)
        seed_sharded(urls, web, tmp_path, 20, "--max-pages", "100")
        for n, url in enumerate(urls):
            stack.enter_context(LocalWorkers(url, 2, log_dir=tmp_path / f"shard{n}"))
        s = finished_untouched(urls[0], timeout=180)
    per_shard = []
    for url in urls:
        with redis.Redis.from_url(url) as conn:
            per_shard.append(int(conn.hget(keys.CrawlKeys("sh").counters, keys.ADMITTED)))
    rows = records_of(urls[0])
    fetched = [r["url"] for r in rows if r["outcome"] == "fetched"]
    refused = [r for r in rows if r["outcome"] == "max_pages"]
    requested = sum(n for site in sites for p, n in site.hits.items() if p != "/robots.txt")
    # Every shard had more than 100 URLs to admit: both took pages.
    assert all(n > 0 for n in per_shard), per_shard
    # At most max_pages in all; fewer only by pages a shard took and found no link to spend
    # on (at most a block per shard: the documented bound).
    assert 100 - 2 * PAGE_BLOCK <= sum(per_shard) <= 100, per_shard
    assert s["admitted"] == sum(per_shard) == len(fetched) == requested
    assert Counter(fetched).most_common(1)[0][1] == 1  # each once
    assert refused and s["state"] == "finished" and s["in_flight"] == 0


def test_max_host_share_over_two_shards_counts_the_whole_crawl(redis_url, second_redis_url):
    # Ten hosts of 15 URLs each on the second shard, then one big host on the first: its
    # share is of the crawl's admitted URLs, the second shard's included (it is alone on its
    # shard, where a count of that shard's URLs would stop it at the floor, 100).
    urls = [redis_url, second_redis_url]
    rules = {"a.test": urls[0], "b*.test": urls[1]}
    settings = {"shards": urls, "shard_rules": rules, "sitemaps": False, "max_host_share": 0.5}
    cfg = CrawlConfig.from_dict(settings)
    small = [f"http://b{h}.test/{i}" for h in range(10) for i in range(15)]
    control.start(shards.connect(urls[0]), "sh", cfg, small)
    first = CrawlState(shards.connect(urls[0]), "sh", cfg)
    first.seed_step([f"http://a.test/{i}" for i in range(300)])
    with redis.Redis.from_url(urls[0]) as conn:
        big = int(conn.hget(keys.CrawlKeys("sh").host_pages, "a.test"))
    with redis.Redis.from_url(urls[1]) as conn:
        others = int(conn.hget(keys.CrawlKeys("sh").counters, keys.ADMITTED))
    assert others == 150
    assert big == 150  # half of the 300 admitted in all
