"""Politeness across workers: robots.txt, per-host delay and Crawl-delay, deferral that lets
two workers crawl four hosts in parallel, budgets and trap rules."""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler

import redis
from helpers import read_jsonl, rqcrawl, seed_local, status, wait_finished, wait_until
from servers import HTTPSite, reply

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.robots import Robots, RobotsCache
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.workers.runner import LocalWorkers


def tree_site(pages: int, robots: str | None = None) -> Callable[[BaseHTTPRequestHandler], None]:
    """Pages /0 .. /pages-1, page i linking to 2i+1 and 2i+2, and a /private page from /0."""

    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/robots.txt":
            if robots is None:
                reply(req, 404, b"none")
            else:
                reply(req, 200, robots.encode(), ctype="text/plain")
            return
        if req.path == "/private":
            reply(req, 200, b"<title>private</title>")
            return
        i = int(req.path.strip("/") or 0)
        kids = [k for k in (2 * i + 1, 2 * i + 2) if k < pages]
        links = "".join(f'<a href="/{k}">{k}</a>' for k in kids)
        extra = '<a href="/private">p</a>' if i == 0 else ""
        reply(req, 200, f"<title>page {i}</title>{links}{extra}".encode())

    return handle


def gaps(site: HTTPSite) -> list[float]:
    """The gaps between the site's requests, but the one after robots.txt: fetching it takes
    no turn of the host's pace (the first page may follow it at once)."""
    log = sorted(site.log)
    return [b[0] - a[0] for a, b in itertools.pairwise(log) if a[1] != "/robots.txt"]


def test_delay_crawl_delay_and_disallow_hold_across_two_workers(redis_url, tmp_path):
    robots_a = "User-agent: *\nDisallow: /private\n"
    robots_b = "User-agent: rqcrawl\nCrawl-delay: 0.8\n\nUser-agent: *\nDisallow: /\n"
    with (
        HTTPSite(tree_site(10, robots_a), host="127.0.0.2", max_requests=40) as a,
        HTTPSite(tree_site(6, robots_b), host="127.0.0.3", max_requests=40) as b,
    ):
        seed_local(
            redis_url, a.base + "/0", "p", 5, "--delay", "0.4",
            "--config", str(scope(tmp_path, a, b)),
        )  # fmt: skip
        rqcrawl(redis_url, "seed", b.base + "/0", "--crawl", "p")
        with LocalWorkers(redis_url, 1), LocalWorkers(redis_url, 1, worker_class=None):
            s = wait_finished(redis_url, "p", timeout=120)

    assert a.hits["/robots.txt"] == 1 and b.hits["/robots.txt"] == 1
    assert "/private" not in a.hits  # disallowed for every agent on host a
    assert "/private" in b.hits  # only our own group applies on host b: it allows all
    assert len(a.hits) == 10 + 1 and len(b.hits) == 6 + 2
    assert min(gaps(a)) >= 0.4, gaps(a)
    assert min(gaps(b)) >= 0.8, gaps(b)  # Crawl-delay beats our 0.4 s
    assert s["skipped"] == {"robots_disallowed": 1}
    out = tmp_path / "p.jsonl"
    rqcrawl(redis_url, "export", "p", "-o", str(out))
    refused = [r for r in read_jsonl(out) if r["outcome"] == "robots_disallowed"]
    assert [r["url"] for r in refused] == [a.base + "/private"]


def scope(tmp_path, *sites: HTTPSite):
    conf = tmp_path / "scope.toml"
    hosts = ", ".join(f'"{s.host}:{s.port}"' for s in sites)
    conf.write_text(f"[crawl]\nscope_hosts = [{hosts}]\n")
    return conf


