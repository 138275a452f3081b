"""One crawl sharded by host over two real Redis servers: placement, cross-shard links
without loss or duplicates, exact depth and exact finish across shards, `status` from either
shard, and a worker SIGKILLed mid-crawl."""

from __future__ import annotations

import json
import random
import re
import signal
import time
from collections import Counter, deque
from contextlib import ExitStack

import pytest
import redis
from helpers import child_pids, rqcrawl, seed_local, status, stop_pids, wait_until
from rq import Worker
from servers import HTTPSite, reply

from rqcrawl import api, config
from rqcrawl.config import ConfigError, CrawlConfig
from rqcrawl.defaults import DRAIN_ROUNDS
from rqcrawl.frontier import configs, keys, levels, shards, state
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.messages import Ending, Outgoing
from rqcrawl.frontier.shards import ShardMap, shard_map
from rqcrawl.frontier.state import all_shards
from rqcrawl.ops import control, stats
from rqcrawl.parse.urls import host_of
from rqcrawl.workers.runner import WORKER_CLASS, LocalWorkers

HOSTS = 4
PAGES = 12


class Web:
    """Four hosts of PAGES pages each (/pN.html): a tree within each host plus two links
    per page to pages of other hosts, absolute. `slow`: (host, page) -> seconds."""

    def __init__(self, slow: dict[tuple[int, int], float] | None = None, seed: int = 5):
        rnd = random.Random(seed)
        self.slow = slow or {}
        self.bases: list[str] = []  # filled once the servers listen
        self.links: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for h in range(HOSTS):
            for i in range(PAGES):
                tree = [(h, c) for c in (2 * i + 1, 2 * i + 2) if c < PAGES]
                cross = [((h + rnd.randrange(1, HOSTS)) % HOSTS, rnd.randrange(PAGES))]
                cross.append(((h + rnd.randrange(1, HOSTS)) % HOSTS, rnd.randrange(PAGES)))
                self.links[(h, i)] = tree + cross

    def expected(self, max_depth: int) -> dict[str, int]:
        """URL -> shortest depth from page 0 of host 0, within max_depth."""
        depth = {(0, 0): 0}
        todo = deque([(0, 0)])
        while todo:
            node = todo.popleft()
            for nxt in self.links[node]:
                if nxt not in depth:
                    depth[nxt] = depth[node] + 1
                    todo.append(nxt)
        return {self.url(*n): d for n, d in depth.items() if d <= max_depth}

    def url(self, host: int, page: int) -> str:
        return f"{self.bases[host]}/p{page}.html"

    def handler(self, host: int):
        def handle(req) -> None:
            path = req.path
            if not (path.startswith("/p") and path.endswith(".html")):
                reply(req, 404, b"<html><title>Not found</title></html>")
                return
            page = int(path[2:-5])
            time.sleep(self.slow.get((host, page), 0.0))
            hrefs = "".join(f'<a href="{self.url(*n)}">x</a>' for n in self.links[(host, page)])
            body = f"<html><title>{host}.{page}</title><body>{hrefs}</body></html>"
            reply(req, 200, body.encode())

        return handle


def start_sites(stack: ExitStack, web: Web, max_seconds: float) -> list[HTTPSite]:
    sites = [
        stack.enter_context(
            HTTPSite(web.handler(h), host=f"127.0.0.{h + 1}", max_seconds=max_seconds)
        )
        for h in range(HOSTS)
    ]
    web.bases = [s.base for s in sites]
    return sites


