"""`rqcrawl crawl` on one machine: SIGTERM stops its embedded Redis and its workers as Ctrl-C
does, and the local workers' logs land in the data directory."""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path

from helpers import BIN, child_pids, running, stop_pids, wait_until
from servers import HTTPSite
from testsite import Site

from rqcrawl.cli import FORK_WORKERS
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.workers import runner
from rqcrawl.workers.runner import Changes


def descendants(pid: int) -> set[int]:
    """`pid`'s children, their children, and so on (while they are alive)."""
    out: set[int] = set()
    todo = [pid]
    while todo:
        try:
            kids = child_pids(todo.pop())
        except FileNotFoundError:
            continue
        out.update(kids)
        todo.extend(kids)
    return out


def start_crawl(url: str, data_dir: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            str(BIN / "rqcrawl"), "crawl", url, "-o", str(out), "--data-dir", str(data_dir),
            "--allow-private", "--delay", "0", "--max-depth", "3", "--workers", "2", *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def test_sigterm_stops_the_embedded_redis_and_the_workers(tmp_path):
    site = Site(pages=60, slow={i: 0.3 for i in range(60)})
    with HTTPSite(site.handle, max_requests=300, max_seconds=120) as http:
        proc = start_crawl(http.base + "/p0.html", tmp_path / "data", tmp_path / "out.jsonl")
        family: set[int] = set()

        def gather() -> tuple[int, int]:
            """Collects the crawl's processes into `family`: how many, and pages requested."""
            assert proc.poll() is None, proc.communicate()
            family.update(descendants(proc.pid))
            return len(family), sum(http.hits.values())

        try:
            wait_until(
                gather,
                60,
                "Redis, two workers and 5 pages requested",
                accept=lambda seen: seen[0] >= 3 and seen[1] >= 5,
            )
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
            wait_until(
                lambda: [p for p in family if running(p)],
                10,
                f"every process of the crawl to exit (its stderr: {err})",
                accept=lambda left: not left,
            )
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            stop_pids([p for p in family if running(p)])
    assert "run the same command again to resume it" in err, err
    assert "Traceback" not in err


def test_local_workers_log_to_the_data_directory(tmp_path):
    site = Site(pages=20)
    with HTTPSite(site.handle, max_requests=200, max_seconds=120) as http:
        proc = start_crawl(http.base + "/p0.html", tmp_path / "data", tmp_path / "out.jsonl")
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    logs = sorted((tmp_path / "data" / "workers").glob("*.log"))
    assert [p.name for p in logs] == ["1.log", "2.log"], err
    assert str(tmp_path / "data" / "workers") in err  # said at start


def test_timings_list_each_phase_once_in_the_order_they_happened(tmp_path):
    """`--timings`: the command's own phases and the moments Redis kept (the workers'
    registration, robots.txt's answer, the last URL's end), on one clock, in order."""
    site = Site(pages=3)
    with HTTPSite(site.handle, max_requests=50, max_seconds=120) as http:
        out = tmp_path / "out.jsonl"
        proc = start_crawl(http.base + "/p0.html", tmp_path / "data", out, "--timings")
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    shown = err[err.index("timings (") :].splitlines()[1:]
    phases = [line.split(maxsplit=3)[3] for line in shown]
    since_start = [float(line.split()[0]) for line in shown]
    assert since_start == sorted(since_start) and since_start[0] > 0, err
    # one at least (the crawl needs it); the other may come up only after a short crawl
    assert 1 <= phases.count("a worker ready (registered with RQ)") <= 2, err
    own = [
        "imports done", "settings checked",
        *(["workers' modules imported"] if FORK_WORKERS else []),
        "embedded Redis ready", "crawl seeded", "2 worker process(es) started",
        "crawl over seen", "workers stopped", "export written", "embedded Redis stopped",
    ]  # fmt: skip
    assert [p for p in phases if p in own] == own, err
    order = [phases.index(p) for p in ("crawl seeded", f"robots.txt of {http.base} answered",
             "the crawl's last URL ended", "crawl over seen")]  # fmt: skip
    assert order == sorted(order), err


def test_the_watch_wakes_on_a_change_of_the_crawls_keys_only(conn):
    """runner.Changes (the end of a crawl seen at once): a write to the crawl's counters
    wakes it, a write to another crawl's keys does not."""
    mine, other = CrawlKeys("mine"), CrawlKeys("other")
    changes = Changes(conn, [mine.counters, mine.inflight])
    try:
        assert changes.conn is not None  # the session's Redis has CLIENT TRACKING
        conn.hset(other.counters, "fetched", 1)
        assert not changes.wait(0.3)
        later = threading.Timer(0.2, conn.hset, (mine.counters, "fetched", 1))
        later.start()
        assert changes.wait(30)
        later.join()
    finally:
        changes.close()


def test_a_crawl_near_its_end_is_looked_at_sooner_after_each_change(monkeypatch):
    """until_refresh_or_end: one look at most every CHECK_GAP while many URLs are left (a
    busy crawl changes all the time), END_GAP once END_NEAR or fewer are: the end of a
    small crawl is then seen within milliseconds, not up to CHECK_GAP late."""

    class Always:  # a change comes at once, every time
        def wait(self, timeout: float) -> bool:
            return True

    class Left:
        def __init__(self, counts: list[int]):
            self.counts = counts

        def unfinished(self) -> int:
            return self.counts.pop(0)

    gaps: list[float] = []
    monkeypatch.setattr(runner.time, "sleep", gaps.append)
    runner.until_refresh_or_end(Always(), [Left([50, runner.END_NEAR + 1, 3, 1, 0])])
    assert gaps == [runner.CHECK_GAP, runner.CHECK_GAP, runner.END_GAP, runner.END_GAP]
