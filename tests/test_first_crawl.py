"""A newcomer's first `rqcrawl crawl` explains itself: when no seed could be crawled, each
seed's reason and what would change it are on screen, and the command fails. Offline: the
seeds are a name that cannot resolve and a loopback server without --allow-private."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from helpers import BIN, read_jsonl
from servers import HTTPSite
from testsite import Site


def first_crawl(url: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """`rqcrawl crawl URL -o out.jsonl` as typed: the embedded Redis, default settings."""
    unset = ("RQ_REDIS_URL", "REDIS_URL")
    proxies = ("http_proxy", "https_proxy", "all_proxy")  # a name must fail to resolve here
    env = {k: v for k, v in os.environ.items() if k not in unset and k.lower() not in proxies}
    return subprocess.run(
        [str(BIN / "rqcrawl"), "crawl", url, "-o", str(tmp_path / "out.jsonl"),
         "--data-dir", str(tmp_path / "data")],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_an_unresolvable_seed_says_why_and_fails(tmp_path):
    url = "http://no-such-host.invalid/"
    proc = first_crawl(url, tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert f"{url}: failed: " in proc.stderr
    assert "its host name does not resolve" in proc.stderr
    assert "no seed could be crawled" in proc.stderr.splitlines()[-1]
    assert "Traceback" not in proc.stderr
    # the export is written all the same, with the reason in it
    assert [r["url"] for r in read_jsonl(tmp_path / "out.jsonl")] == [url]


def test_a_private_seed_names_the_flag_and_fails(tmp_path):
    with HTTPSite(Site(pages=3).handle) as http:
        url = http.base + "/p0.html"
        proc = first_crawl(url, tmp_path)
        requests = len(http.log)
    assert proc.returncode == 1, proc.stderr
    assert f"{url}: refused_address: refused address 127.0.0.1 (loopback)" in proc.stderr
    assert "add --allow-private" in proc.stderr
    assert requests == 0  # refused before any connection
