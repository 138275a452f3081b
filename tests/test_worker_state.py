"""What a long-lived worker keeps per crawl stays bounded, and a purged crawl's name can be
used again by the same running workers with new settings."""

from __future__ import annotations

from helpers import read_jsonl, rqcrawl, seed_local, wait_finished
from servers import HTTPSite
from test_crawl_e2e import path_of
from testsite import Site

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch import warc
from rqcrawl.fetch.robots import Robots, RobotsCache
from rqcrawl.frontier import configs
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.redisurl import server_key
from rqcrawl.workers import crawls
from rqcrawl.workers.runner import LocalWorkers


def test_a_purged_crawl_name_serves_a_new_crawl_with_its_own_settings(redis_url, tmp_path):
    site = Site(pages=40)
    with HTTPSite(site.handle, max_requests=400, max_seconds=180) as http:
        with LocalWorkers(redis_url, 1, log_dir=tmp_path):
            seed_local(redis_url, http.base + "/p0.html", "again", 1)
            wait_finished(redis_url, "again")
            rqcrawl(redis_url, "purge", "again")
            # Same name, same seed, one level deeper: the workers must not keep using the
            # first crawl's settings (max_depth 1) nor its memory of links already admitted.
            seed_local(redis_url, http.base + "/p0.html", "again", 2)
            final = wait_finished(redis_url, "again")
    out = tmp_path / "again.jsonl"
    rqcrawl(redis_url, "export", "again", "-o", str(out))
    want = {path_of(p) for p in site.expected(2)}
    assert {path_of(r["url"]) for r in read_jsonl(out)} == want
    assert final["admitted"] == len(want) and final["max_depth"] == 2


def test_per_crawl_caches_of_a_worker_process_are_bounded(conn, tmp_path):
    names = [f"c{i}" for i in range(crawls.CRAWLS_KEPT + 5)]
    for name in names:
        configs.save(conn, name, CrawlConfig(warc_dir=str(tmp_path / "warc")))
    for name in names:
        assert crawls.crawl_of(conn, name) is not None
    assert len(crawls._crawls) <= crawls.CRAWLS_KEPT
    assert len(configs._cache) <= configs.CONFIGS_KEPT
    # The crawl met last is kept, the first one was dropped (least recently used).
    kept = [crawls._crawls.get((server_key(conn), name)) for name in (names[-1], names[0])]
    assert kept[0] is not None and kept[1] is None


def test_robots_verdicts_kept_per_crawl_are_bounded(conn):
    cache = RobotsCache(conn, CrawlKeys("r"), CrawlConfig())
    sites = [f"http://s{i}.test" for i in range(RobotsCache.SITES_KEPT + 10)]
    for site in sites:
        conn.hset(cache.key, site, '{"kind": "allow", "expires": 9e99}')
        assert cache.get(site) == Robots("allow", 9e99)
    assert len(cache._local) <= RobotsCache.SITES_KEPT


def test_warc_files_of_many_crawls_are_closed_when_evicted(tmp_path):
    cfg = CrawlConfig(warc_dir=str(tmp_path))
    opened = []
    for i in range(warc.FILES_KEPT + 3):
        warc.archive(f"w{i}", cfg, "worker")
        files = warc._open_files.get((f"w{i}", str(tmp_path), "worker"))
        files._open()  # as the first archived response does
        opened.append(files)
    assert len(warc._open_files) == warc.FILES_KEPT
    assert [f._file is None for f in opened] == [True] * 3 + [False] * warc.FILES_KEPT
