"""Continuous crawling end to end: a loopback site crawled with --revisit by real workers, whose
pages change between visits. Every visit is a record with its number and change, a page gone
(404) stops being requested, and the crawl is `idle` between rounds, never finished. Workers
killed mid-round and `rqcrawl crawl` interrupted and run again lose no scheduled visit and
fetch nothing before it is due."""

from __future__ import annotations

import itertools
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import ExitStack

import pytest
from helpers import (
    BIN,
    child_pids,
    env_with,
    read_jsonl,
    rqcrawl,
    seed_local,
    stop_pids,
    wait_until,
    worker_names,
)
from servers import HTTPSite, reply
from sqlalchemy import create_engine, select, update
from test_crash import busy

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import leases
from rqcrawl.frontier.tasks import TASKS, TaskTable
from rqcrawl.ops import stats
from rqcrawl.parse.changes import Content, VisitEnd
from rqcrawl.workers.runner import LocalWorkers

GONE_AFTER = 2


class ChangingSite:
    """/ links to /same (never changes), /edit (its words change once, on its second visit)
    and /gone (answers 404 from its second visit on), and from its second visit on also to
    /new."""

    def __init__(self) -> None:
        self.visits: dict[str, int] = defaultdict(int)

    def handle(self, req) -> None:
        path = req.path
        self.visits[path] += 1
        n = self.visits[path]
        if path == "/":
            body = '<a href="/same">s</a><a href="/edit">e</a><a href="/gone">g</a>'
            body += '<a href="/new">n</a>' if n > 1 else ""
        elif path in ("/same", "/new"):
            body = "<title>same</title>always the same"
        elif path == "/edit":
            body = f"<title>edit</title>{'first' if n == 1 else 'second'} version"
        elif path == "/gone" and n == 1:
            body = "<title>gone</title>here for now"
        else:
            reply(req, 404, b"not found")
            return
        reply(req, 200, f"<html>{body}</html>".encode())


@pytest.mark.timeout(120)
def test_revisits_label_every_visit_and_stop_at_a_gone_page(redis_url, conn, tmp_path):
    settings = tmp_path / "revisit.toml"
    settings.write_text(f"revisit_min = 1\nrevisit_max = 2\nrevisit_gone_after = {GONE_AFTER}\n")
    site = ChangingSite()
    db = f"sqlite:///{tmp_path / 'tasks.db'}"
    with HTTPSite(site.handle, max_requests=500, max_seconds=110) as http:
        seed_local(
            redis_url, http.base + "/", "rev", 1, "--revisit", "2s", "--db", db,
            "--config", str(settings),
        )  # fmt: skip
        with LocalWorkers(redis_url, 2, log_dir=tmp_path):

            def between_rounds(s: dict) -> bool:
                assert s["state"] != "finished"
                return s["state"] == "idle" and bool(s["next_visit_at"])

            idle = wait_until(
                lambda: stats.status(conn, "rev"),
                30,
                "an idle crawl between two rounds",
                accept=between_rounds,
            )
            # /gone answers 404 on visits 2 and 3, the last of them makes it gone for good:
            # while /same is visited three more times after that, /gone is not requested.
            wait_until(lambda: http.hits["/gone"] == 1 + GONE_AFTER, 60, "/gone's last visit")
            after_gone = http.hits["/same"]
            wait_until(lambda: http.hits["/same"] >= after_gone + 3, 60, "three more rounds")
            assert http.hits["/gone"] == 1 + GONE_AFTER
            assert idle["due"]["hour"] >= 3 and idle["known"] == 4
            rqcrawl(redis_url, "cancel", "rev")

    out = tmp_path / "rev.jsonl"
    rqcrawl(redis_url, "export", "rev", "-o", str(out))
    by_path: dict[str, list[dict]] = defaultdict(list)
    for row in read_jsonl(out):
        by_path[row["url"].removeprefix(http.base)].append(row)
    visits = {path: [r["visit"] for r in rows] for path, rows in by_path.items()}
    changes = {path: [r["change"] for r in rows] for path, rows in by_path.items()}
    assert all(v == list(range(1, len(v) + 1)) for v in visits.values()), visits
    assert len(visits["/same"]) >= 4
    assert set(changes["/same"][1:]) == {"unchanged"} and changes["/same"][0] == "new"
    assert changes["/edit"][:3] == ["new", "changed", "unchanged"]
    assert changes["/gone"] == ["new"] + ["gone"] * GONE_AFTER
    assert [r["status"] for r in by_path["/gone"]] == [200] + [404] * GONE_AFTER
    assert len(visits["/"]) >= 4  # its links are known: no second record for them
    assert set(by_path) == {"/", "/same", "/edit", "/gone", "/new"}
    assert changes["/new"][:2] == ["new", "unchanged"]  # a link that a revisit found
    assert {r["depth"] for r in by_path["/new"]} == {1}


