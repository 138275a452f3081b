"""The card's commands as typed, at default settings: `rqcrawl seed URL --max-depth 3` (only
`--allow-private`, since the sites are on loopback) and two plain `rq worker crawl` (RQ's
forking Worker, no scheduler, no worker class, nothing but the Redis URL)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from urllib.parse import urlsplit

from helpers import BIN, rqcrawl, stop_pids, wait_until
from servers import HTTPSite
from testsite import Site

from rqcrawl import api

HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
DELAY = 1.0  # the default per-host delay
PAGES = 10  # per host


def stock_workers(redis_url: str, n: int, log_dir) -> list[subprocess.Popen]:
    """`rq worker crawl --url URL`, n times, with no RQ or rqcrawl variable in the
    environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RQ_", "RQCRAWL_"))}
    env.pop("REDIS_URL", None)
    return [
        subprocess.Popen(
            [str(BIN / "rq"), "worker", "crawl", "--url", redis_url],
            env=env,
            stdout=open(log_dir / f"worker{i}.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for i in range(n)
    ]


def card_crawl(redis_url: str, conn, site: Site, hosts: tuple[str, ...], log_dir) -> dict:
    """Seed one page per host as the card says, run two stock workers until the crawl is
    finished; the final status, each host's request times, and the records' depths by host."""
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(HTTPSite(site.handle, host=h)) for h in hosts]
        seeds = [s.base + "/p0.html" for s in servers]
        rqcrawl(redis_url, "seed", *seeds, "--max-depth", "3", "--allow-private", "--crawl", "card")
        workers = stock_workers(redis_url, 2, log_dir)
        try:
            final = wait_until(
                lambda: api.status(conn, "card", recover=False),  # a recovery pass would
                120,  # release deferred URLs itself: only the workers may move the crawl here
                "crawl card to finish",
                accept=lambda s: s["state"] == "finished",
                every=0.2,
            )
        finally:
            stop_pids([w.pid for w in workers])
            for w in workers:
                w.wait(10)
    times = {s.host: sorted(t for t, _ in s.log) for s in servers}
    depths = {
        s.host: {
            r["url"].removeprefix(s.base): r["depth"]
            for r in api.records(conn, "card")
            if urlsplit(r["url"]).hostname == s.host and r.get("source") != "sitemap"
        }
        for s in servers
    }
    return {"final": final, "times": times, "depths": depths}


def test_the_cards_commands_crawl_one_host_at_default_settings(redis_url, conn, tmp_path):
    """Every URL of a one-host crawl but the first is deferred: without a scheduler, only
    the workers can bring them back."""
    site = Site(pages=4)
    crawl = card_crawl(redis_url, conn, site, HOSTS[:1], tmp_path)
    assert crawl["depths"] == {HOSTS[0]: site.expected(3)}


def test_the_cards_commands_crawl_several_hosts_at_default_settings(redis_url, conn, tmp_path):
    site = Site(pages=PAGES)
    crawl = card_crawl(redis_url, conn, site, HOSTS, tmp_path)
    final, logs = crawl["final"], crawl["times"]
    requests = {host: len(times) for host, times in logs.items()}
    # every page of every host, at its shortest depth, once
    assert crawl["depths"] == dict.fromkeys(HOSTS, site.expected(3))
    for host, times in logs.items():
        # robots.txt takes no turn of the pace: the first page may follow it at once
        gaps = [later - earlier for earlier, later in zip(times[1:], times[2:], strict=False)]
        assert min(gaps) >= DELAY - 0.01, (host, min(gaps))
    # The politeness floor: the busiest host's requests one delay apart.
    floor = DELAY * (max(requests.values()) - 1)
    assert final["elapsed_s"] <= 5 * floor, (final["elapsed_s"], floor, requests)


def test_the_cards_worker_imports_the_crawler_once_for_all_its_forks(redis_url, conn, tmp_path):
    """RQ's forking worker never imports a job's function in its parent process; the job's
    meta makes it (frontier.jobmeta), so each fork inherits the crawler instead of importing
    it (about 0.3 s of CPU a page, for which the host waited). lxml's library mapped into the
    parent, which runs no job itself, shows the import happened there."""
    site = Site(pages=2)
    with HTTPSite(site.handle, host=HOSTS[0]) as server:
        rqcrawl(redis_url, "seed", server.base + "/p0.html", "--allow-private", "--crawl", "warm")
        (worker,) = stock_workers(redis_url, 1, tmp_path)
        try:
            wait_until(
                lambda: api.status(conn, "warm", recover=False),
                60,
                "crawl warm to finish",
                accept=lambda s: s["state"] == "finished",
                every=0.2,
            )
            with open(f"/proc/{worker.pid}/maps") as fh:
                mapped = fh.read()
        finally:
            stop_pids([worker.pid])
            worker.wait(10)
    assert "lxml/etree" in mapped
    paths = [path for _, path in server.log]
    assert "/p0.html" in paths and len(paths) == len(set(paths))  # the crawl ran, once a URL
