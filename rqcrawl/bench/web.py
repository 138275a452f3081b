"""`rqcrawl bench --web N`: N hosts with latency and a site owner's audit of misbehaviours
(webhosts.py), crawled at default settings by the command a user types,
`rqcrawl crawl <N seeds> --allow-private --max-depth 3`, and judged from the hosts' access
logs (conduct.py): the wall time against the politeness floor, the requests per TCP
connection, and the rules a site owner checks. `--scrapy` and `--crawlee` crawl the same web
with Scrapy and Crawlee for Python at their polite settings (rqcrawl.bench.politespider,
rqcrawl.bench.politecrawlee) for comparison, judged by the same logs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.robots import patience

from .conduct import Judge
from .webhosts import PAGE_ROLES, ROBOTS_ROLES, WebSpec, build
from .webserver import WebServer

MAX_DEPTH = 3
LAST_SHOWN = 3  # hosts that ended last, shown with their spans
CRAWL_TIMEOUT = 1800.0  # seconds before a crawl that will not end is stopped


@dataclass
class WebRun:
    """One crawler's crawl of the web: its wall time and what the servers saw."""

    crawler: str
    wall_s: float
    judge: Judge
    requests: int
    connections: int
    exit_code: int


def crawl_command(seeds: list[str], output: Path, data_dir: Path) -> list[str]:
    """`rqcrawl crawl` as a user types it, with the bench's own output and data directory."""
    rqcrawl = str(Path(sys.executable).with_name("rqcrawl"))
    return [rqcrawl, "crawl", *seeds, "--allow-private", "--max-depth", str(MAX_DEPTH),
            "-o", str(output), "--data-dir", str(data_dir)]  # fmt: skip


def peer_command(crawler: str) -> Callable[[list[str], Path, Path], list[str]]:
    """The command of a peer crawler ("scrapy", "crawlee") at its polite settings."""
    module = {"scrapy": "politespider", "crawlee": "politecrawlee"}[crawler]

    def command(seeds: list[str], output: Path, data_dir: Path) -> list[str]:
        peer = [sys.executable, "-m", f"rqcrawl.bench.{module}", str(output)]
        return [*peer, "--max-depth", str(MAX_DEPTH), *seeds]

    return command


def run(
    spec: WebSpec,
    crawler: str = "rqcrawl",
    timeout: float = CRAWL_TIMEOUT,
    robots_patience: float | None = None,
) -> WebRun:
    """Serve a fresh web of `spec` and crawl it to the end with `crawler` (rqcrawl at default
    settings, but for `robots_patience` when given: how long a robots.txt that never answers
    holds its site's pages)."""
    server = WebServer(spec.hosts)
    with server, tempfile.TemporaryDirectory(prefix="rqcrawl-bench-web-") as tmp:
        hosts = build(spec, server.origins)
        server.start(hosts)
        seeds = [origin + "/" for origin in server.origins]
        make = crawl_command if crawler == "rqcrawl" else peer_command(crawler)
        command = make(seeds, Path(tmp) / "out.jsonl", Path(tmp) / "data")
        cfg = CrawlConfig()
        if robots_patience is not None and crawler == "rqcrawl":
            settings = Path(tmp) / "settings.toml"
            settings.write_text(f"robots_patience = {robots_patience!r}\n")
            command += ["--config", str(settings)]
            cfg = CrawlConfig(robots_patience=robots_patience)
        t0 = time.time()
        code = run_command(command, Path(tmp) / "stderr.log", timeout)
        wall = time.time() - t0
        owed = patience(cfg, idle=True)  # what a crawl with nothing else left waits for one
        judge = Judge(hosts, list(server.log), cfg.delay, t0, owed)
        return WebRun(crawler, wall, judge, len(server.log), sum(server.connections.values()), code)