def crawl_time(redis_url: str, tmp_path, name: str, hosts: list[str]) -> float:
    """Seconds to crawl 41 pages on each of `hosts` with a 0.5 s delay and two workers."""
    with ExitStack() as stack:
        sites = [
            stack.enter_context(HTTPSite(tree_site(40), host=h, max_requests=60, max_seconds=200))
            for h in hosts
        ]
        conf = scope(tmp_path, *sites)
        seed_local(
            redis_url, sites[0].base + "/0", name, 10, "--delay", "0.5", "--no-robots",
            "--config", str(conf),
        )  # fmt: skip
        if len(sites) > 1:
            rqcrawl(redis_url, "seed", *(s.base + "/0" for s in sites[1:]), "--crawl", name)
        with LocalWorkers(redis_url, 2):
            started = time.monotonic()
            wait_finished(redis_url, name, timeout=150)
            elapsed = time.monotonic() - started
        for site in sites:
            assert len(site.hits) == 40 + 1 and min(gaps(site)) >= 0.5  # + /private
        return elapsed


def test_four_hosts_are_crawled_in_parallel_by_two_workers(redis_url, tmp_path):
    # Each host needs at least 39 x 0.5 s. If a worker slept on a busy host, four hosts would
    # take about four times as long as one; deferral lets them overlap. Both times come from
    # the same run and are dominated by the enforced delay, not by machine speed.
    one = crawl_time(redis_url, tmp_path, "one", ["127.0.0.2"])
    four = crawl_time(redis_url, tmp_path, "four", [f"127.0.0.{i}" for i in range(3, 7)])
    print(f"one host {one:.1f} s, four hosts {four:.1f} s")  # shown with pytest -s
    assert one >= 40 * 0.5 - 1
    assert four < 1.5 * one, (one, four)


def trap_site(req: BaseHTTPRequestHandler) -> None:
    """An endless calendar, a relative-link loop, and a page with a 25-parameter query."""
    path = req.path
    if path == "/":
        params = "&".join(f"p{i}={i}" for i in range(25))
        body = f'<a href="/cal/0">calendar</a><a href="/loop/">loop</a><a href="/q?{params}">q</a>'
    elif path.startswith("/cal/"):
        month = int(path.rsplit("/", 1)[1])
        body = f'<a href="/cal/{month + 1}">next</a><a href="/cal/{month - 1}">prev</a>'
    elif path.startswith("/loop/"):
        body = '<a href="x/">deeper</a>'
    else:
        reply(req, 404, b"no")
        return
    reply(req, 200, f"<title>{path}</title>{body}".encode())


def test_budget_stops_a_calendar_trap_and_trap_rules_are_recorded(redis_url, tmp_path):
    with HTTPSite(trap_site, max_requests=200, max_seconds=120) as http:
        seed_local(
            redis_url, http.base + "/", "t", 1000, "--max-pages-per-host", "30", "--no-robots"
        )
        with LocalWorkers(redis_url, 2):
            s = wait_finished(redis_url, "t", timeout=100)
    assert s["admitted"] == 30 and s["fetched"] == 30 and sum(http.hits.values()) == 30
    assert s["skipped"] == {"max_pages_per_host": 2, "repeated_segments": 1, "too_many_params": 1}
    out = tmp_path / "t.jsonl"
    rqcrawl(redis_url, "export", "t", "-o", str(out))
    rows = read_jsonl(out)
    assert len(rows) == 30 + 4
    skipped = {r["url"][len(http.base) :]: r["outcome"] for r in rows if r["outcome"] != "fetched"}
    assert skipped["/loop/x/x/x/x/"] == "repeated_segments"
    assert sum(v == "max_pages_per_host" for v in skipped.values()) == 2
    assert all(set(r) >= {"url", "outcome", "depth", "attempts", "status"} for r in rows)
    assert status(redis_url, "t")["state"] == "finished"


