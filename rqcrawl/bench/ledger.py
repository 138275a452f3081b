"""`rqcrawl bench --profile`: where a page's CPU goes, stage by stage, in the real worker on
the bench site.

Method: probes, not a general profiler. The stage functions of the recommended worker (and
RQ's, redis-py's and logging's entry points) are wrapped, in the worker processes only, by a
probe that reads the thread's CPU clock (CLOCK_THREAD_CPUTIME_ID) on entry and exit and
charges the stage with its exclusive time (what nested probes took is theirs). About 25
probes fire per page, at ~1 us each: the distortion is measured rather than assumed, by
crawling the same site without probes in the same run. cProfile traces every call (two to
three times slower for this Python-heavy loop, and what it slows most is the small calls),
and a sampling profiler needs a binary or a signal timer whose handler only runs between
bytecodes of the main thread, which misattributes the tender's and the lease renewer's CPU.

What no probe covers (RQ's work loop between its steps, the interpreter's garbage
collection, threads of RQ and redis-py) is the process's CPU clock from its first job's start
to its last job's end minus the probes' sum over that span, shown as `unattributed`.
Redis's side is INFO deltas of the same run: its CPU and commandstats; per stage, the
commands each stage sent (a script counts as one, the commands it runs inside are only in
the server's totals); and each script's time, from a SLOWLOG that logs every call.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import click
from redis.client import Pipeline, Redis

from rqcrawl.frontier.bloom import BloomFilter
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.leases import Renewer
from rqcrawl.frontier.state import CrawlState
from rqcrawl.parse import extract
from rqcrawl.workers import gate, jobs, settle, visit
from rqcrawl.workers.worker import CrawlWorker, Tender

from .report import command_breakdown
from .runs import SLOWLOG_KEPT, run_rqcrawl
from .site import SiteSpec

LEDGER_ENV = "RQCRAWL_LEDGER"  # the directory where each worker process writes its ledger
REDIS_IO = "Redis client (round trips)"
TOTAL = "worker CPU (process clock, first job to last)"
OUTSIDE = "(outside any stage)"
UNATTRIBUTED = "unattributed (RQ's loop, GC, other threads)"

# (owner, attribute, stage): what the probes wrap, in the order the table shows the stages.
# A function imported by name into another module is wrapped where it is called.
PROBES: list[tuple[object, str, str]] = [
    (CrawlWorker, "dequeue_job_and_maintain_ttl", "RQ: dequeue (job hash read, heartbeats)"),
    (CrawlWorker, "execute_job", "RQ: job lifecycle (prepare, success, registries)"),
    (jobs, "claim", "claim (lease, due deferrals)"),
    (Frontier, "_enqueue", "enqueue released URLs (RQ jobs)"),
    (jobs, "_job", "job frame (leases held, describe)"),
    (gate, "through", "politeness gate: acquire"),
    (gate.Go, "slot", "politeness gate: release"),  # its Slot, sent with the finish
    (jobs, "fetch_and_parse", "visit (record, digest, link rules)"),
    (visit, "fetch", "fetch (HTTP client)"),
    (visit, "decode", "decode"),
    (extract, "selector", "parse (lxml)"),
    (visit, "parse", "link extraction"),
    (extract, "canonicalize", "canonicalize (cache misses)"),
    (settle, "page", "finish/settle"),
    (BloomFilter, "flat_positions", "Bloom/admit: positions"),
    (CrawlState, "_finish_script", "Bloom/admit: finish script call"),
    (logging.Logger, "_log", "logging"),
    (Tender, "tick", "tender thread (releases, recovery)"),
    (Renewer, "renew", "lease renewal thread"),
    (Redis, "execute_command", REDIS_IO),
    (Pipeline, "execute", REDIS_IO),
    (Pipeline, "immediate_execute_command", REDIS_IO),  # WATCH and the reads after it
]


class Ledger:
    """One thread's account: exclusive CPU ns and calls per stage, and the Redis round
    trips, commands and client CPU (io) each stage spent. The stack holds, per open probe,
    its stage and the CPU its nested probes took."""

    def __init__(self) -> None:
        self.ns: dict[str, int] = defaultdict(int)
        self.io: dict[str, int] = defaultdict(int)
        self.calls: dict[str, int] = defaultdict(int)
        self.trips: dict[str, int] = defaultdict(int)
        self.commands: dict[str, int] = defaultdict(int)
        self.stack: list[list] = []


_local = threading.local()
_ledgers: list[Ledger] = []
_ledgers_guard = threading.Lock()


def _ledger() -> Ledger:
    led = getattr(_local, "ledger", None)
    if led is None:
        led = _local.ledger = Ledger()
        with _ledgers_guard:
            _ledgers.append(led)
    return led


def _sent(args: tuple) -> int:
    """Commands a probed Redis call sends: a pipeline's stack (and MULTI/EXEC), else one."""
    target = args[0]
    if isinstance(target, Pipeline) and len(args) == 1:  # execute(), not a command
        return len(target.command_stack) + 2 * bool(target.transaction)
    return 1


