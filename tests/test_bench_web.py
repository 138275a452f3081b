"""`rqcrawl bench --web`: the rule checks catch what a site owner would (a log with planted
violations fails them), and rqcrawl's crawl of a small web keeps them; `rqcrawl bench --card`:
the card's fleet on a small one-host site prints its jobs per page and gaps."""

from __future__ import annotations

import re
import socket
import subprocess

import pytest
from helpers import BIN, wait_until

from rqcrawl.bench.conduct import Judge
from rqcrawl.bench.runs import installed
from rqcrawl.bench.web import run
from rqcrawl.bench.webhosts import Reply, WebSpec, build, is_robots
from rqcrawl.bench.webserver import Entry, WebServer

UA = "rqcrawl/0.1 (+https://pypi.org/project/rqcrawl/)"
# Six hosts with the misbehaviours that cost a crawl time or test a rule: a hanging and an
# always-500 robots.txt, robots.txt redirects, a Crawl-delay, a group for our agent, a 503
# then OK; 429 with Retry-After, redirect and refresh into Disallowed paths, nofollow, a 503
# burst. Low latency and few pages keep the crawl short; the hanging robots.txt sets it
# (its read timeout).
SMALL = WebSpec(
    hosts=6, min_pages=3, max_pages=6, min_latency=0.01, max_latency=0.05,
    robots_roles=("hang-then-ok", "redirect-3", "crawl-delay", "500", "agent-group",
                  "503-then-ok"),
    page_roles=("429", "redirect-private", "refresh-private", "nofollow-meta", "noindex",
                "503-burst"),
)  # fmt: skip
ORIGINS = [f"http://127.0.0.{i + 1}:8000" for i in range(SMALL.hosts)]


def entry(host: int, target: str, start: float, end: float, status: int = 200, **kw) -> Entry:
    return Entry(host, 1, target, kw.pop("ua", UA), start, end, status, **kw)


def verdicts(log: list[Entry]) -> dict[str, list[str]]:
    judge = Judge(build(SMALL, ORIGINS), log, delay=1.0, t0=0.0)
    return {c.name: c.offending for c in judge.checks()}


def polite_log() -> list[Entry]:
    """Host 2 (Crawl-delay 2) and host 0 (a 429), crawled as the rules ask."""
    return [
        entry(2, "/robots.txt", 0.0, 0.1),
        entry(2, "/", 0.1, 0.2),  # right after robots.txt: no turn
        entry(2, "/p1.html", 2.2, 2.3),
        entry(2, "/p2.html;jsessionid=A1B2C3D4", 4.3, 4.4),
        entry(0, "/robots.txt", 0.0, 0.1),
        entry(0, "/", 0.1, 0.2),
        entry(0, "/p2.html", 1.2, 1.3, 429, retry_after=5.0),
        entry(0, "/p2.html", 6.3, 6.4),
    ]


def test_a_polite_log_passes_every_check():
    assert all(not bad for bad in verdicts(polite_log()).values()), verdicts(polite_log())


def test_the_hosts_no_page_of_which_was_answered_are_named():
    log = [*polite_log(), entry(1, "/robots.txt", 0.0, 0.1), entry(1, "/", 0.1, 0.2, 503)]
    judge = Judge(build(SMALL, ORIGINS), log, delay=1.0, t0=0.0)
    assert judge.unvisited() == [1, 3, 4, 5]  # host 1: robots.txt and a 503 only


def test_the_floor_with_back_off_adds_what_a_pushing_back_host_is_owed():
    """Host 0 (pace 1 s) answers 503 twice, then 200 three times: the plain floor spaces its
    requests 1 s apart; the floor with back-off 2 s, then 4 s (doubled), then 2 s (halved),
    then 1 s (below the pace: gone)."""
    log = [entry(0, "/robots.txt", 0.0, 0.0)]
    for i, status in enumerate((503, 503, 200, 200, 200)):
        log.append(entry(0, f"/p{i}.html", float(i), float(i), status))
    judge = Judge(build(SMALL, ORIGINS), log, delay=1.0, t0=0.0)
    assert judge.host_floor(0) == 4.0
    assert judge.host_floor(0, backoff=True) == 2.0 + 4.0 + 2.0 + 1.0