def seed_sharded(
    urls: list[str], web: Web, tmp_path, max_depth: int, *extra: str, on_b: int = 3
) -> None:
    """`rqcrawl seed --shards A,B` of the four hosts, host 1 placed on A and host `on_b` on B
    by rules (so that both shards have hosts whatever the hash), the others by the hash."""
    conf = tmp_path / "shards.toml"
    scope = ", ".join(f'"{b.removeprefix("http://")}"' for b in web.bases)
    conf.write_text(
        "[crawl]\n"
        f"scope_hosts = [{scope}]\n"
        f'shard_rules = {{ "127.0.0.1:*" = "{urls[0]}", "127.0.0.{on_b}:*" = "{urls[1]}" }}\n'
        "job_timeout = 20\ndownload_timeout = 10.0\n"
    )
    seed_local(
        urls[0], web.url(0, 0), "sh", max_depth, "--config", str(conf), "--shards",
        ",".join(urls), *extra,
    )  # fmt: skip


def finished_untouched(url: str, timeout: float = 120) -> dict:
    """Wait for the end reading Redis only: unlike `rqcrawl status`, this runs no recovery
    pass (which also drains and coordinates), so the workers alone must finish the crawl."""
    with redis.Redis.from_url(url) as conn:
        return wait_until(
            lambda: stats.status(conn, "sh"),
            timeout,
            "crawl sh to finish",
            accept=lambda s: s["state"] == "finished",
            every=0.3,
        )


def records_of(url: str) -> list[dict]:
    """The crawl's records read from one shard's URL: every shard's, merged."""
    with redis.Redis.from_url(url) as conn:
        return list(api.records(conn, "sh"))


def fetched_on(url: str) -> int:
    with redis.Redis.from_url(url) as conn:
        return int(conn.hget(keys.CrawlKeys("sh").counters, keys.FETCHED) or 0)


def check_exact(
    web: Web, sites: list[HTTPSite], urls: list[str], max_depth: int, rows: list | None = None
) -> list[dict]:
    """Every expected URL recorded once at its exact depth, across both shards' records (or
    `rows`, those delivered to a file); both shards did work; `status --json` from either
    shard says finished, same totals."""
    want = web.expected(max_depth)
    if rows is None:
        rows = records_of(urls[0])
        assert records_of(urls[1]) == rows  # from either shard, every shard's records
    assert Counter(r["url"] for r in rows) == Counter(want.keys()), "each URL recorded once"
    assert {r["url"]: r["depth"] for r in rows} == want
    assert all(r["outcome"] == "fetched" for r in rows), rows
    assert all(fetched_on(u) > 0 for u in urls)
    a, b = status(urls[0], "sh"), status(urls[1], "sh")
    totals = ("state", "admitted", "fetched", "failed", "in_flight", "held", "shards")
    assert {k: a[k] for k in totals} == {k: b[k] for k in totals}
    assert a["state"] == "finished" and a["shards"] == 2
    assert "sh: finished (over 2 shards)" in rqcrawl(urls[1], "status", "sh").stdout
    assert a["admitted"] == a["fetched"] == len(want)
    assert a["level"] == max_depth
    return rows


@pytest.mark.parametrize("worker", [WORKER_CLASS, None], ids=["crawl", "stock"])
def test_a_crawl_over_two_shards_is_exact(redis_url, second_redis_url, tmp_path, worker):
    """With the recommended workers, and with bare `rq worker crawl` (no tender thread)."""
    urls = [redis_url, second_redis_url]
    web = Web(slow={(0, 1): 0.4, (2, 3): 0.2})  # late finders of short paths
    max_depth = 4
    with ExitStack() as stack:
        sites = start_sites(stack, web, max_seconds=180)
        seed_sharded(urls, web, tmp_path, max_depth)
        for n, url in enumerate(urls):
            logs = tmp_path / f"shard{n}"
            stack.enter_context(LocalWorkers(url, 2, log_dir=logs, worker_class=worker))
        finished_untouched(urls[0])
    check_exact(web, sites, urls, max_depth)
    want = web.expected(max_depth)
    for h, site in enumerate(sites):
        requested = {web.bases[h] + p for p in site.hits if p != "/robots.txt"}
        assert requested == {u for u in want if u.startswith(web.bases[h] + "/")}
        assert all(n == 1 for n in site.hits.values()), site.hits  # robots.txt too


