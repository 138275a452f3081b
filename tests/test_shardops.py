"""The operator's side of a crawl kept on several Redis servers (shards): its records merged
from every shard, pause/resume/cancel/purge that cover every shard and that a second call
completes after a crash between two shards, local workers that serve every shard, and the
commands (`rqcrawl crawl --shards`, export, list, failures, pause...) from either shard.

The first tests give each shard the same crawl name with its own hosts, as a sharded crawl
does, to the functions that take the shards' connections in shard order; the last ones run
a real sharded crawl (test_shards' four hosts)."""

from __future__ import annotations

import io
import json
import socket
import time
from contextlib import ExitStack

import pytest
import redis
from helpers import read_jsonl, rqcrawl, status, wait_finished, wait_until
from rq import Worker
from servers import HTTPSite, RedisServer
from test_shards import (
    HOSTS,
    PAGES,
    Web,
    check_exact,
    records_of,
    seed_sharded,
    start_sites,
)  # fmt: skip
from testsite import Site

from rqcrawl import config
from rqcrawl.frontier import configs, keys
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.frontier.state import CrawlState
from rqcrawl.ops import control, sinks, stats
from rqcrawl.ops.exporters.csv import CsvExporter
from rqcrawl.workers.runner import LocalWorkers


@pytest.fixture
def shards(redis_url, second_redis_url) -> list[redis.Redis]:
    """Two empty Redis servers, in shard order."""
    conns = [redis.Redis.from_url(url) for url in (redis_url, second_redis_url)]
    yield conns
    for c in conns:
        c.close()


def urls_of(shards: list[redis.Redis]) -> list[str]:
    kw = [c.connection_pool.connection_kwargs for c in shards]
    return [f"redis://{k['host']}:{k['port']}/0" for k in kw]


def start_on(shard: redis.Redis, crawl: str, seed: str, **flags) -> config.CrawlConfig:
    """The crawl's part on one shard: its settings and its seed (of this shard's host)."""
    base = {"allow_private": True, "delay": 0, "max_depth": 2, "sitemaps": False, **flags}
    cfg = config.layered(None, base).scoped_to([seed])
    return control.start(shard, crawl, cfg, [seed])[0]


def add(shard: redis.Redis, crawl: str, entry_id: str, url: str, change: str | None = None):
    record = {"url": url, "outcome": "fetched", "depth": 0, "change": change}
    shard.xadd(CrawlKeys(crawl).items, {"r": json.dumps(record)}, id=entry_id)


def test_records_of_every_shard_merge_by_time_then_shard(shards):
    a, b = shards
    add(a, "m", "1000-0", "http://a/1")
    add(b, "m", "1000-0", "http://b/1", "new")  # same millisecond: shard 0 first
    add(a, "m", "1000-1", "http://a/2", "new")
    add(b, "m", "2000-0", "http://b/2", "changed")
    add(a, "m", "3000-0", "http://a/3", "changed")
    add(b, "m", "2500-0", "http://b/3")
    merged = [r["url"] for r in sinks.iter_records(shards, "m", batch=1)]
    assert merged == ["http://a/1", "http://a/2", "http://b/1", "http://b/2", "http://b/3",
                      "http://a/3"]  # fmt: skip
    since = [r["url"] for r in sinks.iter_records(shards, "m", since=2.0)]
    assert since == ["http://b/2", "http://b/3", "http://a/3"]
    changed = [r["url"] for r in sinks.iter_records(shards, "m", changes={"changed"})]
    assert changed == ["http://b/2", "http://a/3"]
    assert [r["url"] for r in sinks.iter_records(a, "m")] == ["http://a/1", "http://a/2",
                                                             "http://a/3"]  # fmt: skip
    out = io.StringIO()
    assert sinks.export(shards, "m", out, CsvExporter, changes={"new"}) == 2
    assert [line.split(",")[0] for line in out.getvalue().splitlines()] == [
        "url", "http://a/2", "http://b/1"]  # fmt: skip


def marks(shards: list[redis.Redis], crawl: str) -> list[set[str]]:
    return [CrawlState(s, crawl, config.CrawlConfig()).marks() for s in shards]


