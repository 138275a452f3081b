"""A host's pace listens to it (rqcrawl.fetch.politeness): one slow response does not stretch the
schedule, 429s slow the host down and each success halves that, any Retry-After is survived,
and hosts on one address share one gate with politeness_by = "ip"."""

from __future__ import annotations

import itertools
import threading
import time
from http.server import BaseHTTPRequestHandler

from helpers import read_jsonl, rqcrawl, seed_local, status, wait_finished
from servers import HTTPSite, reply
from test_politeness import scope

from rqcrawl.fetch.http import RETRY_AFTER_MAX, retry_after
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.frontier.messages import HostPace
from rqcrawl.workers.runner import LocalWorkers


def settings(tmp_path, name: str, *sites: HTTPSite, **values) -> str:
    """A config file: the sites' scope and `values`."""
    path = tmp_path / f"{name}.toml"
    text = scope(tmp_path, *sites).read_text()
    text += "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in values.items())
    path.write_text(text)
    return str(path)


def start_gaps(site: HTTPSite, paths: set[str] | None = None) -> list[float]:
    times = sorted(t for t, p in site.log if paths is None or p in paths)
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def records(redis_url: str, crawl: str, tmp_path) -> dict[str, dict]:
    out = tmp_path / f"{crawl}.jsonl"
    rqcrawl(redis_url, "export", crawl, "-o", str(out))
    return {r["url"].rsplit("/", 1)[1]: r for r in read_jsonl(out)}


def test_two_timeouts_do_not_stretch_the_pace_of_the_next_fast_pages(redis_url, tmp_path):
    fast = {f"/p{i}" for i in range(20)}

    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/robots.txt":
            reply(req, 404, b"")
        elif req.path in ("/", "/hub"):  # the fast pages come one level after the timeouts
            links = ["/hub", "/slow1", "/slow2"] if req.path == "/" else sorted(fast)
            reply(req, 200, "".join(f'<a href="{u}">x</a>' for u in links).encode())
        elif req.path.startswith("/slow"):
            time.sleep(3.0)  # past read_timeout: a timeout
            reply(req, 200, b"late")
        else:
            reply(req, 200, b"<title>fast</title>")

    delay = 0.4
    with HTTPSite(handle, max_requests=60, max_seconds=120) as http:
        conf = settings(tmp_path, "t", http, read_timeout=1.5, retries=0)
        seed_local(redis_url, http.base + "/", "t", 2, "--delay", str(delay), "--config", conf)
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "t")
    assert http.hits["/slow1"] == http.hits["/slow2"] == 1
    assert all(http.hits[p] == 1 for p in fast)
    gaps = start_gaps(http, fast)
    # the slot spacing is the delay plus a smoothed fetch time bounded by the delay: one
    # timeout of 1.5 s used to space every later slot by delay + 1.5 s
    assert max(gaps) <= 3 * delay, gaps
    assert min(gaps) >= delay * 0.95, gaps


def test_a_host_answering_429_gets_growing_gaps_then_all_its_pages(redis_url, tmp_path):
    lock, answered = threading.Lock(), []

    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/robots.txt":
            reply(req, 404, b"")
            return
        with lock:
            answered.append(req.path)
            pushed = len(answered) <= 3
        if pushed:
            reply(req, 429, b"slow down")
        elif req.path == "/":
            reply(req, 200, "".join(f'<a href="/p{i}">x</a>' for i in range(5)).encode())
        else:
            reply(req, 200, b"<title>page</title>")

    with HTTPSite(handle, max_requests=40, max_seconds=120) as http:
        conf = settings(tmp_path, "b", http, retries=4, retry_base=0.05)
        seed_local(redis_url, http.base + "/", "b", 1, "--delay", "0.2", "--config", conf)
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "b")
    gaps = start_gaps(http, {p for _, p in http.log if p != "/robots.txt"})
    # each 429 doubles the host's delay (0.2 s, at least 0.25 s, x2): 0.5, 1, 2 s
    assert gaps[0] >= 0.5 * 0.95 and gaps[1] >= 1.0 * 0.95 and gaps[2] >= 2.0 * 0.95, gaps
    assert gaps[0] < gaps[1] < gaps[2], gaps
    # and each success halves it again: the gaps shrink back to the delay
    assert gaps[3] < 0.75 * gaps[2] and gaps[-1] < 0.5, gaps
    rows = records(redis_url, "b", tmp_path)
    assert all(rows[f"p{i}"]["outcome"] == "fetched" for i in range(5))
    assert rows[""]["outcome"] == "fetched" and rows[""]["attempts"] == 4