def robots_site(down: Callable[[int, float], bool]):
    """A site whose robots.txt answers 503 while `down(asks so far, seconds since the first
    ask)`, then rules."""
    first: list[float] = []

    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/robots.txt":
            first.append(time.time())
            if down(len(first), time.time() - first[0]):
                reply(req, 503, b"try later")
            else:
                reply(req, 200, b"User-agent: *\nDisallow: /secret\n", ctype="text/plain")
        elif req.path == "/":
            reply(req, 200, b'<title>home</title><a href="/secret">s</a><a href="/open">o</a>')
        else:
            reply(req, 200, b"<title>page</title>")

    return handle


def asks(site: HTTPSite) -> list[float]:
    """When the site's robots.txt was asked for."""
    return [t for t, p in sorted(site.log) if p == "/robots.txt"]


def test_robots_5xx_means_wait_and_retry_never_crawl_blindly(redis_url, tmp_path):
    conf = tmp_path / "r.toml"
    conf.write_text("[crawl]\nretry_base = 0.3\n")
    with HTTPSite(robots_site(lambda n, _: n <= 2), host="127.0.0.2", max_requests=20) as flaky:
        seed_local(redis_url, flaky.base + "/", "rb", 2, "--config", str(conf))
        with LocalWorkers(redis_url, 2):
            wait_finished(redis_url, "rb", timeout=60)

    paths = [p for _, p in sorted(flaky.log)]
    assert paths[:3] == ["/robots.txt"] * 3  # no page before robots.txt answered
    assert sorted(paths[3:]) == ["/", "/open"]  # /secret is disallowed
    robots = asks(flaky)
    assert robots[1] - robots[0] >= 0.3 and robots[2] - robots[1] >= 0.6  # backoff 1x, 2x


def test_a_site_whose_robots_txt_comes_back_after_6_s_is_crawled_under_its_rules(
    redis_url, tmp_path
):
    # robots.txt answers 503 for 6 s: asked at 0, 1, 3 and 7 s (retry_base x 1, 2, 4), the
    # site's pages waiting meanwhile; it was given up after `retries` (2) asks, for robots_ttl
    conf = tmp_path / "r.toml"
    conf.write_text("[crawl]\nretry_base = 1.0\n")
    with HTTPSite(robots_site(lambda _, t: t < 6), host="127.0.0.2", max_requests=20) as site:
        seed_local(redis_url, site.base + "/", "rc", 2, "--config", str(conf))
        with LocalWorkers(redis_url, 2):
            hosts = wait_until(  # `rqcrawl hosts` says so meanwhile
                lambda: rqcrawl(redis_url, "hosts", "rc").stdout, 10, "robots.txt unavailable",
                accept=lambda out: "unavailable for" in out, every=0.3,
            )  # fmt: skip
            s = wait_finished(redis_url, "rc", timeout=60)

    robots = asks(site)
    assert len(robots) == 4 and robots[-1] - robots[0] >= 6, site.log
    pages = [(t, p) for t, p in sorted(site.log) if p != "/robots.txt"]
    assert sorted(p for _, p in pages) == ["/", "/open"]  # /secret is disallowed
    assert all(t > robots[-1] for t, _ in pages)  # none fetched before it answered
    assert s["fetched"] == 2 and s["failed"] == 0
    assert re.search(r"unavailable for \d+ s \(\d asks\), retry in \d+ s", hosts), hosts