def test_without_exact_depth_two_shards_crawl_everything_once_at_first_found_depths(
    redis_url, second_redis_url, tmp_path
):
    """No level barrier on any shard (the coordinator has no level to hold): every page is
    fetched once, the crawl ends exact, and no depth is below the shortest path."""
    urls = [redis_url, second_redis_url]
    web = Web(slow={(0, 1): 0.4, (2, 3): 0.2})
    deep = 20  # past every page's first-found depth: the whole web is crawled
    with ExitStack() as stack:
        sites = start_sites(stack, web, max_seconds=180)
        seed_sharded(urls, web, tmp_path, deep, "--no-exact-depth")
        for n, url in enumerate(urls):
            stack.enter_context(LocalWorkers(url, 2, log_dir=tmp_path / f"shard{n}"))
        final = finished_untouched(urls[0])
    want = web.expected(deep)
    rows = records_of(urls[0])
    assert records_of(urls[1]) == rows  # from either shard, every shard's records
    assert Counter(r["url"] for r in rows) == Counter(want.keys()), "each URL recorded once"
    assert all(r["outcome"] == "fetched" and r["depth"] >= want[r["url"]] for r in rows), rows
    assert all(fetched_on(u) > 0 for u in urls)
    assert final["admitted"] == final["fetched"] == len(want) and final["level"] is None
    assert all(n == 1 for site in sites for n in site.hits.values()), [s.hits for s in sites]


@pytest.mark.timeout(120)
def test_revisits_over_two_shards_visit_every_page_again_on_its_host_shard(
    redis_url, second_redis_url, tmp_path
):
    """One task table for the crawl, a pump on each shard: every page of the four hosts is
    visited again, readmitted on its own host's shard, its visits numbered in order, none
    twice in one round; `status` from either shard gives the same revisit figures."""
    urls = [redis_url, second_redis_url]
    web = Web()
    db = f"sqlite:///{tmp_path / 'tasks.db'}"
    with ExitStack() as stack:
        sites = start_sites(stack, web, max_seconds=100)
        seed_sharded(urls, web, tmp_path, 1, "--revisit", "2s", "--db", db, on_b=4)
        for n, url in enumerate(urls):
            stack.enter_context(LocalWorkers(url, 1, log_dir=tmp_path / f"shard{n}"))
        want = web.expected(1)
        where = {u: (sites[web.bases.index(u.rsplit("/", 1)[0])], u.rsplit("/", 1)[1])
                 for u in want}  # fmt: skip

        def visits() -> list[int]:
            return [site.hits["/" + path] for site, path in where.values()]

        wait_until(visits, 60, "every page visited twice", accept=lambda v: min(v) >= 2)
    a, b = status(urls[0], "sh"), status(urls[1], "sh")  # the workers stopped: still figures
    rows = records_of(urls[0])
    by_url: dict[str, list[int]] = {}
    for r in rows:
        by_url.setdefault(r["url"], []).append(r["visit"])
    assert set(by_url) == set(want)
    assert all(v == list(range(1, len(v) + 1)) for v in by_url.values()), by_url
    placement = shard_map(configs.load(redis.Redis.from_url(urls[0]), "sh"))
    for n, url in enumerate(urls):  # every visit recorded on its host's shard
        with redis.Redis.from_url(url) as conn:
            own = [json.loads(e[b"r"]) for _, e in conn.xrange(keys.CrawlKeys("sh").items)]
        assert own and {placement.index_of(host_of(r["url"])) for r in own} == {n}
    for site in sites:
        times: dict[str, list[float]] = {}
        for t, path in site.log:
            times.setdefault(path, []).append(t)
        gaps = [b - a for ts in times.values() for a, b in zip(ts, ts[1:], strict=False)]
        assert all(g >= 1.0 for g in gaps), times  # a round is at least 2 s: none twice in one
    figures = ("known", "revisit_s")
    assert [a[f] for f in figures] == [b[f] for f in figures] and a["known"] == len(want)
    assert a["revisits"] == b["revisits"] > 0


