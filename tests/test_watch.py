"""`rqcrawl status NAME --watch`: plain lines in a log, an in-place view on a terminal, ends
with the crawl or on Ctrl-C."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import textwrap

import pyte
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


def watch_on_a_terminal(
    redis_url: str,
    crawl: str,
    columns: int,
    rows: int,
    frames: int,
    term: str = "xterm-256color",
    frame: str = ": paused",
):
    """What `status CRAWL --watch` shows on a terminal of `columns` x `rows` (a pty read by
    pyte, a terminal emulator) of type `term` after `frames` refreshes (`frame` shown that
    many times) and a Ctrl-C; and its raw output."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {k: v for k, v in env_with(redis_url).items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = term  # the tests' own terminal may be a dumb one
    proc = subprocess.Popen(
        [str(BIN / "rqcrawl"), "status", crawl, "--watch", "--interval", "0.1"],
        env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(slave)
    try:
        shown = read_until(master, lambda text: text.count(frame) >= frames, timeout=30)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
        shown += read_until(master, lambda text: True, timeout=1)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode == 0 and "Traceback" not in err
    screen = pyte.Screen(columns, rows)
    pyte.Stream(screen).feed(shown)
    return [row.rstrip() for row in screen.display], shown


def test_watch_redraws_in_place_on_a_terminal_and_ctrl_c_ends_it_cleanly(redis_url):
    seed_local(redis_url, "http://127.0.0.1:9/", "tty", 1)
    rqcrawl(redis_url, "pause", "tty")  # no worker and paused: it never ends by itself
    screen, shown = watch_on_a_terminal(redis_url, "tty", 120, 40, frames=3)
    assert shown.count(": paused") >= 3  # redrawn ...
    assert [row for row in screen if "crawl      tty: paused" in row] == [  # ... in place
        "crawl      tty: paused"
    ]


def test_watch_on_a_dumb_terminal_prints_a_line_per_refresh(redis_url):
    """TERM=dumb: rich's live view would show nothing until the end; a line per refresh."""
    seed_local(redis_url, "http://127.0.0.1:9/", "dumb", 1)
    rqcrawl(redis_url, "pause", "dumb")
    screen, shown = watch_on_a_terminal(
        redis_url, "dumb", 120, 40, frames=3, term="dumb", frame=" dumb  paused  "
    )
    lines = [row for row in screen if " dumb  paused  " in row]
    assert len(lines) >= 3, "\n".join(screen)
    assert "\x1b" not in shown


def test_watch_leaves_no_stale_lines_on_a_narrow_terminal(redis_url):
    """Lines wider than the terminal take several rows each: every one is redrawn."""
    seed_local(redis_url, "http://127.0.0.1:9/", "narrow", 1)
    rqcrawl(redis_url, "pause", "narrow")
    wide, _ = watch_on_a_terminal(redis_url, "narrow", 200, 60, frames=1)
    block = [row for row in wide if row]
    assert max(map(len, block)) > 40  # lines the narrow terminal wraps
    screen, shown = watch_on_a_terminal(redis_url, "narrow", 40, 60, frames=6)
    assert shown.count(": paused") >= 6
    assert sum(": paused" in row for row in screen) == 1, "\n".join(screen)
    text = [row for row in screen if row]
    # as many rows as one frame's lines take, wrapped at words as rich wraps them (one more
    # a line for numbers that grew a digit since the wide frame); a frame's stale rows left
    # below the next would be a whole status more
    rows = sum(len(textwrap.wrap(row, 40, break_on_hyphens=False)) for row in block)
    assert len(text) <= rows + 2, "\n".join(screen)