def test_a_robots_txt_that_never_answers_ends_its_pages_after_robots_patience(redis_url, tmp_path):
    # always 503, patience 5 s: asked at 0, 0.5, 1.5, 3.5 and 5.5 s (retry_base x 1, 2, 4,
    # then max_backoff_delay 2 s), the page failed by the first failed ask past 5 s; a page of
    # the site seeded once the next ask is due (7.5 s) asks again
    conf = tmp_path / "r.toml"
    conf.write_text("[crawl]\nretry_base = 0.5\nmax_backoff_delay = 2.0\nrobots_patience = 5.0\n")
    with HTTPSite(robots_site(lambda n, t: True), host="127.0.0.3", max_requests=20) as down:
        seed_local(redis_url, down.base + "/", "rd", 2, "--config", str(conf))
        with LocalWorkers(redis_url, 2):
            s = wait_finished(redis_url, "rd", timeout=60)
            assert len(asks(down)) == 5 and s["failed"] == 1 and s["fetched"] == 0, down.log
            time.sleep(max(0.0, asks(down)[0] + 7.8 - time.time()))  # the next ask is due
            rqcrawl(redis_url, "seed", down.base + "/later", "--crawl", "rd")
            s = wait_finished(redis_url, "rd", timeout=60)

    assert [p for _, p in down.log] == ["/robots.txt"] * 6, down.log  # no page, ever
    spacing = [b - a for a, b in itertools.pairwise(asks(down))]
    assert all(gap >= min(0.5 * 2**n, 2.0) for n, gap in enumerate(spacing)), spacing
    assert spacing[0] < spacing[1] < spacing[2], spacing  # 1, 2, 4x retry_base
    assert s["failed"] == 2 and s["fetched"] == 0
    out = tmp_path / "rd.jsonl"
    rqcrawl(redis_url, "export", "rd", "-o", str(out))
    rows = read_jsonl(out)
    assert [r["outcome"] for r in rows] == ["failed", "failed"]
    assert all(r["error"].startswith("robots.txt unavailable for") for r in rows), rows


def test_a_robots_txt_slower_than_the_read_timeout_is_waited_for_on_the_next_ask(
    redis_url, tmp_path
):
    # robots.txt answers in 2 s, read_timeout 1 s: the first ask times out, the next one
    # waits 3 s (ASK_GROWTH) and reads the rules; before, every ask timed out at 1 s and
    # the site's pages failed "robots.txt unavailable" at the patience (8 s)
    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/robots.txt":
            time.sleep(2.0)
            reply(req, 200, b"User-agent: *\nDisallow: /secret\n", ctype="text/plain")
        else:
            reply(req, 200, b'<title>page</title><a href="/secret">s</a><a href="/open">o</a>')

    conf = tmp_path / "slow.toml"
    conf.write_text("[crawl]\nread_timeout = 1.0\nretry_base = 0.2\nrobots_patience = 8.0\n")
    with HTTPSite(handle, host="127.0.0.2", max_requests=20) as site:
        seed_local(redis_url, site.base + "/", "slowrobots", 1, "--config", str(conf))
        with LocalWorkers(redis_url, 1):
            s = wait_finished(redis_url, "slowrobots", timeout=60)
    assert len(asks(site)) == 2, site.log
    assert sorted(p for _, p in site.log if p != "/robots.txt") == ["/", "/open"]
    assert s["fetched"] == 2 and s["failed"] == 0