def test_a_sigkilled_worker_loses_nothing_across_shards(redis_url, second_redis_url, tmp_path):
    urls = [redis_url, second_redis_url]
    web = Web(slow={(h, i): 0.3 for h in range(HOSTS) for i in range(PAGES)})
    max_depth = 4
    with ExitStack() as stack:
        sites = start_sites(stack, web, max_seconds=300)
        seed_sharded(urls, web, tmp_path, max_depth, "--host-concurrency", "2")
        fleets = [
            stack.enter_context(LocalWorkers(url, 2, log_dir=tmp_path / f"shard{n}"))
            for n, url in enumerate(urls)
        ]
        conn = stack.enter_context(redis.Redis.from_url(urls[0]))
        victim = fleets[0].procs[0]

        def busy() -> int:  # jobs of its slots
            found = [w for w in Worker.all(connection=conn) if w.pid == victim.pid]
            return sum(bool(w.get_current_job_id()) for w in found)

        wait_until(lambda: sum(sum(s.hits.values()) for s in sites) >= 8 and busy(), 120,
                   "the victim in a job", every=0.01)  # fmt: skip
        running = busy()
        stack.callback(stop_pids, child_pids(victim.pid))  # its scheduler, if it had one
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        finished_untouched(urls[1], timeout=240)
    rows = check_exact(web, sites, urls, max_depth)
    assert len(rows) == len(web.expected(max_depth))
    # The killed jobs' pages may have been requested twice (once by the dead worker), no other
    # page. (With two requests per host at a time, two jobs may both fetch a robots.txt.)
    again = [(s.base, p, n) for s in sites for p, n in s.hits.items() if n > 1]
    assert len([a for a in again if a[1] != "/robots.txt"]) <= running + 1, (again, running)


# --- placement and settings -----------------------------------------------------------------


def test_rules_come_first_then_hosts_spread_and_a_resize_moves_a_few():
    three = ShardMap(("redis://a/0", "redis://b/0", "redis://c/0"), (("*.de", 2),))
    assert three.index_of("shop.example.DE") == 2
    hosts = [f"h{i}.example" for i in range(3000)]
    spread = Counter(three.index_of(h) for h in hosts)
    assert all(800 < n < 1200 for n in spread.values()), spread
    four = ShardMap(three.urls + ("redis://d/0",))
    moved = [h for h in hosts if three.index_of(h) != four.index_of(h)]
    assert all(four.index_of(h) == 3 for h in moved)  # only to the new shard
    assert 0.18 < len(moved) / len(hosts) < 0.32  # about 1/4


def test_shard_settings_are_checked_in_one_line():
    two = ["redis://a:6379/0", "redis://b:6379/0"]
    cfg = CrawlConfig.from_dict({"shards": two, "shard_rules": {"*.DE": two[1]}})
    assert shard_map(cfg).index_of("x.de") == 1
    bad = [
        ({"shards": ["http://a/0"]}, "bad Redis URL"),
        ({"shards": ["redis://:pw@a/0", "redis://:pw@a/0"]}, "'redis://:***@a/0' is listed twice"),
        ({"shards": two, "shard_rules": {"*.de": "redis://c/0"}}, "not one of 'shards'"),
    ]
    for settings, message in bad:
        with pytest.raises(ConfigError, match=re.escape(message)):
            CrawlConfig.from_dict(settings)
    with pytest.raises(ConfigError, match="needs 'shards'"):
        config.layered(None, {"shard_rules": {"*.de": two[0]}})