def test_pause_and_resume_cover_every_shard_and_complete_a_half_done_step(shards):
    for n, shard in enumerate(shards):
        start_on(shard, "pr", f"http://127.0.0.{n + 2}:9/")
    CrawlState(shards[0], "pr", config.CrawlConfig()).pause()  # a pause that crashed midway
    assert control.pause(shards, "pr", "running")  # completed: shard 1 paused now
    assert marks(shards, "pr") == [{keys.PAUSED_AT}] * 2
    assert not control.pause(shards, "pr", "paused")  # paused everywhere already
    cfg = configs.load(shards[0], "pr")
    control.resume(shards[:1], "pr", cfg, "paused")  # a resume that crashed midway
    assert marks(shards, "pr") == [set(), {keys.PAUSED_AT}]
    control.resume(shards, "pr", cfg, "running")  # shard 1 still paused: resumed now
    assert marks(shards, "pr") == [set(), set()]
    with pytest.raises(control.ControlError, match="crawl pr is running, not paused"):
        control.resume(shards, "pr", cfg, "running")


def test_cancel_halts_every_shard_then_cancels_each_and_a_second_call_completes(shards):
    for n, shard in enumerate(shards):
        start_on(shard, "cx", f"http://127.0.0.{n + 2}:9/")
    queued = [len(shard.lrange("rq:queue:crawl", 0, -1)) for shard in shards]
    assert queued == [1, 1]  # each shard's seed released as an RQ job
    first = control.cancel(shards[:1], "cx", "running")  # a cancel that crashed midway
    assert (first.held, first.in_flight, first.jobs_removed) == (0, 1, 1)
    done = control.cancel(shards, "cx", "cancelled")  # from any state but finished
    assert (done.held, done.in_flight, done.jobs_removed) == (0, 1, 1)  # shard 1's part
    assert marks(shards, "cx") == [{keys.PAUSED_AT, keys.CANCELLED_AT}] * 2
    assert [shard.llen("rq:queue:crawl") for shard in shards] == [0, 0]
    assert [stats.status(shard, "cx")["state"] for shard in shards] == ["cancelled"] * 2
    with pytest.raises(control.ControlError, match="crawl cx is already cancelled"):
        control.cancel(shards, "cx", "cancelled")


def test_purge_marks_every_shard_first_and_completes_after_a_crash(shards):
    for n, shard in enumerate(shards):
        start_on(shard, "pg", f"http://127.0.0.{n + 2}:9/")
        start_on(shard, "pg-b", f"http://127.0.0.{n + 2}:9/")  # a crawl that must stay
    with pytest.raises(control.ControlError, match="crawl pg is running: cancel it first"):
        control.purge(shards, "pg", "running")
    assert not control.purging(shards, "pg")
    for shard in shards:  # a purge that crashed after deleting shard 0
        CrawlState(shard, "pg", config.CrawlConfig()).mark_purging()
    control.discard(shards[0], "pg")
    assert control.purging(shards, "pg")  # what tells the next call to complete it
    done = control.discard_all(shards, "pg")
    assert done.keys > 0 and done.jobs == 1  # shard 1's keys and its seed's job
    assert [shard.keys("rqcrawl:{pg}:*") for shard in shards] == [[], []]
    assert [shard.smembers(keys.CRAWLS) for shard in shards] == [{b"pg-b"}] * 2
    done = control.purge(shards, "pg-b", "running", force=True)
    assert done.jobs == 2 and not any(shard.keys("rqcrawl:*") for shard in shards)


def page_hits(http: HTTPSite) -> dict[str, int]:
    return {p: n for p, n in http.hits.items() if p != "/robots.txt"}