class SlowSite:
    """/ links to PAGES leaves; every answer takes SLOW seconds, so that a kill lands
    mid-fetch."""

    PAGES = [f"/p{i}" for i in range(6)]
    SLOW = 0.3

    def handle(self, req) -> None:
        time.sleep(self.SLOW)
        links = "".join(f'<a href="{p}">{p}</a>' for p in self.PAGES) if req.path == "/" else ""
        reply(req, 200, f"<html><title>{req.path}</title>{links}</html>".encode())


def requests_by_path(log: list[tuple[float, str]]) -> dict[str, list[float]]:
    times: dict[str, list[float]] = defaultdict(list)
    for t, path in log:
        times[path].append(t)
    return times


@pytest.mark.timeout(150)
def test_killed_workers_lose_no_visit_and_fetch_nothing_twice_in_a_round(redis_url, conn, tmp_path):
    """Every worker (and its scheduler) SIGKILLed in the middle of a round, new ones started:
    every page is visited again in the next rounds, and no page is requested twice within a
    round but the pages whose fetch the kill interrupted, once each."""
    interval = 2.0
    settings = tmp_path / "revisit.toml"  # a fixed interval: a round is `interval` long
    settings.write_text(f"revisit_min = {interval}\nrevisit_max = {interval}\n")
    site, pages = SlowSite(), {"/", *SlowSite.PAGES}
    db = f"sqlite:///{tmp_path / 'tasks.db'}"
    with HTTPSite(site.handle, max_requests=800, max_seconds=140) as http:
        seed_local(
            redis_url, http.base + "/", "kill", 1, "--revisit", f"{interval:g}s", "--db", db,
            "--config", str(settings), "--host-concurrency", "4",
        )  # fmt: skip
        with ExitStack() as stack:
            first = stack.enter_context(LocalWorkers(redis_url, 2, log_dir=tmp_path / "first"))
            names = worker_names(conn, first)

            def mid_second_round() -> bool:
                started = all(http.hits[p] >= 1 for p in pages) and http.hits["/"] >= 2
                return started and any(busy(conn, name) for name in names)

            wait_until(mid_second_round, 60, "a worker busy in the second round", every=0.01)
            orphans = [pid for p in first.procs for pid in child_pids(p.pid)]
            for p in first.procs:
                p.send_signal(signal.SIGKILL)
            killed_at = time.time()
            stop_pids(orphans, grace=0)
            for p in first.procs:
                p.wait()
            stack.enter_context(LocalWorkers(redis_url, 2, log_dir=tmp_path / "second"))

            def two_rounds_after_the_kill() -> bool:
                after = requests_by_path([e for e in http.log if e[0] > killed_at])
                return all(len(after[p]) >= 2 for p in pages)

            wait_until(two_rounds_after_the_kill, 90, "every page visited twice after the kill")
            rqcrawl(redis_url, "cancel", "kill")

    times = requests_by_path(http.log)
    times.pop("/robots.txt", None)
    # The fetches the kill interrupted: requests started less than a fetch (plus slack)
    # before it. Their URLs come back when their lease runs out and may be fetched again.
    interrupted = {p for t, p in http.log if killed_at - SlowSite.SLOW - 0.5 <= t <= killed_at}
    assert 1 <= len(interrupted) <= 4, interrupted  # the host's concurrency
    lost_for = interval + leases.LEASE + leases.REAP_EVERY + 10  # the longest a killed URL waits
    for path, starts in times.items():
        gaps = [b - a for a, b in itertools.pairwise(starts)]
        twice = [g for g in gaps if g < interval / 2]  # within one round
        assert len(twice) <= (path in interrupted), (path, starts, killed_at)
        assert max(gaps) < lost_for, (path, starts, killed_at)

    out = tmp_path / "kill.jsonl"
    rqcrawl(redis_url, "export", "kill", "-o", str(out))
    visits: dict[str, list[int]] = defaultdict(list)
    for row in read_jsonl(out):
        visits[row["url"].removeprefix(http.base)].append(row["visit"])
    assert set(visits) == pages
    assert all(v == list(range(1, len(v) + 1)) for v in visits.values()), visits