def test_a_host_whose_robots_txt_never_answers_is_owed_the_patience():
    """Host 3's robots.txt answers 500 at every ask: its floor with back-off is the patience
    (its pages wait that long before they fail), the plain floor only its answers' time."""
    log = [entry(3, "/robots.txt", float(t), float(t), 500) for t in (0, 2, 6)]
    judge = Judge(build(SMALL, ORIGINS), log, delay=1.0, t0=0.0, patience=120.0)
    assert judge.host_floor(3) == 0.0
    assert judge.host_floor(3, backoff=True) == 120.0
    log[-1] = entry(3, "/robots.txt", 6.0, 6.0, 404)  # a usable answer: nothing owed
    judge = Judge(build(SMALL, ORIGINS), log, delay=1.0, t0=0.0, patience=120.0)
    assert judge.host_floor(3, backoff=True) == 0.0


def test_each_planted_violation_fails_its_check_and_names_the_line():
    planted = {
        "robots.txt first": entry(1, "/p1.html", 0.0, 0.05),  # host 1: no robots.txt yet
        "nothing Disallowed": entry(2, "/private/redirected.html", 10.0, 10.1),
        "pace, robots.txt hops included": entry(0, "/p3.html", 6.5, 6.6),  # 0.1 s after
        "Crawl-delay": entry(2, "/p3.html", 5.0, 5.1),  # 0.6 s after, Crawl-delay 2
        "Retry-After": entry(0, "/p1.html", 2.0, 2.1),  # 0.7 s after a Retry-After: 5
        "nofollow": entry(3, "/nf-meta.html", 20.0, 20.1),
        "one fetch per logical page": entry(2, "/p1.html?utm_source=feed", 30.0, 30.1),
    }
    robots_for_the_plants = [entry(3, "/robots.txt", 0.0, 0.1, 404)]
    for name, bad in planted.items():
        log = polite_log() + robots_for_the_plants + [bad]
        found = verdicts(log)
        assert any(bad.target in line for line in found[name]), (name, found[name])


def test_a_restarting_and_a_slow_robots_txt_as_the_web_serves_them():
    """Issue 46's roles: a 503 for the first 20 s of asks (a restart), a 30 s answer."""
    down, slow = build(WebSpec(hosts=2, robots_roles=("503-20s", "slow-30s")), ORIGINS[:2])
    assert [down.respond("/robots.txt").status for _ in range(2)] == [503, 503]
    down.first_robots -= 20.0  # as if asked first 20 s ago: back
    assert down.respond("/robots.txt").status == 200
    reply = slow.respond("/robots.txt")
    assert reply.status == 200 and reply.latency >= 30.0 and b"Disallow" in reply.body