@pytest.mark.parametrize("threads", [1, 2])
def test_local_workers_serve_every_shard(shards, tmp_path, threads):
    """N processes per shard, each with `threads` workers (the recommended worker's slots)."""
    site = Site(pages=12)
    expected = site.expected(2)
    hosts = ["127.0.0.2", "127.0.0.3"]
    with (
        HTTPSite(site.handle, host=hosts[0], max_requests=200, max_seconds=120) as one,
        HTTPSite(site.handle, host=hosts[1], max_requests=200, max_seconds=120) as two,
    ):
        for shard, http in zip(shards, (one, two), strict=True):
            start_on(shard, "lw", http.base + "/p0.html")
        with LocalWorkers(urls_of(shards), 1, threads, tmp_path) as pool:
            assert len(pool.procs) == 2
            for shard in shards:
                wait_until(
                    lambda s=shard: stats.status(s, "lw")["state"] == "finished",
                    90,
                    "every shard to finish",
                )
            names = [sorted(w.name for w in Worker.all(connection=s)) for s in shards]
            assert pool.unserved() == []
            host = socket.gethostname()
            assert names == [
                sorted([f"{host}:{p.pid}", *(f"{host}:{p.pid}:s{i}" for i in range(1, threads))])
                for p in pool.procs
            ]
    for http in (one, two):
        assert len(page_hits(http)) == len(expected)
        assert all(n == 1 for n in page_hits(http).values()), http.hits
    records = list(sinks.iter_records(shards, "lw"))
    assert len(records) == 2 * len(expected)
    assert {r["url"].split("/")[2].split(":")[0] for r in records} == set(hosts)


def test_a_shard_without_workers_is_reported(shards, tmp_path):
    with LocalWorkers(urls_of(shards), 1, 1, tmp_path) as pool:
        wait_until(lambda: pool.unserved() == [], 10, "the workers to run")
        pool.procs[1].kill()
        pool.procs[1].wait()
        assert pool.unserved() == [1]


# --- a sharded crawl, through the commands ------------------------------------------------


def crawl_conf(web: Web, urls: list[str], tmp_path) -> str:
    """test_shards' settings: host 1 on shard 0 and host 3 on shard 1 by rules."""
    conf = tmp_path / "shards.toml"
    scope = ", ".join(f'"{b.removeprefix("http://")}"' for b in web.bases)
    conf.write_text(
        f"[crawl]\nscope_hosts = [{scope}]\n"
        f'shard_rules = {{ "127.0.0.1:*" = "{urls[0]}", "127.0.0.3:*" = "{urls[1]}" }}\n'
    )
    return str(conf)


def crawl_keys(urls: list[str]) -> list[list[bytes]]:
    found = []
    for url in urls:
        with redis.Redis.from_url(url) as conn:
            found.append(conn.keys("rqcrawl:*"))
    return found


def test_rqcrawl_crawl_over_shards_then_every_command_from_either_shard(
    redis_url, second_redis_url, tmp_path
):
    urls = [redis_url, second_redis_url]
    web = Web()
    out = tmp_path / "out.jsonl"
    with ExitStack() as stack:
        sites = start_sites(stack, web, max_seconds=180)
        rqcrawl(
            "redis://127.0.0.1:1/0",  # not used: the shards are the servers
            "crawl", web.url(0, 0), "--shards", ",".join(urls), "--crawl", "sh",
            "--max-depth", "3", "--allow-private", "--delay", "0", "--no-sitemaps",
            "--workers", "1", "--threads", "2", "--config", crawl_conf(web, urls, tmp_path),
            "-o", str(out), "--data-dir", str(tmp_path / "data"),
        )  # fmt: skip
    # every shard's records, delivered to the file as they came, and trimmed from Redis
    rows = check_exact(web, sites, urls, 3, rows=read_jsonl(out))
    assert records_of(urls[0]) == []
    assert {int(p.stem) for p in (tmp_path / "data" / "workers").glob("*.log")} == {1, 2}
    for url in urls:
        listed = rqcrawl(url, "list").stdout.splitlines()
        assert listed[1].split()[:2] == ["sh", "finished"], listed
        [row] = json.loads(rqcrawl(url, "list", "--json").stdout)
        assert (row["shards"], row["fetched"]) == (2, len(rows))
        assert rqcrawl(url, "failures", "sh").stdout == ""
    csv_out = tmp_path / "out.csv"
    rqcrawl(urls[1], "export", "sh", "-o", str(csv_out))
    assert len(csv_out.read_text().splitlines()) == 1  # every record was delivered: a header
    assert "crawl sh purged" in rqcrawl(urls[1], "purge", "sh").stdout
    assert crawl_keys(urls) == [[], []]