def test_retry_after_of_a_year_or_400_digits_leaves_a_crawl_that_finishes(
    redis_url, conn, tmp_path
):
    year = {"Retry-After": "31536000"}

    def robots_asks_a_year(req: BaseHTTPRequestHandler) -> None:
        reply(req, 503, b"", headers=year)

    with HTTPSite(robots_asks_a_year, host="127.0.0.3", max_requests=10, max_seconds=90) as b:

        def handle(req: BaseHTTPRequestHandler) -> None:
            if req.path == "/robots.txt":
                reply(req, 404, b"")
            elif req.path == "/":
                links = ["/year", "/digits", "/date", "/garbage", b.base + "/x"]
                reply(req, 200, "".join(f'<a href="{u}">x</a>' for u in links).encode())
            elif req.path == "/year":
                reply(req, 503, b"", headers=year)
            elif req.path == "/digits":
                reply(req, 429, b"", headers={"Retry-After": "9" * 400})
            elif req.path == "/date":
                reply(req, 429, b"", headers={"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"})
            else:
                reply(req, 503, b"", headers={"Retry-After": "soon, maybe \x7f"})

        with HTTPSite(handle, host="127.0.0.2", max_requests=30, max_seconds=90) as a:
            conf = settings(
                tmp_path, "y", a, b, max_retry_after=2.0, max_backoff_delay=1.0, retries=1,
                retry_base=0.1, robots_patience=3.0,
            )  # fmt: skip
            seed_local(redis_url, a.base + "/", "y", 1, "--config", conf)
            with LocalWorkers(redis_url, 1):
                s = wait_finished(redis_url, "y", timeout=60)
    rows = records(redis_url, "y", tmp_path)
    for path in ("year", "digits", "date"):
        assert rows[path]["outcome"] == "failed", rows[path]
        assert rows[path]["reason"] == "retry_after_too_long", rows[path]
    assert rows["garbage"]["reason"] == "http_5xx"  # retried, then failed: no exception
    assert rows["x"]["outcome"] == "failed" and rows["x"]["reason"] == "robots"
    assert s["failed_by_reason"]["retry_after_too_long"] == 3
    # the host's delay in force says why: backed off, up to max_backoff_delay
    pace = HostPace.parse(conn.hget(CrawlKeys("y").hosts, f"{a.host}:{a.port}"))
    assert pace.why == "back-off" and pace.delay == 1.0
    [row] = [h for h in status(redis_url, "y")["hosts"] if h["host"] == f"{a.host}:{a.port}"]
    assert row["delay_source"] == "back-off" and row["delay_s"] == 1.0  # status shows it too


def test_two_hosts_on_one_ip_share_one_gate_with_politeness_by_ip(redis_url, tmp_path):
    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/robots.txt":
            reply(req, 404, b"")
        else:
            i = int(req.path.strip("/") or 0)
            links = "".join(f'<a href="/{k}">x</a>' for k in (2 * i + 1, 2 * i + 2) if k < 6)
            reply(req, 200, f"<title>{i}</title>{links}".encode())

    delay = 0.4
    with (
        HTTPSite(handle, max_requests=30, max_seconds=120) as a,
        HTTPSite(handle, max_requests=30, max_seconds=120) as b,
    ):
        conf = settings(tmp_path, "ip", a, b, politeness_by="ip")
        seed_local(redis_url, a.base + "/", "ip", 2, "--delay", str(delay), "--config", conf)
        rqcrawl(redis_url, "seed", b.base + "/", "--crawl", "ip")
        with LocalWorkers(redis_url, 2):
            wait_finished(redis_url, "ip")
    assert len(a.hits) == len(b.hits) == 7  # six pages and robots.txt each
    both = sorted(entry for site in (a, b) for entry in site.log)
    # (robots.txt takes no turn: a host's first page may follow it at once)
    gaps = [y[0] - x[0] for x, y in itertools.pairwise(both) if x[1] != "/robots.txt"]
    assert min(gaps) >= delay * 0.95, gaps  # one gate for the two hosts of 127.0.0.1


def test_retry_after_parses_anything_without_an_exception():
    assert retry_after("120") == 120.0 and retry_after(" 7 ") == 7.0
    assert retry_after("9" * 400) == RETRY_AFTER_MAX  # was OverflowError further on
    assert retry_after("Fri, 31 Dec 9999 23:59:59 GMT") == RETRY_AFTER_MAX
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # past
    for junk in ("", "soon", "-5", "1.5", "\u00b2", "Wed, 21 Oct 99999 07:28:00 GMT", None):
        assert retry_after(junk) is None