def test_an_unavailable_robots_txt_holds_a_crawl_that_has_nothing_else_left_briefly(
    redis_url, tmp_path
):
    # host .3's robots.txt always answers 503 (asked at 0, 1, 3, 7, 15, 31 s), host .2 has 8
    # pages at a 2.2 s delay (done at about 17 s): while .2 is crawled, `status` names .3's
    # robots.txt and when its pages fail; once .2 is done, .3's three pages (parked, or held
    # in its queue) fail within IDLE_POLL (5 s), past robots_patience_idle (3 s), without
    # waiting for the ask at 31 s, nor for robots_patience (60 s: before, the crawl waited
    # that long for it)
    with (
        HTTPSite(tree_site(7), host="127.0.0.2", max_requests=30) as up,
        HTTPSite(robots_site(lambda n, t: True), host="127.0.0.3", max_requests=30) as down,
    ):
        conf = scope(tmp_path, up, down)
        conf.write_text(
            conf.read_text() + "retry_base = 1.0\nmax_backoff_delay = 30.0\n"
            "robots_patience = 60.0\nrobots_patience_idle = 3.0\n"
        )
        seed_local(redis_url, up.base + "/0", "idle", 3, "--delay", "2.2", "--config", str(conf))
        down_pages = [down.base + path for path in ("/", "/a", "/b")]
        rqcrawl(redis_url, "seed", *down_pages, "--crawl", "idle")
        with LocalWorkers(redis_url, 2):
            text = wait_until(
                lambda: rqcrawl(redis_url, "status", "idle").stdout, 10, "status names it",
                accept=lambda out: f"robots.txt {down.base} unavailable" in out, every=0.2,
            )  # fmt: skip
            s = wait_finished(redis_url, "idle", timeout=60)
            over = time.time()
    assert re.search(r"fail at the first failed ask after [56]\d s, after \d s once", text), text
    assert s["fetched"] == 8 and s["failed"] == 3  # .2's 7 pages and its /private
    last_page = max(t for t, p in up.log if p != "/robots.txt")
    assert over - last_page < 5.0 + 3.0, (down.log, last_page, over)
    assert [p for _, p in down.log] == ["/robots.txt"] * len(down.log)
    out = tmp_path / "idle.jsonl"
    rqcrawl(redis_url, "export", "idle", "-o", str(out))
    failed = [r for r in read_jsonl(out) if r["outcome"] == "failed"]
    assert all("the crawl had nothing else left" in r["error"] for r in failed), failed


def test_status_warns_about_eviction_and_not_about_rq_scheduled_jobs(redis_url):
    # A database of the session's Redis that no worker uses. A job late in RQ's scheduled
    # registry is no crawl's concern (nothing of a crawl is scheduled in RQ: no worker
    # needs --with-scheduler), so it brings no warning; an evicting Redis does.
    redis_url = redis_url.rsplit("/", 1)[0] + "/7"
    conn = redis.Redis.from_url(redis_url)
    conn.flushdb()
    seed_local(redis_url, "http://127.0.0.1:9/", "w", 1)  # never crawled: no worker runs
    serves = "nothing serves them"  # (said at once: no worker listens on the queue)
    assert [w for w in status(redis_url, "w")["warnings"] if serves not in w] == []
    conn.config_set("maxmemory", "1gb")
    conn.config_set("maxmemory-policy", "allkeys-lru")
    try:
        conn.zadd("rq:scheduled:crawl", {"rqcrawl-w-late": time.time() - 60})
        warnings = status(redis_url, "w")["warnings"]
        text = rqcrawl(redis_url, "status", "w").stdout
    finally:
        conn.config_set("maxmemory-policy", "noeviction")
        conn.config_set("maxmemory", "0")
        conn.close()
    warnings = [w for w in warnings if serves not in w]
    assert len(warnings) == 1 and "allkeys-lru" in warnings[0]
    assert text.count("WARNING") == 2 and text.count(serves) == 1


def test_urls_of_a_site_taken_at_once_wait_for_one_robots_txt_fetch(redis_url):
    """Eight URLs of one site taken at once by four workers that may all request it: one
    fetches its slow robots.txt, the others wait for that verdict (not fetch it too), and
    then obey it."""

    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/robots.txt":
            time.sleep(1.0)
            reply(req, 200, b"User-agent: *\nDisallow: /private\n", ctype="text/plain")
        else:
            reply(req, 200, b"<title>page</title>")

    with HTTPSite(handle, max_requests=30, max_seconds=60) as http:
        seeds = [f"{http.base}/{i}" for i in range(7)] + [http.base + "/private"]
        rqcrawl(redis_url, "seed", *seeds, "--crawl", "once", "--max-depth", "0", "--delay", "0",
                "--allow-private", "--no-sitemaps", "--host-concurrency", "4")  # fmt: skip
        with LocalWorkers(redis_url, 2, threads=2):
            s = wait_finished(redis_url, "once", timeout=60)
    assert http.hits["/robots.txt"] == 1, http.log
    assert "/private" not in http.hits
    assert s["fetched"] == 7 and s["skipped_total"] == 1


