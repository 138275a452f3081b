"""A newcomer's first `rqcrawl crawl` explains itself: when no seed could be crawled, each
seed's reason and what would change it are on screen, and the command fails. Offline: the
seeds are a name that cannot resolve and a loopback server without --allow-private."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import redis
from helpers import BIN, read_jsonl
from servers import HTTPSite
from testsite import Site

from rqcrawl.demo import DemoSite
from rqcrawl.workers.embedded import EmbeddedRedis


def typed(*args: str) -> subprocess.CompletedProcess:
    """`rqcrawl ARGS` as typed: no Redis URL configured, no proxy."""
    unset = ("RQ_REDIS_URL", "REDIS_URL")
    proxies = ("http_proxy", "https_proxy", "all_proxy")  # a name must fail to resolve here
    env = {k: v for k, v in os.environ.items() if k not in unset and k.lower() not in proxies}
    return subprocess.run(
        [str(BIN / "rqcrawl"), *args], env=env, capture_output=True, text=True, timeout=120
    )


def first_crawl(url: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """`rqcrawl crawl URL -o out.jsonl` as typed: the embedded Redis, default settings."""
    return typed(
        "crawl", url, "-o", str(tmp_path / "out.jsonl"), "--data-dir", str(tmp_path / "data")
    )


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


def test_after_a_crawl_its_commands_open_its_embedded_redis_from_its_data_dir(tmp_path):
    """`crawl` stops its embedded Redis at its end; `status`, `failures`, `inspect` and
    `export` of the crawl open it from --data-dir and stop it again. Its summary says why
    URLs were skipped, its status the pace of its last minute and that every depth is done,
    and an export after the crawl's own (-o) says how many records went where."""
    data, out = tmp_path / "data", tmp_path / "out.jsonl"
    site = DemoSite().start()
    try:
        crawl = typed(
            "crawl", *site.urls, "-o", str(out), "--data-dir", str(data), "--crawl", "front",
            "--allow-private", "--delay", "0",
        )  # fmt: skip
    finally:
        site.stop()
    assert crawl.returncode == 0, crawl.stderr
    assert re.search(r"crawl front finished: \d+ fetched, 0 failed, 1 skipped "
                     r"\(robots_disallowed 1\) in ", crawl.stderr), crawl.stderr  # fmt: skip
    shown = typed("status", "front", "--data-dir", str(data))
    assert shown.returncode == 0, shown.stderr
    assert "crawl      front: finished" in shown.stdout
    recent = re.search(r", ([\d.]+) pages/s in its last 60 s", shown.stdout)
    assert recent and float(recent[1]) > 0, shown.stdout
    assert "level      every depth done, 0 to max depth 2;" in shown.stdout, shown.stdout

    records = len(read_jsonl(out))
    delivered = f"({records} to {os.uname().nodename}:{out}) left Redis and are not"
    failures = typed("failures", "front", "--data-dir", str(data))
    assert failures.returncode == 0 and delivered in failures.stderr, failures.stderr
    assert "--skipped" not in failures.stderr  # it lists what is in Redis: nothing here
    again = typed("export", "front", "-o", str(tmp_path / "again.jsonl"), "--data-dir", str(data))
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines() == [
        f"0 row(s) written to {tmp_path / 'again.jsonl'}",
        f"warning: crawl front: the records a follower delivered {delivered} in this export",
    ]
    where = typed("inspect", "front", site.urls[0], "--data-dir", str(data))
    assert where.returncode == 0 and where.stdout.startswith(site.urls[0]), where
    assert not (data / "redis.sock").exists()  # each command stopped it again


def test_a_command_reads_the_running_crawl_of_its_data_dir(tmp_path):
    """The data dir in use by a running crawl: its Redis is read, and left running."""
    server = EmbeddedRedis(tmp_path / "data").start()
    try:
        conn = redis.Redis.from_url(server.url)
        seeded = typed("seed", "http://127.0.0.1:9/", "--crawl", "live", "--allow-private",
                       "--url", server.url)  # fmt: skip
        assert seeded.returncode == 0, seeded.stderr
        shown = typed("status", "live", "--data-dir", str(tmp_path / "data"))
        assert shown.returncode == 0 and "crawl      live: running" in shown.stdout, shown
        assert conn.ping()
    finally:
        server.stop()
