"""--max-host-share end to end: a big host next to a small one keeps at most its share of the
crawl's admitted URLs once 100 were admitted, and every URL it was refused is in the export."""

from __future__ import annotations

from urllib.parse import urlsplit

from helpers import read_jsonl, rqcrawl, seed_local, status, wait_finished
from servers import HTTPSite
from testsite import Site

from rqcrawl.workers.runner import LocalWorkers

SHARE = 0.5


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def test_a_big_host_keeps_its_share_and_its_refused_urls_are_recorded(redis_url, tmp_path):
    with (
        HTTPSite(Site(pages=300).handle, host="127.0.0.2", max_seconds=180) as big,
        HTTPSite(Site(pages=30).handle, host="127.0.0.3", max_seconds=180) as small,
    ):
        seed_local(
            redis_url, big.base + "/p0.html", "share", 20, small.base + "/p0.html",
            "--max-host-share", str(SHARE), "--no-robots",
        )  # fmt: skip
        with LocalWorkers(redis_url, 2):
            final = wait_finished(redis_url, "share")
    admitted = {h["host"]: h["admitted"] for h in status(redis_url, "share")["hosts"]}
    big_host, small_host = (urlsplit(s.base).netloc for s in (big, small))
    total = final["admitted"]
    assert admitted[big_host] <= max(100, SHARE * total), (admitted, total)
    assert admitted[small_host] == total - admitted[big_host]
    assert sum(small.hits.values()) == admitted[small_host]  # the small site is crawled whole

    out = tmp_path / "share.jsonl"
    rqcrawl(redis_url, "export", "share", "-o", str(out))
    refused = [r["url"] for r in read_jsonl(out) if r["outcome"] == "max_host_share"]
    assert len(refused) == len(set(refused)) == final["skipped"]["max_host_share"] > 0
    assert all(urlsplit(u).netloc == big_host for u in refused)
    assert not {path_of(u) for u in refused} & set(big.hits)  # never requested
    assert sum(big.hits.values()) == admitted[big_host]
