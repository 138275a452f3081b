"""Exact depth (the default) against first-found depth (`exact_depth = false`,
`--no-exact-depth`), end to end on real servers (127.0.0.x, one host each) and the session's
Redis: a skewed two-host crawl in both modes and one host alone (no host waits for another
in either), the depths each mode records and where max_depth cuts, and a shorter path that
turns up after its URL was fetched."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from helpers import rqcrawl, seed_local, status, wait_finished, wait_until, worker_names
from servers import HTTPSite, reply

from rqcrawl import api
from rqcrawl.workers.runner import LocalWorkers

FAN = 14  # pages of the slow host, all at depth 1
CRAWL_DELAY = 0.4  # the slow host's robots.txt: FAN pages take ~FAN * CRAWL_DELAY seconds
CHAIN = 20  # pages of the other host, one after the other (page i at depth i)
CHAIN_SLEEP = 0.2  # seconds each chain page takes: the chain alone is ~2/3 of the slow host


@dataclass
class LinkSite:
    """A site given as path -> links (root-relative), with pages that answer slowly and an
    optional robots.txt; every other path is a 404."""

    links: dict[str, list[str]]
    slow: dict[str, float] = field(default_factory=dict)
    robots: str = ""

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        if req.path == "/robots.txt" and self.robots:
            reply(req, 200, self.robots.encode(), "text/plain")
        elif req.path in self.links:
            time.sleep(self.slow.get(req.path, 0.0))
            body = "".join(f'<a href="{href}">x</a>' for href in self.links[req.path])
            reply(req, 200, f"<html><body>{body}</body></html>".encode())
        else:
            reply(req, 404, b"<html>not found</html>")


def fan_site() -> LinkSite:
    """The slow host: a seed linking to FAN pages, and a Crawl-delay."""
    pages = [f"/f{i}.html" for i in range(1, FAN + 1)]
    return LinkSite(
        {"/": pages} | {p: [] for p in pages}, robots=f"User-agent: *\nCrawl-delay: {CRAWL_DELAY}\n"
    )


def chain_site() -> LinkSite:
    """The other host: page i links to page i + 1 only, each answering in CHAIN_SLEEP."""
    links = {f"/c{i}.html": [f"/c{i + 1}.html"] for i in range(CHAIN)}
    links[f"/c{CHAIN}.html"] = []
    return LinkSite(links, slow={path: CHAIN_SLEEP for path in links})


def timed_crawl(conn, name: str, seeds: list[str], exact: bool) -> dict:
    """Seed through the Python API and wait for the end; the final status (its elapsed_s runs
    from the seed to the last page, whatever the polling)."""
    api.start(
        conn, seeds, name, max_depth=CHAIN + 2, allow_private=True, delay=0.0, exact_depth=exact
    )
    return wait_until(
        lambda: api.status(conn, name),
        60,
        f"crawl {name} to finish",
        accept=lambda s: s["state"] == "finished",
        every=0.1,
    )


def test_in_both_modes_a_slow_host_holds_up_no_other(redis_url, conn):
    with (
        HTTPSite(fan_site().handle, host="127.0.0.2") as fan,
        HTTPSite(chain_site().handle, host="127.0.0.3") as chain,
        LocalWorkers(redis_url, 3) as workers,
    ):
        worker_names(conn, workers)  # timing starts with every worker ready
        seeds = [fan.base + "/", chain.base + "/c0.html"]
        alone = timed_crawl(conn, "alone", seeds[:1], exact=False)
        broad = timed_crawl(conn, "broad", seeds, exact=False)
        exact = timed_crawl(conn, "exact", seeds, exact=True)
    pages = FAN + 1 + CHAIN + 1
    assert (alone["fetched"], broad["fetched"], exact["fetched"]) == (FAN + 1, pages, pages)
    assert broad["level"] is None and exact["level"] is not None
    times = {s["crawl"]: s["elapsed_s"] for s in (alone, broad, exact)}
    # Alone, the slow host takes about FAN * CRAWL_DELAY; the chain about CHAIN * CHAIN_SLEEP
    # less. Together, the chain runs while the slow host waits, in both modes.
    assert times["broad"] <= 1.25 * times["alone"], times
    assert times["exact"] <= 1.25 * times["alone"], times
    depths = {r["url"]: r["depth"] for r in api.records(conn, "exact")}
    assert depths[chain.base + f"/c{CHAIN}.html"] == CHAIN
    assert {depths[fan.base + f"/f{i}.html"] for i in range(1, FAN + 1)} == {1}


def branching_site() -> LinkSite:
    """/t is 2 clicks from the seed through /x (slow), 3 through /a and /a2 (fast); /u is
    one click past /t."""
    return LinkSite(
        {
            "/": ["/a", "/x"],
            "/a": ["/a2"],
            "/a2": ["/t"],
            "/x": ["/t"],
            "/t": ["/u"],
            "/u": [],
        },
        slow={"/x": 2.0},
    )


def crawl_depths(redis_url: str, conn, name: str, *extra: str) -> dict[str, int]:
    """Crawl the branching site to max depth 3 with two workers (one is held by /x while the
    other follows /a); the depth recorded per fetched path."""
    with (
        HTTPSite(branching_site().handle, host="127.0.0.4") as http,
        LocalWorkers(redis_url, 2) as workers,
    ):
        worker_names(conn, workers)
        seed_local(
            redis_url, http.base + "/", name, 3, "--no-robots", "--host-concurrency", "4", *extra
        )
        wait_finished(redis_url, name)
        base = len(http.base)
        return {
            r["url"][base:]: r["depth"]
            for r in api.records(conn, name)
            if r["outcome"] == "fetched"
        }


def test_without_exact_depth_a_url_keeps_its_first_found_depth_and_max_depth_cuts_by_it(
    redis_url, conn
):
    depths = crawl_depths(redis_url, conn, "first", "--no-exact-depth")
    # /t was found through /a2 (depth 3) while /x was still answering: /u would be depth 4.
    assert depths == {"/": 0, "/a": 1, "/x": 1, "/a2": 2, "/t": 3}
    shown = rqcrawl(redis_url, "status", "first").stdout
    assert "depth      first found, up to max depth 3" in shown and "\nlevel" not in shown


def test_exact_depth_by_default_records_the_shortest_click_distance(redis_url, conn):
    """/t is fetched at depth 3 (through /a, /a2) while /x answers; /x then finds it at 2:
    its record is lowered before it leaves Redis, and /u (cut at max_depth past /t at 3) is
    fetched at 3."""
    depths = crawl_depths(redis_url, conn, "bfs")
    assert depths == {"/": 0, "/a": 1, "/x": 1, "/a2": 2, "/t": 2, "/u": 3}
    assert status(redis_url, "bfs")["held_back"] == 0