def run_command(command: list[str], log: Path, timeout: float) -> int:
    """Run the crawl to its end; stopped (SIGTERM, as Ctrl-C would) if it outlasts `timeout`."""
    with log.open("wb") as err:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(timeout=60)
            raise click.ClickException(f"the crawl took over {timeout:.0f} s: stopped") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def describe(spec: WebSpec) -> list[str]:
    """The web in a few lines: its shape and which host misbehaves how."""
    lines = [
        f"web: {spec.hosts} hosts on 127.0.0.1-{spec.hosts}, {spec.min_pages}-{spec.max_pages} "
        f"pages each, {spec.min_latency * 1000:.0f}-{spec.max_latency * 1000:.0f} ms per "
        f"answer, seed {spec.seed}; every host: a Disallowed link, a rel=nofollow link, a "
        "session or tracking variant"
    ]
    for i in range(spec.hosts):
        robots = spec.robots_roles[i] if i < len(spec.robots_roles) else "plain"
        page = spec.page_roles[i] if i < len(spec.page_roles) else "plain"
        if (robots, page) != ("plain", "plain"):
            lines.append(f"  host 127.0.0.{i + 1}: {ROBOTS_ROLES[robots]}; {PAGE_ROLES[page]}")
    return lines


def summary(r: WebRun) -> list[str]:
    """The run's figures and rule checks, as printed."""
    floor, host = r.judge.floor()
    ratio = r.wall_s / floor if floor else float("nan")
    owed, owed_host = r.judge.floor(backoff=True)
    starts = [e.start for entries in r.judge.by_host.values() for e in entries]
    span = (max(starts) - min(starts)) if starts else 0.0
    lines = [
        f"{r.crawler}: wall {r.wall_s:.1f} s (exit code {r.exit_code}); requests at the "
        f"servers from +{min(starts, default=r.judge.t0) - r.judge.t0:.1f} s over {span:.1f} s",
        f"  politeness floor {floor:.1f} s (host 127.0.0.{host + 1}); wall / floor {ratio:.2f}x",
        f"  floor with the back-off (and robots.txt patience) owed to hosts that push back "
        f"{owed:.1f} s "
        f"(host 127.0.0.{owed_host + 1}); wall / that floor {r.wall_s / owed if owed else 0:.2f}x",
        f"  {r.requests} requests over {r.connections} TCP connections: "
        f"{r.requests / max(r.connections, 1):.2f} requests per connection",
    ]
    unvisited = r.judge.unvisited()
    lines.append(
        f"  hosts with a page answered 2xx: {len(r.judge.hosts) - len(unvisited)} of "
        f"{len(r.judge.hosts)}"
        + (f" (none from {', '.join(f'127.0.0.{i + 1}' for i in unvisited)})" if unvisited else "")
    )
    for i, first, last, own in r.judge.last_hosts(LAST_SHOWN):
        lines.append(
            f"  ended late: host 127.0.0.{i + 1} requests from +{first:.1f} s to +{last:.1f} s "
            f"(its own floor {own:.1f} s)"
        )
    lines.append("  rule checks from the servers' logs:")
    for check in r.judge.checks():
        lines += ["  " + line for line in check.lines()]
    return lines


def report(hosts: int, peers: list[str], seed: int = 1) -> None:
    """Crawl the web with rqcrawl and the `peers` asked for ("scrapy", "crawlee") and print
    every summary."""
    spec = WebSpec(hosts=hosts, seed=seed)
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    runs = []
    for crawler in ("rqcrawl", *peers):
        click.echo(f"{crawler} on a web of {hosts} hosts...", err=True)
        runs.append(run(spec, crawler))
    after = "/".join(f"{x:.2f}" for x in os.getloadavg())
    click.echo(
        f"rqcrawl crawl <{hosts} seeds> --allow-private --max-depth {MAX_DEPTH} (defaults); "
        f"{os.cpu_count()} CPUs, load average {load} before, {after} after"
    )
    for line in describe(spec):
        click.echo(line)
    for r in runs:
        for line in summary(r):
            click.echo(line)
    click.echo(f"reproduce: rqcrawl bench --web {hosts}{''.join(f' --{p}' for p in peers)}")