def test_pause_resume_and_cancel_from_either_shard_with_workers_on_both(
    redis_url, second_redis_url, tmp_path
):
    urls = [redis_url, second_redis_url]
    conns = [redis.Redis.from_url(url) for url in urls]
    # 0.4 s a page: the crawl outlasts a `pause` command's start-up on a loaded machine
    web = Web(slow={(h, i): 0.4 for h in range(HOSTS) for i in range(PAGES)})
    with ExitStack() as stack:
        sites = start_sites(stack, web, max_seconds=240)
        hits = lambda: sum(sum(s.hits.values()) for s in sites)  # noqa: E731
        seed_sharded(urls, web, tmp_path, 4)
        stack.enter_context(LocalWorkers(urls, 1, log_dir=tmp_path / "workers"))
        wait_until(lambda: hits() >= 6, 60, "a few pages fetched")
        assert rqcrawl(urls[1], "pause", "sh").stdout.strip() == "crawl sh paused"
        assert marks(conns, "sh") == [{keys.PAUSED_AT}] * 2
        wait_until(lambda: status(urls[0], "sh"), 30, "nothing in flight",
                   accept=lambda s: s["in_flight"] == 0 and s["state"] == "paused")  # fmt: skip
        requested = hits()
        time.sleep(1.5)  # nothing is released on either shard while paused
        assert hits() == requested
        rqcrawl(urls[0], "resume", "sh")
        assert marks(conns, "sh") == [set(), set()]
        wait_finished(urls[1], "sh")
        check_exact(web, sites, urls, 4)

        rqcrawl(urls[0], "purge", "sh")
        web.slow.update({(h, i): 1.0 for h in range(HOSTS) for i in range(PAGES)})
        seed_sharded(urls, web, tmp_path, 4)  # again, from scratch, slower
        wait_until(lambda: status(urls[0], "sh")["fetched"] >= 2, 60, "a few pages again")
        said = rqcrawl(urls[1], "cancel", "sh").stdout
        assert said.startswith("crawl sh cancelled:"), said
        assert marks(conns, "sh") == [{keys.PAUSED_AT, keys.CANCELLED_AT}] * 2
        assert [status(url, "sh")["state"] for url in urls] == ["cancelled"] * 2
        again = rqcrawl(urls[0], "cancel", "sh", check=False)
        assert "crawl sh is already cancelled" in again.stderr
        wait_until(lambda: all(w.get_state() == "idle" for c in conns
                               for w in Worker.all(connection=c)), 30, "workers idle")  # fmt: skip
        requested = hits()
        time.sleep(1)
        assert hits() == requested
    for c in conns:
        c.close()


def test_a_purge_interrupted_between_shards_completes_from_the_other(
    redis_url, second_redis_url, tmp_path
):
    urls = [redis_url, second_redis_url]
    web = Web()
    web.bases = ["http://127.0.0.1:9", "http://127.0.0.2:9", "http://127.0.0.3:9",
                 "http://127.0.0.4:9"]  # fmt: skip
    seed_sharded(urls, web, tmp_path, 2)
    assert "running: cancel it first" in rqcrawl(urls[1], "purge", "sh", check=False).stderr
    with redis.Redis.from_url(urls[0]) as first, redis.Redis.from_url(urls[1]) as second:
        for conn in (first, second):  # what control.purge does before a crash...
            CrawlState(conn, "sh", config.CrawlConfig()).mark_purging()
        control.discard(first, "sh")  # ...after shard 0 is gone
    gone = rqcrawl(urls[0], "status", "sh", check=False)
    assert "no crawl named 'sh'" in gone.stderr
    assert "crawl sh purged" in rqcrawl(urls[1], "purge", "sh").stdout  # no --force needed
    assert crawl_keys(urls) == [[], []]


def test_a_shard_out_of_reach_is_a_one_line_error(redis_url, tmp_path):
    other = RedisServer(tmp_path / "other").start()
    try:
        web = Web()
        web.bases = [f"http://127.0.0.{h + 1}:9" for h in range(HOSTS)]
        seed_sharded([redis_url, other.url], web, tmp_path, 2)
    finally:
        other.stop()
    for command in (["status", "sh"], ["export", "sh", "-o", "-"], ["cancel", "sh"]):
        out = rqcrawl(redis_url, *command, check=False)
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.startswith(
            f"Error: Redis: Error 111 connecting to 127.0.0.1:{other.port}"
        )