def test_seeding_stores_the_crawl_in_every_shard_with_its_index(
    redis_url, second_redis_url, tmp_path
):
    urls = [redis_url, second_redis_url]
    proc = rqcrawl(
        redis_url, "seed", "http://127.0.0.1:9/", "http://127.0.0.3:9/", "--crawl", "sh",
        "--allow-private", "--shards", ",".join(urls), "--config", str(tmp_path / "r.toml"),
        check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and "cannot read" in proc.stderr  # no traceback
    rules = (
        f'[crawl]\nshard_rules = {{ "127.0.0.1:*" = "{urls[0]}", "127.0.0.3:*" = "{urls[1]}" }}\n'
    )
    (tmp_path / "r.toml").write_text(rules)
    rqcrawl(
        redis_url, "seed", "http://127.0.0.1:9/", "http://127.0.0.3:9/", "--crawl", "sh",
        "--allow-private", "--shards", ",".join(urls), "--config", str(tmp_path / "r.toml"),
    )  # fmt: skip
    for index, url in enumerate(urls):
        with redis.Redis.from_url(url) as conn:
            assert configs.load(conn, "sh", fresh=True).shards == urls
            assert state.shard_index(conn, "sh") == index
            assert "sh" in state.crawl_names(conn)
            assert all_shards(conn, "sh")[index] is conn
            # its own seed, released; its site's sitemaps are read with its robots.txt
            # (rqcrawl.frontier.sitemaps), a mark on its own shard
            crawl_keys = keys.CrawlKeys("sh")
            assert conn.hlen(crawl_keys.inflight) == 1
            assert conn.hget(crawl_keys.counters, keys.HELD) == b"0"
            site = f"http://127.0.0.{1 + 2 * index}:9"
            assert conn.hget(crawl_keys.sitemaps, f"robots|{site}") == b"0"


# --- the outbox and the level coordinator, step by step ---------------------------------------


def two_shard_crawl(urls: list[str], **more: object) -> list[Frontier]:
    """Crawl `sh` over `urls`, host a.test on the first and b.test on the second, seeded
    with a.test's home page (in flight on the first shard); `more` settings."""
    rules = {"a.test": urls[0], "b.test": urls[1]}
    settings = {"shards": urls, "shard_rules": rules, "max_depth": 3, "sitemaps": False, **more}
    cfg = CrawlConfig.from_dict(settings)  # no sitemap entry: the seed alone is in flight
    control.start(shards.connect(urls[0]), "sh", cfg, ["http://a.test/"])
    return [Frontier(shards.connect(u), "sh", cfg) for u in urls]


def test_a_drain_that_dies_before_its_trim_admits_nothing_twice(redis_url, second_redis_url):
    a, b = two_shard_crawl([redis_url, second_redis_url])
    page = {"url": "http://a.test/", "outcome": "fetched", "depth": 0}
    children = [(None, "http://b.test/x"), (None, "http://a.test/y")]
    ended = a.finish_step("http://a.test/", Ending({keys.FETCHED: 1}, page, children, 1))
    assert ended.sent == 1 and urls(ended.released) == ["http://a.test/y"]  # no host waits
    dead = a.read_outbox("dead", 10)  # a drain reads, admits, and dies before its trim
    assert [o.url for o in dead] == ["http://b.test/x"]
    assert b.admit(dead).admitted == 1
    assert a.drain() == 0  # the dead drain's lock holds until it runs out...
    a.redis.pexpire(a.keys.outbox_lock, 1)
    time.sleep(0.01)
    assert a.drain() == 1  # ...then the next drain admits the batch again: a Bloom no-op
    assert not a.trim_outbox("dead", 1)  # the dead drain's token no longer trims
    views = [f.level_view() for f in (a, b)]
    assert [(v.level, v.lowest, v.in_flight, v.outbox, v.version[0]) for v in views] == [
        (0, 1, 1, 0, 2),
        (0, 1, 1, 0, 1),
    ]
    assert levels.coordinate([a, b]) == 2  # nothing pending below depth 1 anywhere
    assert [f.level_view().level for f in (a, b)] == [1, 1]
    assert [sorted(f.redis.hkeys(f.keys.inflight)) for f in (a, b)] == [
        [b"http://a.test/y"],
        [b"http://b.test/x"],
    ]
    assert levels.coordinate([a, b]) == 0  # nothing to raise
    assert not levels.settled([a, b])


def test_a_drain_that_read_an_empty_outbox_leaves_links_pushed_since_pending(
    redis_url, second_redis_url
):
    """A drain reads the outbox empty; a page ends meanwhile with a link to another shard's
    host; the drain then frees its lock. The link stays pending at its page's depth (CI saw
    the level rise past a depth-2 page in flight: the empty drain's trim had taken the links
    pushed since its read off `pending` and left them in the outbox)."""
    a, b = two_shard_crawl([redis_url, second_redis_url])
    assert a.read_outbox("empty", 10) == []
    page = {"url": "http://a.test/", "outcome": "fetched", "depth": 0}
    a.finish_step("http://a.test/", Ending({keys.FETCHED: 1}, page, [(None, "http://b.test/x")], 1))
    assert a.trim_outbox("empty", 0)
    assert a.redis.hgetall(a.keys.pending) == {b"0": b"1"}  # the link, at depth 1 - 1
    assert a.level_view().outbox == 1 and a.drain() == 1
    assert a.redis.hgetall(a.keys.pending) == {}
    assert b.level_view().lowest == 1


def test_a_link_pushed_while_a_drain_holds_the_outbox_is_drained_by_that_drain(
    redis_url, second_redis_url, monkeypatch
):
    """A page ends while a drain holds the outbox: its link goes in, and its own drain finds
    the lock taken. The holder reads the outbox again as it frees the lock, so the link is
    not left for a drain that may never come (CI saw bare `rq worker crawl` workers leave a
    two-shard crawl `running`, every page fetched, with no job left to drain it)."""
    a, b = two_shard_crawl([redis_url, second_redis_url])
    page = {"url": "http://a.test/", "outcome": "fetched", "depth": 0}
    children = [(None, "http://b.test/x"), (None, "http://a.test/y")]
    a.finish_step("http://a.test/", Ending({keys.FETCHED: 1}, page, children, 1))
    admit, meanwhile = Frontier.admit, []

    def admit_while_a_page_ends(frontier, group):
        if not meanwhile:  # /y ends with a link to b.test, and its drain finds the lock
            page_y = {"url": "http://a.test/y", "outcome": "fetched", "depth": 1}
            ended = a.finish_step(
                "http://a.test/y", Ending({keys.FETCHED: 1}, page_y, [(None, "http://b.test/z")], 2)
            )
            meanwhile.append((ended.sent, a.drain()))
        return admit(frontier, group)

    monkeypatch.setattr(Frontier, "admit", admit_while_a_page_ends)
    assert a.drain() == 2
    assert meanwhile == [(1, 0)]
    assert a.level_view().outbox == 0
    assert b.redis.hget(b.keys.counters, keys.ADMITTED) == b"2"  # /x and /z, on b


def test_a_drain_ends_while_other_pages_keep_pushing_links(
    redis_url, second_redis_url, monkeypatch
):
    """Pages that push a link to the outbox at every round of a drain do not hold that
    drain (and the job that runs it) for ever: it stops after DRAIN_ROUNDS rounds, the
    last link left to the next drain."""
    a, b = two_shard_crawl([redis_url, second_redis_url])
    page = {"url": "http://a.test/", "outcome": "fetched", "depth": 0}
    a.finish_step("http://a.test/", Ending({keys.FETCHED: 1}, page, [(None, "http://b.test/0")], 1))
    entry = a.redis.lindex(a.keys.outbox, 0).decode()
    admit, pushed = Frontier.admit, iter(range(1, 1000))

    def admit_while_pages_push(frontier, group):
        a.redis.rpush(a.keys.outbox, entry.replace("/0", f"/{next(pushed)}"))
        return admit(frontier, group)

    monkeypatch.setattr(Frontier, "admit", admit_while_pages_push)
    assert a.drain() == DRAIN_ROUNDS
    assert a.level_view().outbox == 1


def test_a_sitemap_url_of_another_shard_keeps_its_source(redis_url, second_redis_url):
    """A sitemap of a.test lists a page of b.test: admitted on b through the outbox, noted as
    a sitemap's there (its record says `source: "sitemap"`)."""
    a, b = two_shard_crawl([redis_url, second_redis_url])
    listed = a.admit_listed([(None, "http://b.test/listed")], 1, 0, "sitemap")
    assert listed.sent == 1 and a.drain() == 1
    assert b.redis.smembers(b.keys.sitemapped) == {b"http://b.test/listed"}
    listed_entry = Outgoing(1, 2, 1, None, "http://b.test/x", "sitemap")
    assert Outgoing.parse(listed_entry.encode().encode()) == listed_entry


def test_a_halted_shard_releases_nothing_until_it_resumes(redis_url, second_redis_url):
    a, b = two_shard_crawl([redis_url, second_redis_url])
    page = {"url": "http://a.test/", "outcome": "fetched", "depth": 0}
    b.pause()
    a.finish("http://a.test/", Ending({keys.FETCHED: 1}, page, [(None, "http://b.test/x")], 1))
    assert b.level_view().held == 1 and a.level_view().outbox == 0
    assert b.redis.hlen(b.keys.inflight) == 0
    b.resume()
    assert b.redis.hkeys(b.keys.inflight) == [b"http://b.test/x"]


def urls(released) -> list[str]:
    return [url for url, _ in released]


class DrainedJustBefore:
    """A shard as the coordinator sees it when a link lands in its outbox right after the
    coordinator's drain (a page of another worker ended in between): nothing to drain."""

    def __init__(self, frontier: Frontier):
        self.cfg, self.advance = frontier.cfg, frontier.advance
        self.level_view, self.replicated = frontier.level_view, frontier.replicated

    def drain(self) -> int:
        return 0


def test_a_link_waiting_in_an_outbox_keeps_the_level_below_what_it_can_lower(
    redis_url, second_redis_url
):
    """b.test/u ended at depth 3 on its shard (its record held back); a.test/1 (depth 1)
    ended with a link to it, waiting in a.test's outbox at depth 2. The level must not rise
    to 2 while that link waits, even when it landed there after the coordinator's drain:
    level 2 makes the records of depth 3 final, and u's would be written one level too
    deep."""
    a, b = two_shard_crawl([redis_url, second_redis_url], delay=0)

    def end(f: Frontier, url: str, depth: int, *children: str) -> list[str]:
        page = {"url": url, "outcome": "fetched", "depth": depth}
        kids = [(None, c) for c in children]
        ended = f.finish_step(url, Ending({keys.FETCHED: 1}, page, kids, depth + 1))
        return urls(ended.released)

    end(a, "http://a.test/", 0, "http://a.test/1", "http://b.test/1")
    assert a.drain() == 1 and levels.coordinate([a, b]) == 2  # level 1 on both
    for parent, child, depth in [("1", "2", 1), ("2", "u", 2), ("u", None, 3)]:
        wait_until(lambda p=parent: b.redis.hexists(b.keys.inflight, f"http://b.test/{p}"),
                   5, f"b.test/{parent} released")  # fmt: skip
        end(b, f"http://b.test/{parent}", depth, *([f"http://b.test/{child}"] if child else []))
    assert b.level_view().held_back == 1  # depth 3 > level 1 + 1
    end(a, "http://a.test/1", 1, "http://b.test/u")  # the shorter path, in a's outbox
    assert a.level_view().outbox == 1

    levels.coordinate([DrainedJustBefore(a), b])
    assert [f.level_view().level for f in (a, b)] == [1, 1]
    assert b.level_view().held_back == 1
    assert a.drain() == 1
    levels.coordinate([a, b])
    with redis.Redis.from_url(redis_url) as conn:
        depths = {r["url"]: r["depth"] for r in api.records(conn, "sh")}
    assert depths["http://b.test/u"] == 2