def probe(stage: str, fn: Callable) -> Callable:
    """`fn`, its thread CPU charged to `stage` (less what nested probes took)."""
    clock = time.thread_time_ns
    redis = stage == REDIS_IO

    @functools.wraps(fn)
    def probed(*args, **kwargs):
        led = _ledger()
        parent = led.stack[-1][0] if led.stack else OUTSIDE
        if redis:
            led.trips[parent] += 1
            led.commands[parent] += _sent(args)
        frame = [stage, 0]
        led.stack.append(frame)
        started = clock()
        try:
            return fn(*args, **kwargs)
        finally:
            spent = clock() - started
            led.stack.pop()
            led.ns[stage] += spent - frame[1]
            led.calls[stage] += 1
            if redis:
                led.io[parent] += spent - frame[1]
            if led.stack:
                led.stack[-1][1] += spent

    return probed


def install() -> None:
    """Wrap every stage function of PROBES (once per process)."""
    if getattr(install, "done", False):
        return
    for owner, name, stage in PROBES:
        setattr(owner, name, probe(stage, getattr(owner, name)))
    install.done = True


def totals() -> dict[str, dict[str, int]]:
    """The process's account, every thread's summed."""
    parts = ("ns", "io", "calls", "trips", "commands")
    out: dict[str, dict[str, int]] = {part: {} for part in parts}
    with _ledgers_guard:
        for led in _ledgers:
            for part in out:
                for key, n in dict(getattr(led, part)).items():
                    out[part][key] = out[part].get(key, 0) + n
    return out


class LedgerWorker(CrawlWorker):
    """The recommended worker with the probes installed. Its account covers its first job's
    start to its last job's end (not its start-up, whose maintenance pass alone can cost
    more than a small crawl's pages), with the process's CPU clock over the same span, and
    goes to $RQCRAWL_LEDGER/<pid>.json when it stops (warm stop: the bench's end)."""

    _opened: tuple[dict, int] | None = None  # (the account, the process clock) at the start
    _closed: tuple[dict, int] | None = None  # the same when the last job ended

    def __init__(self, *args, **kwargs) -> None:
        install()
        super().__init__(*args, **kwargs)

    def execute_job(self, job, queue) -> None:  # type: ignore[no-untyped-def]
        if self._opened is None:
            self._opened = (totals(), time.process_time_ns())
        try:
            super().execute_job(job, queue)
        finally:
            # both clocks stop together: the idle dequeue after the last job (and the
            # threads' polling while the bench winds down) is outside the span on both sides
            self._closed = (totals(), time.process_time_ns())

    def work(self, *args, **kwargs) -> bool:
        try:
            return super().work(*args, **kwargs)
        finally:
            path = Path(os.environ[LEDGER_ENV]) / f"{os.getpid()}.json"
            path.write_text(json.dumps(self.account()))

    def account(self) -> dict:
        """What the jobs' span cost, stage by stage (see totals), and its CPU (`cpu` ns)."""
        if self._opened is None or self._closed is None:
            return {"cpu": {"ns": 0}}
        (before, started), (after, ended) = self._opened, self._closed
        out = {
            part: {key: n - before[part].get(key, 0) for key, n in values.items()}
            for part, values in after.items()
        }
        return out | {"cpu": {"ns": ended - started}}


def read_ledgers(directory: Path) -> dict[str, dict[str, int]]:
    """The accounts of every worker process of a run, summed."""
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for path in directory.glob("*.json"):
        for part, values in json.loads(path.read_text()).items():
            for key, n in values.items():
                out[part][key] += n
    return out