@pytest.mark.timeout(90)
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_stock_workers_revisit_through_rqcrawl_pump(backend, redis_url, conn, tmp_path, request):
    site = ChangingSite()
    if backend == "sqlite":
        db = f"sqlite:///{tmp_path / 'tasks.db'}"
    else:
        db = request.getfixturevalue("postgres_url")
        TaskTable(db).delete("stock")  # the session's server outlives each test
    with HTTPSite(site.handle, max_requests=500, max_seconds=80) as http:
        seed_local(redis_url, http.base + "/same", "stock", 0, "--revisit", "1s", "--db", db)
        with LocalWorkers(redis_url, 1, worker_class=None, log_dir=tmp_path):
            wait_until(lambda: http.hits["/same"] == 1, 30, "the first visit")
            wait_until(
                lambda: stats.status(conn, "stock"),
                30,
                "an idle crawl with its URL due",
                accept=lambda s: s["state"] == "idle" and s["due"]["now"] == 1,
            )
            pumped = rqcrawl(redis_url, "pump", "stock", "--once")  # nobody else pumps
            assert "1 URL(s) due for a revisit readmitted" in pumped.stdout
            wait_until(lambda: http.hits["/same"] == 2, 30, "the revisit")


@pytest.mark.timeout(90)
def test_crawl_with_revisits_runs_until_interrupted_then_exports(redis_url, tmp_path):
    site = ChangingSite()
    out = tmp_path / "out.jsonl"
    with HTTPSite(site.handle, max_requests=500, max_seconds=80) as http:
        proc = subprocess.Popen(
            [str(BIN / "rqcrawl"), "crawl", http.base + "/same", "-o", str(out),
             "--revisit", "1s", "--max-depth", "0", "--allow-private", "--delay", "0",
             "--workers", "1", "--data-dir", str(tmp_path / "data")],
            env=env_with(redis_url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_until(lambda: http.hits["/same"] >= 2, 60, "a revisit")
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    rows = read_jsonl(out)
    assert [r["visit"] for r in rows][:2] == [1, 2] and rows[1]["change"] == "unchanged"
    assert (tmp_path / "data" / "tasks.db").exists()


@pytest.mark.timeout(120)
def test_crawl_interrupted_and_run_again_resumes_its_schedule(redis_url, tmp_path):
    """The same `rqcrawl crawl --revisit` command run again after a SIGTERM resumes the same
    crawl and task table: no page is requested before the visit the table has scheduled."""
    site, pages, data = SlowSite(), {"/", *SlowSite.PAGES}, tmp_path / "data"
    out = tmp_path / "out.jsonl"
    with HTTPSite(site.handle, max_requests=500, max_seconds=110) as http:
        command = [
            str(BIN / "rqcrawl"), "crawl", http.base + "/", "-o", str(out), "--revisit", "2s",
            "--max-depth", "1", "--allow-private", "--delay", "0", "--host-concurrency", "4",
            "--no-sitemaps",
            "--workers", "1", "--data-dir", str(data),
        ]  # fmt: skip

        def run_until(condition: Callable[[], bool], what: str) -> str:
            proc = subprocess.Popen(
                command, env=env_with(redis_url), stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            try:
                wait_until(condition, 60, what)
            finally:
                proc.send_signal(signal.SIGTERM)
                _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            return err

        run_until(lambda: all(http.hits[p] >= 4 for p in pages), "three revisits of every page")
        stopped_at = time.time()
        # The last scheduled visit is moved 25 s on, longer than a restart on a loaded
        # machine, so that some page is not due yet when the crawl resumes.
        with create_engine(f"sqlite:///{data / 'tasks.db'}").begin() as db:
            rows = db.execute(select(TASKS.c.url, TASKS.c.state, TASKS.c.next_visit)).all()
            scheduled = {url: due for url, st, due in rows if st == "scheduled"}
            last = max(scheduled, key=scheduled.__getitem__)
            scheduled[last] = max(scheduled[last], stopped_at + 25)
            db.execute(update(TASKS).where(TASKS.c.url == last)
                       .values(next_visit=scheduled[last]))  # fmt: skip
        scheduled = {url.removeprefix(http.base): due for url, due in scheduled.items()}

        def after_stop() -> dict[str, list[float]]:
            return requests_by_path([e for e in http.log if e[0] > stopped_at])

        err = run_until(lambda: all(after_stop()[p] for p in pages), "every page once more")
    assert "exists: resuming it with its own settings" in err
    assert {url.removeprefix(http.base) for url, _, _ in rows} == pages  # one crawl, one table
    early = {p: (after_stop()[p][0], due) for p, due in scheduled.items()}
    resumed_at = min(first for first, _ in early.values())
    assert max(scheduled.values()) > resumed_at, early  # not every page was due already
    assert all(first >= due for first, due in early.values()), early
    visits: dict[str, list[int]] = defaultdict(list)
    for row in read_jsonl(out):
        visits[row["url"].removeprefix(http.base)].append(row["visit"])
    assert all(v == list(range(1, len(v) + 1)) and len(v) >= 5 for v in visits.values()), visits


def test_seed_keeps_the_task_table_with_the_crawl_masks_its_password_and_purge_empties_it(
    redis_url, tmp_path, postgres_url
):
    # Our PostgreSQL trusts its socket's users: any password does (and must not be shown).
    secret = postgres_url.replace("postgres:@", "postgres:s3cret@", 1)
    shown = rqcrawl(redis_url, "seed", "http://a.test/", "--revisit", "1h", "--db", secret,
                    "--crawl", "pg")  # fmt: skip
    assert "task table postgresql+psycopg://postgres:***@/postgres?host=" in shown.stdout
    settings = rqcrawl(redis_url, "status", "pg", "--config").stdout
    assert "s3cret" not in settings and "revisit = 3600.0" in settings

    seeded = subprocess.run(
        [str(BIN / "rqcrawl"), "seed", "http://a.test/", "--revisit", "10m", "--crawl", "lite"],
        env=env_with(redis_url), cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    db = f"sqlite:///{tmp_path.resolve()}/.rqcrawl/tasks.db"
    assert f"task table {db}" in seeded.stdout
    cfg = CrawlConfig.from_dict({"revisit": "10m"})
    TaskTable(db).visited("lite", "http://a.test/", 0, VisitEnd("fetched", 200, Content("d")), cfg)
    shown = rqcrawl(redis_url, "status", "pg")  # an unreachable table: tests/test_broken_db.py
    assert "0 URLs known" in shown.stdout and "s3cret" not in shown.stdout + shown.stderr
    no_revisits = rqcrawl(redis_url, "seed", "http://b.test/", "--crawl", "once")
    assert "task table" not in no_revisits.stdout
    refused = rqcrawl(redis_url, "pump", "once", check=False)
    assert "crawl once has no revisits" in refused.stderr
    status = rqcrawl(redis_url, "status", "lite").stdout
    assert "revisits   every 10m00s (adaptive); 1 URLs known" in status
    assert "due        0 now, 1 within an hour, 1 within a day" in status
    rqcrawl(redis_url, "cancel", "lite")
    purged = rqcrawl(redis_url, "purge", "lite").stdout
    assert "1 task row(s)" in purged and TaskTable(db).known("lite") == 0
