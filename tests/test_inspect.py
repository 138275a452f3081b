"""A stuck crawl says why: `rqcrawl inspect` (one URL's place and why), `rqcrawl hosts` (per
host), the stall reasons of `status`, and an ETA that holds for a crawl with slow pages and
timeouts. Each state is reached for real: a worker SIGKILLed, a plain `rq worker` without a
scheduler, one slow host holding the level, a server answering 503 with Retry-After."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import ExitStack
from http.server import BaseHTTPRequestHandler

import pytest
from helpers import (
    child_pids,
    env_with,
    rqcrawl,
    seed_local,
    status,
    stop_pids,
    wait_finished,
    wait_until,
    worker_names,
)
from redis import Redis
from servers import HTTPSite, reply

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import keys
from rqcrawl.frontier.records import record
from rqcrawl.frontier.state import outcome_counts
from rqcrawl.ops import inspection, stats
from rqcrawl.workers.runner import LocalWorkers


def inspect(redis_url: str, crawl: str, url: str) -> dict:
    return json.loads(rqcrawl(redis_url, "inspect", crawl, url, "--json").stdout)


def hosts(redis_url: str, crawl: str, *extra: str) -> dict:
    return json.loads(rqcrawl(redis_url, "hosts", crawl, "--json", *extra).stdout)


def stall_conf(tmp_path, seconds: float = 1.0, extra: str = "") -> str:
    conf = tmp_path / "stall.toml"
    conf.write_text(f"[crawl]\nstall_after = {seconds}\n{extra}")
    return str(conf)


def pages(links: dict[str, list[str]], slow: dict[str, float] | None = None):
    """A site of `links` (path -> the paths it links to); paths in `slow` answer late."""

    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path not in links:
            reply(req, 404, b"no")
            return
        time.sleep((slow or {}).get(req.path, 0.0))
        body = "".join(f'<a href="{p}">{p}</a>' for p in links[req.path])
        reply(req, 200, f"<title>{req.path}</title>{body}".encode())

    return handle


# -- the ETA model ------------------------------------------------------------------------


def simulate_host(durations: list[float], delay: float) -> list[float]:
    """When each URL of one host ends, one request at a time: the gate starts the next
    request `delay` after the previous one ended (politeness.py)."""
    t, ends = 0.0, []
    for d in durations:
        t += d
        ends.append(t)
        t += delay
    return ends


def counts_after(durations: list[float], ends: list[float], at: float) -> dict[str, int]:
    """A host's counters (keys.per_host kinds) once the URLs that ended by `at` ended."""
    done = [d for d, e in zip(durations, ends, strict=True) if e <= at]
    return {
        keys.ADMITTED: len(durations),
        keys.FETCHED: len(done),
        keys.HOST_TIMED: len(done),
        keys.HOST_BUSY_MS: round(sum(done) * 1000),
    }


def test_the_eta_model_holds_for_a_host_with_timeouts():
    """The issue's crawl: one host, every fourth page a 5 s read timeout, the others 0.1 s,
    delay 1 s. A minute in, the host's time left at its measured pace is within 25 % of the
    truth (the old model took the last request's duration: 21 s against 334 s)."""
    durations = [5.0 if i % 4 == 3 else 0.1 for i in range(200)]
    ends = simulate_host(durations, delay=1.0)
    at = 60.0
    n = counts_after(durations, ends, at)
    remaining = n[keys.ADMITTED] - n[keys.FETCHED]
    request_s, per_url = stats.host_pace(n, fetch_s=0.1)
    url_s = stats.url_seconds(request_s, per_url, delay=1.0, concurrency=1)
    row = {"host": "h", "remaining": remaining, "request_s": request_s, "eta_s": remaining * url_s}
    truth = ends[-1] - at
    predicted = stats.eta([row], workers=2)
    assert 0.75 * truth <= predicted <= 1.25 * truth, (predicted, truth)
    # The old model: the remaining URLs at the last request's pace (step = delay + 0.1 s).
    assert remaining * 1.1 < 0.5 * truth