def stage_table(account: dict, pages: int) -> list[str]:
    """The ledger's lines: per stage, its own CPU in us per page and its share of the
    worker's CPU, its calls per page, and the Redis client CPU, round trips and commands
    it spent per page (that client CPU is the Redis client row's, split by stage)."""
    parts = ("ns", "io", "calls", "trips", "commands")
    per_page = {part: {k: n / pages for k, n in account[part].items()} for part in parts}
    ns, io = per_page["ns"], per_page["io"]
    total_us = account["cpu"]["ns"] / 1000 / pages
    stages = list(dict.fromkeys(stage for _, _, stage in PROBES)) + [OUTSIDE]
    unattributed = total_us - sum(ns.values()) / 1000
    columns = ("us/page", "share", "calls/pg", "Redis us", "trips/pg", "cmds/pg")
    head = f"{'stage':52} " + " ".join(f"{c:>8}" for c in columns)
    lines = [head, "-" * len(head)]
    for stage in [*stages, UNATTRIBUTED]:
        us = unattributed if stage == UNATTRIBUTED else ns.get(stage, 0) / 1000
        cells = [
            us, us / total_us * 100, per_page["calls"].get(stage, 0), io.get(stage, 0) / 1000,
            per_page["trips"].get(stage, 0), per_page["commands"].get(stage, 0),
        ]  # fmt: skip
        lines.append(
            f"{stage:52} " + " ".join(f"{c:8.{0 if i < 2 else 2}f}" for i, c in enumerate(cells))
        )
    lines.append(f"{TOTAL:52} {total_us:8.0f} {100:8.0f}")
    return lines


def script_line(times: dict[str, list[int]], whole: bool, pages: int) -> str:
    """Redis's time in each script a page (SLOWLOG of the probed run, every call logged);
    a crawl whose calls outran what SLOWLOG keeps (not `whole`: runs.SLOWLOG_KEPT) gets
    each script's time a call, from its last calls."""
    ranked = sorted(times.items(), key=lambda kv: -kv[1][1])
    if not whole:
        parts = [f"{name} {us / max(calls, 1):.0f} us a call" for name, (calls, us) in ranked]
        return (
            f"Redis time in scripts, the commands they run included (SLOWLOG of the probed "
            f"run, its last {SLOWLOG_KEPT:,} calls only; fewer --pages give each script's "
            f"time a page): " + ", ".join(parts)
        )
    parts = [
        f"{name} {calls / pages:.2f} ({us / pages:.0f} us, {us / max(calls, 1):.0f} a call)"
        for name, (calls, us) in ranked
    ]
    total = sum(us for _, us in times.values()) / pages
    return (
        f"Redis time in scripts a page, the commands they run included (SLOWLOG of the "
        f"probed run, every call logged): {total:.0f} us: " + ", ".join(parts)
    )


def report(spec: SiteSpec, workers: list[int], site_procs: int) -> None:
    """For each worker count: one crawl without probes, one with, and the ledger of the
    second beside the first's CPU (the probes' distortion)."""
    for n in workers:
        click.echo(f"rqcrawl {n} worker(s), no probes...", err=True)
        plain = run_rqcrawl(spec, 0.0, n, 1, site_procs)
        click.echo(f"rqcrawl {n} worker(s), probes...", err=True)
        with tempfile.TemporaryDirectory(prefix="rqcrawl-ledger-") as tmp:
            profiled = run_rqcrawl(spec, 0.0, n, 1, site_procs, ledger_dir=Path(tmp))
            account = read_ledgers(Path(tmp))
        pages = max(profiled.pages, 1)
        rd = profiled.redis
        click.echo(
            f"\n{n} worker process(es) ({CrawlWorker.__module__}.CrawlWorker), "
            f"{profiled.pages} pages, load average {os.getloadavg()[0]:.1f}: worker CPU "
            f"{plain.cpu_s * 1000 / max(plain.pages, 1):.2f} ms/page without probes, "
            f"{profiled.cpu_s * 1000 / pages:.2f} ms/page with them"
        )
        click.echo("\n".join(stage_table(account, pages)))
        click.echo(
            f"Redis: {rd['cpu_s'] * 1000 / pages:.2f} ms CPU/page, "
            f"{rd['commands'] / pages:.1f} commands/page (INFO deltas of the probed run; "
            f"without probes {plain.redis['cpu_s'] * 1000 / max(plain.pages, 1):.2f} ms, "
            f"{plain.redis['commands'] / max(plain.pages, 1):.1f})"
        )
        click.echo(script_line(rd["scripts"], rd["slowlog_whole"], pages))
        click.echo(command_breakdown(profiled))
        click.echo(
            f"all rqcrawl processes (workers + Redis), without probes: "
            f"{(plain.cpu_s + plain.redis['cpu_s']) * 1000 / max(plain.pages, 1):.2f} ms/page"
        )
    click.echo(
        f"reproduce: rqcrawl bench --profile --pages {spec.pages} "
        f"--workers {','.join(map(str, workers))} --site-procs {site_procs}"
    )
