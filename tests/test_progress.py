"""`rqcrawl crawl`'s progress: a rich bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import os
import pty
import subprocess

from helpers import BIN, env_with, rqcrawl
from servers import HTTPSite
from test_watch import read_until
from testsite import Site

from rqcrawl.workers.runner import progress_line


def crawl_args(http: HTTPSite, out: str) -> list[str]:
    return [
        "crawl", http.base + "/p0.html", "-o", out, "--workers", "1", "--max-depth", "1",
        "--allow-private", "--delay", "0",
    ]  # fmt: skip


def test_crawl_shows_a_rich_progress_bar_on_a_terminal(redis_url, tmp_path):
    site = Site(pages=12)
    master, slave = pty.openpty()
    with HTTPSite(site.handle, max_requests=100, max_seconds=120) as http:
        proc = subprocess.Popen(
            [str(BIN / "rqcrawl"), *crawl_args(http, str(tmp_path / "o.jsonl"))],
            env=env_with(redis_url) | {"COLUMNS": "160"},
            stdout=subprocess.PIPE,
            stderr=slave,
        )
        os.close(slave)
        try:
            shown = read_until(master, lambda text: "finished" in text, timeout=90)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(master)
    assert proc.returncode == 0
    assert "━" in shown  # rich's bar
    assert "depth 1/1" in shown and "pages/s" in shown and "recent" in shown
    assert "[####" not in shown  # not the plain line


def test_crawl_writes_plain_progress_lines_when_not_on_a_terminal(redis_url, tmp_path):
    site = Site(pages=12)
    with HTTPSite(site.handle, max_requests=100, max_seconds=120) as http:
        proc = rqcrawl(redis_url, *crawl_args(http, str(tmp_path / "o.jsonl")))
    lines = [line for line in proc.stderr.splitlines() if line.startswith("[")]
    assert lines and lines[-1].startswith("[" + "#" * 30 + "]")
    assert "\x1b" not in proc.stderr


def test_a_continuous_crawls_plain_progress_line_keeps_its_width():
    """A crawl with revisits visits its URLs again and again: the line counts the visits
    beside a bar that stays full, rather than one more `#` per 1/30 of the visits."""
    s = {
        "fetched": 0, "failed": 3, "skipped_total": 1, "admitted": 304, "revisit_s": 40.0,
        "exact_depth": False, "max_depth": 3, "pages_per_s": 11.5,
    }  # fmt: skip
    lines = [progress_line(s | {"fetched": n}) for n in (0, 150, 300, 8450, 26_000_000)]
    bars = [line[: line.index("]") + 1] for line in lines]
    assert bars[0] == "[" + "." * 30 + "]" and bars[1].count("#") == 15
    assert bars[2:] == ["[" + "#" * 30 + "]"] * 3
    assert "8454 visits of 304 URLs" in lines[3]
    assert max(map(len, lines)) - min(map(len, lines)) <= 8  # only the digits of the count
