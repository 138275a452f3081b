"""`rqcrawl crawl` on one machine: SIGTERM stops its embedded Redis and its workers as Ctrl-C
does, and the local workers' logs land in the data directory."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from helpers import BIN, child_pids, running, stop_pids, wait_until
from servers import HTTPSite
from testsite import Site


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