def test_an_answer_the_client_gave_up_on_is_logged_as_none():
    """A client that stops waiting (its read timeout) never had the answer: the log says so
    (status None), and the floor does not count the late write as the host's time."""

    class Slow:
        def respond(self, target: str) -> Reply:
            return Reply(200, b"late", latency=1.0)

    with WebServer(1) as server:
        server.start([Slow()])
        host, port = server.origins[0].removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as client:
            client.sendall(b"GET /robots.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            client.shutdown(socket.SHUT_WR)  # the client's timeout: it leaves
        entry = wait_until(
            lambda: server.log[0] if server.log[0].end else None, 5, "the request's end",
            ignoring=(IndexError,),  # not logged yet
        )  # fmt: skip
    assert entry.status is None and entry.end - entry.start >= 0.9


def test_robots_answers_that_forbid_crawling_do_not_count_as_robots_first():
    """A 5xx, a 429 or no answer at all (a hang) is no robots.txt to crawl by."""
    for status in (500, 503, 429, None):
        log = [entry(5, "/robots.txt", 0.0, 0.1, status), entry(5, "/", 1.2, 1.3)]
        assert verdicts(log)["robots.txt first"], status


def test_rqcrawl_crawls_a_small_web_at_defaults_within_the_rules():
    """rqcrawl crawl at default settings, judged from the servers' logs: every rule kept,
    robots.txt's redirect hops paced like any request. Only robots_patience is shortened
    (10 s): the always-500 robots.txt would hold its host's pages for the default 120 s,
    which is that setting's wait and nothing this test measures."""
    r = run(SMALL, timeout=240, robots_patience=10.0)
    assert r.exit_code == 0
    checks = {c.name: c for c in r.judge.checks()}
    for check in checks.values():
        assert check.passed, check.lines()
    assert checks["Retry-After"].applies >= 1  # the 429s were met
    assert checks["Crawl-delay"].applies >= 2
    pages = {e.target for e in r.judge.by_host[0] if not is_robots(e.target)}
    assert "/" in pages and "/p1.html" in pages  # the hung robots.txt did not stop the host
    assert not [e for e in r.judge.by_host[3] if not is_robots(e.target)]  # robots.txt 500
    assert r.judge.unvisited() == [3]  # every other host crawled
    floor, _ = r.judge.floor()
    assert 0 < floor <= r.wall_s  # the floor is a lower bound of a polite crawl
    assert r.connections >= 1 and r.requests >= r.connections


@pytest.mark.skipif(not installed("crawlee"), reason="Crawlee is not installed (rqcrawl[bench])")
def test_crawlee_crawls_a_small_web_judged_by_the_same_logs():
    """Crawlee for Python (rqcrawl.bench.politecrawlee) on two hosts, judged from the servers'
    logs like rqcrawl: its robots.txt option keeps it off /private/ and off the host whose
    robots.txt answers 500, and every page it fetched was checked."""
    spec = WebSpec(
        hosts=2, min_pages=3, max_pages=5, min_latency=0.01, max_latency=0.05,
        robots_roles=("plain", "500"), page_roles=("429", "plain"),
    )  # fmt: skip
    r = run(spec, "crawlee", timeout=120)
    assert r.exit_code == 0
    checks = {c.name: c for c in r.judge.checks()}
    assert checks["robots.txt first"].passed and checks["nothing Disallowed"].passed
    pages = {e.target for e in r.judge.by_host[0] if not is_robots(e.target)}
    assert {"/", "/p1.html"} <= pages and checks["nothing Disallowed"].applies >= len(pages)
    assert not [e for e in r.judge.by_host[1] if not is_robots(e.target)]  # robots.txt 500


def test_bench_card_prints_jobs_per_page_and_the_longest_gaps():
    proc = subprocess.run(
        [str(BIN / "rqcrawl"), "bench", "--card", "--pages", "10"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "pages fetched 10, failed 0" in proc.stdout, proc.stdout
    started = re.search(r"RQ jobs executed \d+ \((\d+) of URLs, \d+ wakers\)", proc.stdout)
    finished = re.search(r"finished jobs by kind: (.*)", proc.stdout)[1]
    # every URL's job started (from the workers' logs) is one that finished (RQ's registry)
    assert int(started[1]) == sum(int(n) for n in re.findall(r" (\d+)", finished)), proc.stdout
    gaps = [float(g) for g in re.findall(r"([\d.]+) s \(at \+", proc.stdout)]
    assert len(gaps) == 3 and all(g >= 0.99 for g in gaps), proc.stdout  # the 1 s pace
    # an exact crawl of the site's pages within depth 3, each requested once
    assert "pages at their shortest depth: 10 of 10 (deeper 0, missing 0, unexpected 0); " \
        "requests of one URL at most 1" in proc.stdout, proc.stdout  # fmt: skip
    assert "reproduce: rqcrawl bench --card --pages 10" in proc.stdout
