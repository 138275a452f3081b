"""Continuous crawling end to end: a loopback site crawled with --revisit by real workers, whose
pages change between visits. Every visit is a record with its number and change, a page gone
(404) stops being requested, and the crawl is `idle` between rounds, never finished."""

from __future__ import annotations

import signal
import subprocess
from collections import defaultdict

import pytest
from helpers import BIN, env_with, read_jsonl, rqcrawl, seed_local, wait_until
from servers import HTTPSite, reply

from rqcrawl import stats
from rqcrawl.changes import Content
from rqcrawl.config import CrawlConfig
from rqcrawl.runner import LocalWorkers
from rqcrawl.tasks import TaskTable

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


def test_seed_keeps_the_task_table_with_the_crawl_masks_its_password_and_purge_empties_it(
    redis_url, tmp_path
):
    secret = "postgresql://crawler:s3cret@127.0.0.1:1/tasks"
    shown = rqcrawl(redis_url, "seed", "http://a.test/", "--revisit", "1h", "--db", secret,
                    "--crawl", "pg")  # fmt: skip
    assert "task table postgresql://crawler:***@127.0.0.1:1/tasks" in shown.stdout
    settings = rqcrawl(redis_url, "status", "pg", "--config").stdout
    assert "s3cret" not in settings and "revisit = 3600.0" in settings

    seeded = subprocess.run(
        [str(BIN / "rqcrawl"), "seed", "http://a.test/", "--revisit", "10m", "--crawl", "lite"],
        env=env_with(redis_url), cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    db = f"sqlite:///{tmp_path.resolve()}/.rqcrawl/tasks.db"
    assert f"task table {db}" in seeded.stdout
    cfg = CrawlConfig.from_dict({"revisit": "10m"})
    TaskTable(db).visited("lite", "http://a.test/", 0, "fetched", 200, Content("d"), cfg)
    unreachable = rqcrawl(redis_url, "status", "pg", check=False)
    assert unreachable.returncode == 1 and "Traceback" not in unreachable.stderr
    assert "crawl pg: task table: " in unreachable.stderr and "s3cret" not in unreachable.stderr
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
