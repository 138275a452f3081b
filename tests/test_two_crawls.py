"""Two crawls of two sites in one Redis, run by the same two workers, stay apart: each has
its own dedup, depth limit, counters and records."""

from __future__ import annotations

from contextlib import ExitStack

from helpers import read_jsonl, rqcrawl, seed_local, wait_finished
from servers import HTTPSite
from test_crawl_e2e import path_of
from testsite import Site

from rqcrawl.frontier import configs, keys
from rqcrawl.frontier.bloom import BloomFilter
from rqcrawl.parse.urls import canonicalize
from rqcrawl.workers.runner import LocalWorkers


def test_two_crawls_on_the_same_workers_share_nothing(redis_url, conn, tmp_path):
    # Different link graphs and depths, so that mixed-up counters could not match by chance.
    plan = {
        "alpha": (Site(pages=30, seed=1), "127.0.0.2", 2),
        "beta": (Site(pages=45, seed=2), "127.0.0.3", 3),
    }
    with ExitStack() as stack:
        http = {
            name: stack.enter_context(
                HTTPSite(site.handle, host=host, max_requests=400, max_seconds=180)
            )
            for name, (site, host, _) in plan.items()
        }
        for name, (_, _, depth) in plan.items():
            seed_local(redis_url, http[name].base + "/p0.html", name, depth)
        with LocalWorkers(redis_url, 2, log_dir=tmp_path):
            final = {name: wait_finished(redis_url, name) for name in plan}

    urls = {}
    for name, (site, host, depth) in plan.items():
        server = http[name]
        assert server.host == host
        expected = {
            path_of(canonicalize(server.base + p)): d for p, d in site.expected(depth).items()
        }
        assert server.hits.pop("/robots.txt") == 1  # its own crawl's robots.txt cache
        assert all(n == 1 for n in server.hits.values()), server.hits
        assert {path_of(canonicalize(server.base + p)) for p in server.hits} == set(expected)

        out = tmp_path / f"{name}.jsonl"
        rqcrawl(redis_url, "export", name, "-o", str(out))
        rows = read_jsonl(out)
        assert all(r["url"].startswith(server.base + "/") for r in rows)
        assert {path_of(r["url"]): r["depth"] for r in rows} == expected
        assert len(rows) == len(expected)

        s = final[name]
        assert s["admitted"] == len(expected)
        assert s["fetched"] + s["failed"] + s["skipped_total"] == len(expected)
        assert s["fetched"] == sum(r["outcome"] == "fetched" for r in rows)
        urls[name] = [r["url"] for r in rows]

    # Each crawl's Bloom filter holds its own URLs and none of the other's.
    for name, other in (("alpha", "beta"), ("beta", "alpha")):
        cfg = configs.load(conn, name)
        bloom = BloomFilter(
            conn, keys.CrawlKeys(name).bloom, cfg.bloom_capacity, cfg.bloom_error_rate
        )
        assert all(bloom.contains_many(urls[name]))
        assert not any(bloom.contains_many(urls[other]))