def test_a_hosts_pace_counts_retried_requests_and_a_first_attempt_writes_none_of_its_own():
    """A URL's requests are its host's timed URLs plus their retries: a fetched page on its
    first attempt adds no counter of its requests (one write a page fewer)."""
    first = outcome_counts("h", {keys.FETCHED: 1}, record("http://h/a", "fetched", 0), 0.2)
    again = outcome_counts("h", {keys.FETCHED: 1}, record("http://h/b", "fetched", 0), 0.4, 2)
    assert keys.per_host(keys.HOST_RETRIED, "h") not in first
    both = Counter(first) + Counter(again)
    per_host = {name.partition("|")[0]: n for name, n in both.items() if "|" in name}
    request_s, per_url = stats.host_pace(per_host, fetch_s=0.0)
    assert request_s == pytest.approx((200 + 2 * 400) / 1000 / 3) and per_url == 1.5


def test_the_eta_model_is_bounded_by_the_workers():
    """Forty hosts of 10 URLs of 2 s each and no delay: two workers, not the hosts' own
    pace (20 s), bound the time left (400 requests x 2 s / 2 = 400 s)."""
    n = {keys.ADMITTED: 10, keys.HOST_TIMED: 1, keys.HOST_BUSY_MS: 2000}
    request_s, per_url = stats.host_pace(n, fetch_s=2.0)
    url_s = stats.url_seconds(request_s, per_url, delay=0.0, concurrency=1)
    rows = [{"host": f"h{i}", "remaining": 10, "request_s": request_s, "eta_s": 10 * url_s}
            for i in range(40)]  # fmt: skip
    assert stats.eta(rows, workers=2) == 400.0
    assert stats.eta(rows, workers=0) == 20.0  # no worker known: the hosts' pace
    stuck = {"reason": "no_worker", "since_s": 90, "message": ""}
    assert stats.eta(rows, workers=2, stall=stuck) is None  # a crawl that cannot move


def test_the_pace_counts_retried_timeouts_and_crawl_delay():
    # Two attempts per URL, each a 3 s timeout, delay 0.5 s: 7 s per URL.
    n = {keys.HOST_TIMED: 4, keys.HOST_RETRIED: 4, keys.HOST_BUSY_MS: 24000}
    assert stats.host_pace(n, fetch_s=0.0) == (3.0, 2.0)
    assert stats.url_seconds(3.0, 2.0, delay=0.5, concurrency=1) == 7.0
    assert stats.url_seconds(3.0, 1.0, delay=0.5, concurrency=4) == 0.875  # overlapping
    assert stats.url_seconds(0.1, 1.0, delay=2.0, concurrency=4) == 2.0  # starts 2 s apart
    cfg = CrawlConfig(delay=1.0, max_crawl_delay=5.0)
    rules = {"kind": "rules", "expires": 0, "body": "User-agent: *\nCrawl-delay: 9\n"}
    assert stats.delay_in_force(cfg, rules) == (5.0, "crawl-delay")  # capped
    assert stats.delay_in_force(cfg, None) == (1.0, "setting")
    assert stats.delay_in_force(cfg, None, backoff=4.0) == (4.0, "back-off")


