"""End to end: `rqcrawl seed`, two real `rq worker crawl` processes, status, export."""

from __future__ import annotations

import csv
from urllib.parse import urlsplit

from helpers import read_jsonl, rqcrawl, seed_local, wait_finished, worker_names
from rq import Worker
from servers import HTTPSite
from testsite import Site

from rqcrawl.parse.urls import canonicalize
from rqcrawl.workers.runner import LocalWorkers


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def test_two_workers_fetch_exactly_the_pages_within_depth(redis_url, conn, tmp_path):
    # Page 1 is slow: its children are found late, so a naive crawler would first meet some
    # of them along longer paths.
    site = Site(pages=60, slow={1: 0.4, 4: 0.2})
    max_depth = 3
    with HTTPSite(site.handle, max_requests=500, max_seconds=180) as http:
        seeded = seed_local(redis_url, http.base + "/p0.html", "e2e", max_depth, "--sitemaps")
        assert "e2e" in seeded.stdout
        with LocalWorkers(redis_url, 2, worker_class=None, log_dir=tmp_path) as workers:
            final = wait_finished(redis_url, "e2e")
            counts = {w.name: w.successful_job_count for w in Worker.all(connection=conn)}
            assert set(counts) == set(worker_names(conn, workers))
            assert all(n > 0 for n in counts.values()), counts

    expected = site.expected(max_depth)
    canonical = {path_of(canonicalize(http.base + p)): d for p, d in expected.items()}

    # robots.txt once for the whole crawl (it is shared in Redis); no URL requested twice,
    # nothing beyond the depth requested at all.
    assert http.hits.pop("/robots.txt") == 1
    assert "/sitemap.xml" not in http.hits  # not probed: robots.txt names the sitemaps
    assert all(n == 1 for n in http.hits.values()), http.hits
    assert {path_of(canonicalize(http.base + p)) for p in http.hits} == set(canonical)

    out = tmp_path / "pages.jsonl"
    rqcrawl(redis_url, "export", "e2e", "-o", str(out))
    rows = read_jsonl(out)
    assert len(rows) == len(canonical)
    assert {path_of(r["url"]): r["depth"] for r in rows} == canonical
    missing = [r for r in rows if "/missing" in r["url"]]
    assert missing and all(r["status"] == 404 and r["outcome"] == "failed" for r in missing)
    fetched = [r for r in rows if r["outcome"] == "fetched"]
    assert all(r["title"].startswith("Page ") and r["status"] == 200 for r in fetched)

    assert final["fetched"] == len(fetched)
    assert final["failed"] == len(missing)
    assert final["admitted"] == len(canonical)
    assert final["links_dropped"]["out_of_scope"] > 0  # the external host, never requested

    csv_out = tmp_path / "pages.csv"
    rqcrawl(redis_url, "export", "e2e", "-o", str(csv_out), "--format", "csv")
    with open(csv_out, newline="") as fh:
        assert len(list(csv.DictReader(fh))) == len(canonical)