def test_a_robots_fetch_that_ended_between_a_look_and_the_turn_is_not_made_again(conn):
    """The race the test above met under load: job B found no verdict, job A's fetch then
    ended (verdict written, turn freed), then B asked for the turn. B gets A's verdict and
    no turn: the site's robots.txt is not fetched twice. A verdict that is due still gives
    the turn."""
    cache = RobotsCache(conn, CrawlKeys("race"), CrawlConfig())
    site, fetcher = "http://race.test", CrawlKeys("race").robots_fetcher("http://race.test")
    assert cache.get(site) is None  # B looks
    assert cache.take_fetch(site, "job A") == (True, None)
    fresh = Robots("allow", time.time() + 3600)
    conn.hset(cache.key, site, json.dumps(asdict(fresh)))  # A's fetch ends
    conn.delete(fetcher)
    assert cache.take_fetch(site, "job B") == (False, fresh)
    assert conn.get(fetcher) is None  # the turn given back
    due = Robots("allow", time.time() - 1)
    conn.hset(cache.key, site, json.dumps(asdict(due)))
    assert cache.take_fetch(site, "job C") == (True, due)
    assert conn.get(fetcher) == b"job C"


def test_a_nul_in_robots_txt_does_not_void_its_group(redis_url, tmp_path):
    robots = "User-agent: *\0\nDisallow: /priv\0ate\n"
    with HTTPSite(tree_site(3, robots)) as site, LocalWorkers(redis_url, 1):
        seed_local(redis_url, site.base + "/0", "nul", 2)
        wait_finished(redis_url, "nul")
    out = tmp_path / "nul.jsonl"
    rqcrawl(redis_url, "export", "nul", "-o", str(out))
    outcomes = {r["url"][len(site.base) :]: r["outcome"] for r in read_jsonl(out)}
    assert outcomes["/private"] == "robots_disallowed"
    assert "/private" not in site.hits and site.hits["/1"] == 1


SLOW_HOOK = """
import os, time


def on_page(page):
    started = time.time()
    time.sleep(2)  # a page that takes long to handle after its response was read
    with open(os.environ["SLOW_HOOK_LOG"], "a") as log:
        log.write(f"{page.url} {started!r} {time.time()!r}\\n")
"""


def test_a_hosts_next_request_goes_while_the_last_page_is_still_handled(
    redis_url, tmp_path, monkeypatch
):
    """Issue 45: a host's slot covers its request, not its job. At delay 0 with one slot per
    host, the next page of the host is fetched while the previous one's job still runs its
    hook (before, the host waited for that job's end: one job at a time); its requests still
    never overlap (the server is single-threaded: a request starts after the last ended)."""
    (tmp_path / "slowhook.py").write_text(SLOW_HOOK)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # for `rqcrawl seed` and the workers
    monkeypatch.setenv("SLOW_HOOK_LOG", str(tmp_path / "hook.log"))
    settings = tmp_path / "crawl.toml"
    settings.write_text('[crawl]\nhook = "slowhook:on_page"\n')
    with HTTPSite(tree_site(7), host="127.0.0.2") as site:
        seed_local(redis_url, site.base + "/0", "slow", 2, "--config", str(settings))
        with LocalWorkers(redis_url, 1, threads=4):
            wait_finished(redis_url, "slow", timeout=120)
    # every page once (and /private, which /0 links to), and robots.txt
    assert len(site.hits) == 7 + 2 and max(site.hits.values()) == 1
    hooks = [line.split() for line in (tmp_path / "hook.log").read_text().splitlines()]
    during = [
        (path, url)
        for at, path in site.log
        for url, started, ended in hooks
        if float(started) < at < float(ended) and not url.endswith(path)
    ]
    assert during, (site.log, hooks)  # some request went while another page's hook ran