def test_the_eta_of_a_real_crawl_with_timeouts(redis_url, tmp_path):
    """One host, every third page times out (1.2 s), delay 1 s: once a third of the crawl
    has ended, status' ETA and the host's are within 25 % of the time it then takes. (With a
    0.3 s delay a loaded machine's per-job overhead, ~0.3 s, was half of a URL's time.)"""
    paths = [f"/{i}" for i in range(1, 37)]
    slow = {p: 3.0 for p in paths[2::3]}
    conf = stall_conf(tmp_path, extra="read_timeout = 1.2\nretries = 0\nobey_robots = false\n")
    with HTTPSite(pages({"/": paths, **{p: [] for p in paths}}, slow), max_seconds=200) as http:
        seed_local(redis_url, http.base + "/", "eta", 1, "--delay", "1", "--config", conf)
        conn = Redis.from_url(redis_url)
        with LocalWorkers(redis_url, 2):  # (read in-process: a command takes seconds)

            def third(s: dict) -> bool:
                assert s["state"] != "finished", s
                return s["fetched"] + s["failed"] >= 13

            s = wait_until(lambda: stats.status(conn, "eta"), 120, "a third", accept=third)
            at = time.time()
            final = wait_until(
                lambda: stats.status(conn, "eta"), 120, "the end",
                accept=lambda s: s["state"] == "finished",
            )  # fmt: skip
            took = time.time() - at
        conn.close()
    assert final["failed_by_reason"] == {"timeout": 12}
    host = s["hosts"][0]
    assert 0.75 * took <= s["eta_s"] <= 1.25 * took, (s["eta_s"], took, host)
    assert 0.75 * took <= host["eta_s"] <= 1.25 * took, (host, took)


# -- stalls, inspect and hosts, for real -----------------------------------------------------


