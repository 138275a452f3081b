"""`rqcrawl bench --one-page`: the fixed costs of a small crawl, the literal command.

`rqcrawl crawl URL -o out.jsonl --timings` of a site of one page (no links, no robots.txt,
no sitemap: both answer 404) at default settings, but --allow-private (the site is on
127.0.0.1), and the same with --delay 0; each run with a fresh data directory (its own
embedded Redis). Printed per phase, the median over the runs of its time since the command
started: the command's own phases (`--timings`), the requests as the site saw them, the
exit. A polite crawl of one page makes two requests to its host (robots.txt, the page; no
/sitemap.xml unless `sitemap_probe`); the host's pace (`delay` between two request starts)
applies between those after robots.txt, which takes no turn: (paced requests - 1) x delay of
the wall time is the pace's, the rest is the fixed cost. The peers asked for (Scrapy, Crawlee
for Python) crawl the same site at their defaults, robots.txt read (PEERS), timed the same
way from their start to their exit; every setting's runs are interleaved, so that the
machine's load falls on all of them alike.
"""

from __future__ import annotations

import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import click

from rqcrawl.config import CrawlConfig

PAGE = b"<html><head><title>one page</title></head><body><p>No links.</p></body></html>"
TIMED = re.compile(r"^\s+(\d+\.\d+)\s+\+\s*\d+\.\d+\s+(.+)$")  # a line of --timings
SETTINGS = {"defaults": [], "--delay 0": ["--delay", "0"]}  # rqcrawl's, beside the peers
# The peers at their defaults, robots.txt read: Scrapy's DOWNLOAD_DELAY is 0 (the polite 1 s of
# `--web` would only stand between robots.txt and the page), Crawlee has no delay of its own.
PEERS = {"scrapy": ["politespider", "--delay", "0"], "crawlee": ["politecrawlee"]}


class OnePageSite:
    """The site: `/` is the page, everything else a 404; every request's path and arrival
    time (epoch seconds) is kept."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, float]] = []
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            # Buffered: the head and the body leave in one segment. Unbuffered (http.server's
            # default) the body waited for the ACK of the head, which the client delays: 40
            # ms a response that no real server costs, counted as the crawler's.
            wbufsize = -1

            def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
                seen.append((self.path, time.time()))
                found = self.path == "/"
                body = PAGE if found else b"not found"
                self.send_response(200 if found else 404)
                self.send_header("Content-Type", "text/html" if found else "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def __enter__(self) -> OnePageSite:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Run:
    """One command: its phases (seconds since it started), the site's requests and its CPU."""

    phases: dict[str, float] = field(default_factory=dict)
    requests: list[tuple[str, float]] = field(default_factory=list)
    cpu_s: float = 0.0


def command(setting: str, url: str, tmp: Path) -> list[str]:
    """The command of a setting: `rqcrawl crawl` (SETTINGS) in a fresh data directory, or a
    peer crawler ("scrapy", "crawlee") at its defaults (PEERS)."""
    if setting in SETTINGS:
        rqcrawl = str(Path(sys.executable).with_name("rqcrawl"))
        return [rqcrawl, "crawl", url, "-o", str(tmp / "out.jsonl"), "--data-dir",
                str(tmp / "data"), "--allow-private", "--timings", *SETTINGS[setting]]  # fmt: skip
    module, *options = PEERS[setting]
    return [sys.executable, "-m", f"rqcrawl.bench.{module}", str(tmp / "out.jsonl"), *options, url]


def one_run(site: OnePageSite, setting: str) -> Run:
    """One crawl of the site by `setting`'s command, timed from just before its start."""
    site.requests.clear()
    with tempfile.TemporaryDirectory(prefix="rqcrawl-bench-") as tmp:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.time()
        done = subprocess.run(
            command(setting, site.url, Path(tmp)), capture_output=True, text=True, check=False
        )
        end = time.time()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise click.ClickException(f"{setting}'s crawl failed: {done.stderr.strip()}")
    run = Run(requests=[(path, at - start) for path, at in site.requests])
    for line in done.stderr.splitlines():
        if m := TIMED.match(line):
            what = "a worker ready" if m[2].startswith("a worker ready") else m[2]
            what = re.sub(r" of http\S+", "", what)  # the site's port changes
            run.phases.setdefault(what, float(m[1]))  # the first worker's
    run.phases["exit"] = end - start
    cpu = ("ru_utime", "ru_stime")
    run.cpu_s = sum(getattr(after, f) - getattr(before, f) for f in cpu)
    return run


def rows(runs: list[Run], delay: float) -> list[tuple[str, float]]:
    """(phase, median seconds since the command started) in time order, the requests by
    their rank (robots.txt comes first; the page and the sitemap probe in either order, so
    that a path's median would mix ranks); then the requests' count, the pace's share, the
    fixed cost and the CPU."""
    for run in runs:
        for i, (_, at) in enumerate(run.requests):
            run.phases[f"request {i + 1} to the host"] = at
    medians = {
        what: statistics.median(r.phases[what] for r in runs if what in r.phases)
        for what in runs[0].phases
    }
    wall = medians["exit"]
    count = len(runs[0].requests)
    paced = sum(path != "/robots.txt" for path, _ in runs[0].requests)
    pace = max(0, paced - 1) * delay
    return sorted(medians.items(), key=lambda item: item[1]) + [
        ("requests to the host", float(count)),
        (f"pace waits: ({paced} paced - 1) x delay", pace),
        ("fixed cost: wall - pace waits", wall - pace),
        ("CPU s of the command and its workers", statistics.median(r.cpu_s for r in runs)),
    ]


def report(repeat: int, peers: list[str]) -> None:
    """Run both settings and the `peers` ("scrapy", "crawlee") `repeat` times each, in turns,
    and print the phases side by side."""
    load = os.getloadavg()[0]
    delays = {"defaults": CrawlConfig().delay, "--delay 0": 0.0, "scrapy": 0.0, "crawlee": 0.0}
    runs: dict[str, list[Run]] = {setting: [] for setting in [*SETTINGS, *peers]}
    with OnePageSite() as site:
        for i in range(repeat):
            for setting, done in runs.items():
                click.echo(f"one page, {setting}, run {i + 1}/{repeat}...", err=True)
                done.append(one_run(site, setting))
    results = {setting: rows(done, delays[setting]) for setting, done in runs.items()}
    shown = "".join(f", {peer} at its defaults" for peer in peers)
    click.echo(
        f"rqcrawl crawl of one page at default settings (--allow-private: the site is on "
        f"127.0.0.1) and with --delay 0{shown}, robots.txt read by all; seconds since the "
        f"command started, medians of {repeat} run(s), interleaved; {os.cpu_count()} CPUs; "
        f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    click.echo(table(results))
    left_out = "".join(f" --no-{p}" for p in ("scrapy", "crawlee") if p not in peers)
    click.echo(f"reproduce: rqcrawl bench --one-page --repeat {repeat}{left_out}")


def table(results: dict[str, list[tuple[str, float]]]) -> str:
    """One line per phase of the first setting, its time in each setting ("-": none)."""
    labels = list(results)
    base = results[labels[0]]
    width = max(len(what) for what, _ in base)
    lines = ["phase".ljust(width) + "".join(f"  {label:>10}" for label in labels)]
    for what, _ in base:
        cells = [dict(results[label]).get(what) for label in labels]
        shown = "".join(f"  {'-' if c is None else f'{c:.3f}':>10}" for c in cells)
        lines.append(what.ljust(width) + shown)
    return "\n".join(lines)
