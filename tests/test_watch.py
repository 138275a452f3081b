"""`rqcrawl status NAME --watch`: plain lines in a log, an in-place view on a terminal, ends
with the crawl or on Ctrl-C."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess

from helpers import BIN, env_with, rqcrawl, seed_local, wait_until
from servers import HTTPSite
from testsite import Site

from rqcrawl.workers.runner import LocalWorkers


def test_watch_prints_a_line_per_refresh_and_ends_with_the_crawl(redis_url):
    site = Site(pages=12, slow={i: 0.1 for i in range(12)})
    with HTTPSite(site.handle, max_requests=100, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/p0.html", "wt", 2)
        proc = subprocess.Popen(
            [str(BIN / "rqcrawl"), "status", "wt", "--watch", "--interval", "0.2"],
            env=env_with(redis_url), stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            first = proc.stdout.readline()  # shown before any worker runs: the crawl is ahead
            with LocalWorkers(redis_url, 1):
                rest, _ = proc.communicate(timeout=120)
        finally:
            proc.kill()  # if it is still watching: the test failed
            proc.wait()
    lines = [first.rstrip("\n"), *rest.splitlines()]
    assert len(lines) >= 2, lines
    assert all(" wt  " in line for line in lines)
    assert " wt  finished  " in lines[-1] and " wt  running  " in lines[0]
    assert "\x1b" not in first + rest


def read_until(fd: int, done, timeout: float) -> str:
    """Read `fd` until `done(the text so far)`; returns that text."""
    out = bytearray()

    def text() -> str:
        if select.select([fd], [], [], 0.2)[0]:
            out.extend(os.read(fd, 65536))
        return out.decode(errors="replace")

    return wait_until(text, timeout, f"output that passes {done.__name__}", accept=done, every=0)


def test_watch_redraws_in_place_on_a_terminal_and_ctrl_c_ends_it_cleanly(redis_url):
    seed_local(redis_url, "http://127.0.0.1:9/", "tty", 1)
    rqcrawl(redis_url, "pause", "tty")  # no worker and paused: it never ends by itself
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [str(BIN / "rqcrawl"), "status", "tty", "--watch", "--interval", "0.1"],
        env=env_with(redis_url), stdout=slave, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(slave)
    try:
        shown = read_until(master, lambda text: text.count("\x1b[J") >= 3, timeout=20)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    first = shown.split("\x1b[J")[0]
    assert "crawl      tty: paused" in first
    height = first.count("\n")
    # Each later frame starts by moving up to the first line of the previous one.
    assert shown.count(f"\x1b[{height}F") >= 2
    assert proc.returncode == 0 and "Traceback" not in err