def test_a_dead_worker_stalls_the_crawl_and_status_says_so(redis_url, conn, tmp_path):
    """A worker SIGKILLed while its crawl waits: it stays registered in RQ for minutes, but
    its process is gone, so `status` says no worker is alive and claims no ETA."""
    paths = [f"/{i}" for i in range(1, 6)]
    site = pages({"/": paths, **{p: [] for p in paths}}, {p: 1.0 for p in paths})
    with ExitStack() as orphans, HTTPSite(site, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/", "dead", 1, "--config", stall_conf(tmp_path))
        workers = orphans.enter_context(LocalWorkers(redis_url, 1, worker_class=None))
        worker_names(conn, workers)
        wait_until(lambda: http.hits["/1"], 60, "a page of depth 1 requested")
        victim = workers.procs[0]
        # Its work-horse and RQ scheduler die with it, as on a lost machine: a horse left
        # alive would end its page later and lift the stall while the test reads it.
        for pid in child_pids(victim.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        s = wait_until(
            lambda: status(redis_url, "dead"), 60, "the stall", accept=lambda s: s["stall"]
        )
        text = rqcrawl(redis_url, "status", "dead").stdout
    assert s["stall"]["reason"] == "no_worker" and s["eta_s"] is None, s
    assert s["workers"] == 0 and s["state"] == "running"
    assert "no worker is alive" in text and "eta        unknown" in text, text


def test_a_plain_worker_without_scheduler_releases_its_deferrals(redis_url, tmp_path):
    """A plain `rq worker crawl` (no --with-scheduler): the host's second and third URLs
    wait in its queue for its turn. `inspect` says so and when; the crawl's waker job
    releases them and the crawl finishes (`rqcrawl status` is not run meanwhile: its
    recovery pass would release them)."""
    seeds = ["/a", "/b", "/c"]
    site = pages({p: [] for p in seeds})
    with ExitStack() as stack, HTTPSite(site, max_seconds=120) as http:
        urls = [http.base + p for p in seeds]
        rqcrawl(redis_url, "seed", *urls, "--crawl", "nosched", "--max-depth", "0",
                "--allow-private", "--no-sitemaps", "--no-robots", "--delay", "3",
                "--config", stall_conf(tmp_path))  # fmt: skip
        worker = subprocess.Popen(
            [sys.executable, "-m", "rq.cli", "worker", "crawl", "--quiet"],
            env=env_with(redis_url), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        stack.callback(stop_pids, [worker.pid])
        conn = Redis.from_url(redis_url)
        held = wait_until(
            lambda: [inspection.url_status(conn, "nosched", u) for u in urls],
            60, "a URL fetched, the others waiting",
            accept=lambda found: any(f["where"] == "ended" for f in found),
            every=0.02,
        )  # fmt: skip
        seen = []
        final = wait_until(
            lambda: seen.append(stats.status(conn, "nosched")) or seen[-1], 90, "finished",
            accept=lambda s: s["state"] == "finished",
        )  # fmt: skip
        conn.close()
    waiting = next(f for f in held if f["where"] == "held")
    assert f"its host {http.host}:{http.port} takes a request in" in waiting["why"], waiting
    assert final["fetched"] == 3 and final["stall"] is None, final


def test_one_slow_host_holds_no_other(redis_url, tmp_path):
    """One slow page of host A (15 s) holds no URL of host B, which goes at its own pace (a
    Crawl-delay of 3 s). While no URL ends, `status` names A as the only host with a
    request running and counts B's URLs as waiting for their own turn, `inspect` of a
    waiting URL of B says when B takes its next request, `hosts` lists A first (running) and
    B's waiting URLs; once over, `inspect` gives the outcome and says when a URL is
    unknown."""
    b_links = [f"/b{i}" for i in range(4)]
    slow_a = pages({"/slow": []}, {"/slow": 15.0})
    fast_b = pages({"/": b_links, **{p: [] for p in b_links}})

    def b_with_delay(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/robots.txt":
            reply(req, 200, b"User-agent: *\nCrawl-delay: 3\n", "text/plain")
        else:
            fast_b(req)

    with (
        HTTPSite(slow_a, host="127.0.0.2", max_seconds=120) as a,
        HTTPSite(b_with_delay, host="127.0.0.3", max_seconds=120) as b,
    ):
        rqcrawl(redis_url, "seed", a.base + "/slow", b.base + "/", "--crawl", "level",
                "--max-depth", "1", "--allow-private", "--no-sitemaps", "--delay", "0",
                "--config", stall_conf(tmp_path, 2.0, "read_timeout = 30.0\n"))  # fmt: skip
        conn = Redis.from_url(redis_url)
        with LocalWorkers(redis_url, 2) as workers:  # (in-process reads: commands are slow)
            names = worker_names(conn, workers)
            s = wait_until(
                lambda: stats.status(conn, "level"), 60, "a stall while host A answers",
                accept=lambda s: s["stall"] and s["stall"]["reason"] == "one_host",
            )  # fmt: skip
            held = inspection.url_status(conn, "level", b.base + "/b3")
            running = inspection.url_status(conn, "level", a.base + "/slow")
            listed = inspection.hosts_report(conn, "level")
            text = inspection.render_hosts(listed)
            wait_until(lambda: b.hits.get("/b3"), 30, "host B's last page")
            wait_finished(redis_url, "level", timeout=60)
        conn.close()
        ended = inspect(redis_url, "level", b.base + "/b1")
        missing = inspect(redis_url, "level", b.base + "/never-linked")
    started = {path: t for t, path in [*a.log, *b.log]}
    assert started["/b3"] < started["/slow"] + 15  # while A was answering
    assert s["stall"]["reason"] == "one_host" and a.host in s["stall"]["message"], s
    assert "URL(s) of other hosts wait for their own turn" in s["stall"]["message"]
    assert s["eta_s"] is not None  # it moves, slowly
    assert held["where"] == "held" and held["depth"] == 1, held
    assert f"its host {b.host}:{b.port} takes a request in" in held["why"], held
    assert running["where"] == "running" and running["worker"] in names, (running, names)
    assert "running on " + running["worker"] in running["why"]
    first, second = listed["hosts"]
    assert first["host"] == f"{a.host}:{a.port}" and first["running"] == 1, first
    assert second["waiting"] >= 1 and second["fetched"] >= 1, second
    assert first["robots"] == "allow (no usable file)"
    assert first["delay_source"] == "setting" and second["delay_source"] == "crawl-delay"
    assert text.splitlines()[0].split()[:2] == ["HOST", "WAITING"]
    assert ended["where"] == "ended" and ended["outcome"] == "fetched", ended
    assert ended["attempts"] == 1 and ended["record"]["status"] == 200
    assert missing["where"] == "unknown" and not missing["seen"], missing
    # --limit bounds the listing; the rest is counted
    assert len(hosts(redis_url, "level", "--limit", "1")["hosts"]) == 1
    assert "1 more hosts" in rqcrawl(redis_url, "hosts", "level", "--limit", "1").stdout


def test_a_retry_after_answer_shows_in_inspect(redis_url, tmp_path):
    """A page answering 503 with Retry-After: 60 waits for its second attempt: `inspect`
    says until when and why (the server's Retry-After, the error), and `hosts` counts it
    deferred."""

    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/busy":
            reply(req, 503, b"busy", headers={"Retry-After": "60"})
        else:
            reply(req, 404, b"no")

    with HTTPSite(handle, max_seconds=120) as http:
        url = http.base + "/busy"
        seed_local(redis_url, url, "later", 0, "--retries", "1", "--config", stall_conf(tmp_path))
        with LocalWorkers(redis_url, 1):
            found = wait_until(
                lambda: inspect(redis_url, "later", url), 60, "the retry",
                accept=lambda f: f["where"] == "deferred",
            )  # fmt: skip
            seen_at = time.time()
            conn = Redis.from_url(redis_url)  # (in-process reads: commands take seconds)
            listed = inspection.hosts_report(conn, "later")
            s = wait_until(
                lambda: stats.status(conn, "later"), 30, "the stall", accept=lambda s: s["stall"]
            )
            conn.close()
    assert found["because"] == "retry" and found["attempt"] == 2, found
    assert "Retry-After 60s after: HTTP 503" in found["why"], found
    assert 30 < found["until"] - seen_at <= 61
    (row,) = listed["hosts"]
    assert row["deferred"] == 1 and row["waiting"] == 1 and row["running"] == 0, row
    assert row["eta_s"] > 20  # not before its Retry-After is over
    # No URL ends while it waits: status says it waits for its time, and still has an ETA.
    assert s["stall"]["reason"] == "deferred" and s["eta_s"] > 20, s


def test_inspect_asks_the_urls_shard_and_hosts_merges_the_shards(
    redis_url, second_redis_url, tmp_path
):
    """A crawl over two Redis servers, the host 127.0.0.2 placed on the second, 127.0.0.3 on
    the first: `inspect`
    (asked on the first) finds each seed queued on its host's shard, and `hosts` lists the
    hosts of both shards. No worker runs: the seeds wait in RQ."""
    seeds = ["http://127.0.0.2:9/a", "http://127.0.0.3:9/b"]
    placed = {"127.0.0.2:9": second_redis_url, "127.0.0.3:9": redis_url}
    rules = "[crawl.shard_rules]\n" + "".join(f'"{h}" = "{u}"\n' for h, u in placed.items())
    conf = tmp_path / "shards.toml"
    conf.write_text(rules)
    both = f"{redis_url},{second_redis_url}"
    rqcrawl(redis_url, "seed", *seeds, "--crawl", "sh", "--max-depth", "0", "--allow-private",
            "--no-sitemaps", "--shards", both, "--config", str(conf))  # fmt: skip
    conn = Redis.from_url(redis_url)
    found = [inspection.url_status(conn, "sh", u) for u in seeds]
    listed = inspection.hosts_report(conn, "sh")
    conn.close()
    assert [f["shard"] for f in found] == [1, 0], found
    assert [f["where"] for f in found] == ["queued", "queued"], found
    assert "waiting for a worker" in found[0]["why"]
    assert sorted(h["host"] for h in listed["hosts"]) == ["127.0.0.2:9", "127.0.0.3:9"]
    assert all(h["waiting"] == 1 and h["robots"] == "not fetched yet" for h in listed["hosts"])
