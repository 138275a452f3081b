"""Running a crawl on this machine: local worker processes and a progress display that
ends when the crawl is finished."""

from __future__ import annotations

import gc
import importlib
import logging
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any, BinaryIO, NoReturn, TextIO

from redis import Redis, RedisError
from redis.connection import AbstractConnection
from rq import Worker
from rq.utils import import_attribute

from rqcrawl.defaults import CHECK_GAP, DEFAULT_SLOTS, END_GAP, END_NEAR, REFRESH
from rqcrawl.frontier import configs, keys
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.frontier.state import all_shards
from rqcrawl.ops import stats, statustext
from rqcrawl.ops.monitor import ProgressBar, live_terminal
from rqcrawl.processes import end_with_parent
from rqcrawl.redisurl import CLIENT, REDIS_DOWN, is_sentinel
from rqcrawl.workers import SLOTS_ENV
from rqcrawl.workers.stopping import Stop

WORKER_CLASS = "rqcrawl.workers.CrawlWorker"  # see worker.py
RENDER_WORKER_CLASS = "rqcrawl.render.RenderWorker"  # the render queue's (see render/browser.py)
INVALIDATE = "__redis__:invalidate"  # the channel of CLIENT TRACKING's messages


def worker_command(threads: int | None, worker_class: str | None) -> list[str]:
    """`rq worker`; with threads > 1 and a worker class other than the recommended one
    (which runs its slots in threads itself: RQCRAWL_SLOTS), the same command line running
    that many workers in threads of one process (rqcrawl.workers.threadworkers)."""
    if threads and threads > 1 and worker_class not in (WORKER_CLASS, RENDER_WORKER_CLASS):
        return ["rqcrawl.workers.threadworkers", "--threads", str(threads)]
    return ["rq.cli", "worker"]


def preload(threads: int | None, worker_class: str | None) -> None:
    """Import in this process, for forked workers to inherit (LocalWorkers, `fork`), what a
    worker of worker_command(threads, worker_class) imports before its first job, and the
    crawler's jobs (rqcrawl.workers.preload)."""
    importlib.import_module(worker_command(threads, worker_class)[0])
    if worker_class:
        module, _, name = worker_class.rpartition(".")
        getattr(importlib.import_module(module), name)
    importlib.import_module("rqcrawl.workers.preload")


@dataclass(frozen=True)
class WorkerOptions:
    """How LocalWorkers runs its workers: `worker_class` (None: RQ's stock worker), an RQ
    settings module (`rq_config`), environment variables of theirs (`env`), the queue they
    serve, and whether they are forked from this process (`fork`: see preload)."""

    worker_class: str | None = WORKER_CLASS
    rq_config: str | None = None
    env: Mapping[str, str] | None = None
    queue: str = keys.QUEUE_NAME
    fork: bool = False

    def arguments(self, urls: list[str]) -> list[str]:
        """The worker command's arguments after its module, for workers of `urls`."""
        return [
            self.queue,
            *(["--worker-class", self.worker_class] if self.worker_class else []),
            "--maintenance-interval",
            "30",
            "--quiet",
            *(["--config", self.rq_config] if self.rq_config else []),
            *(["--connection-class", CLIENT] if any(map(is_sentinel, urls)) else []),
        ]


class LocalWorkers:
    """N `rq worker crawl` processes of this Python, in their own session so that Ctrl-C
    reaches only us and we stop them in order (warm shutdown, then kill). The Redis URL goes
    through the environment (RQ_REDIS_URL), where `ps` does not show its password. With
    `log_dir`, each one's output is appended to `log_dir`/<n>.log, so that a stalled or
    failing worker can be seen; else it is discarded. `worker_class=None` runs RQ's own
    worker class (or $RQ_WORKER_CLASS), as a bare `rq worker` does; `env` adds variables to
    the workers' environment. As a context manager, it stops them on exit.

    `threads`: requests in flight per process (the recommended worker's slots, RQCRAWL_SLOTS;
    None: its default). A sharded crawl has several `redis_url`s: one `rq worker` serves one
    Redis, so N processes run per shard, each with its slots (another worker class with
    threads > 1: each of the N processes runs `threads` workers per shard,
    rqcrawl.workers.threadworkers).
    `queue`: the RQ queue they serve (keys.RENDER_QUEUE for render workers).

    `fork`: each process is forked from this one rather than started anew, once this one
    has imported the worker's modules (`preload`): it is ready within milliseconds instead
    of after 0.4-0.5 s of imports of its own (`rqcrawl crawl`, which imported most of them
    anyway). Its Redis should then answer already (a new `rq worker` has the time of its
    imports to wait for it).

    No RQ scheduler runs (no `--with-scheduler`): nothing of a crawl is scheduled in RQ
    (deferred URLs and retries come back through the release thread or the waker job, see
    rqcrawl.frontier.dispatch), and a scheduler is one more process to fork and stop."""

    def __init__(
        self,
        redis_url: str | Sequence[str],
        count: int,
        threads: int | None = None,
        log_dir: Path | None = None,
        **options: Any,
    ):
        """`options`: those of WorkerOptions, by name."""
        chosen = WorkerOptions(**options)
        self.log_dir = log_dir
        urls = [redis_url] if isinstance(redis_url, str) else list(redis_url)
        self.shard_count = len(urls)
        # per process, the shards it serves (indexes of `urls`)
        command = worker_command(threads, chosen.worker_class)
        if command[0] == "rqcrawl.workers.threadworkers":
            self.serves = [list(range(len(urls)))] * count
            self.workers_each = threads or 1  # RQ workers per process, on each shard it serves
        else:
            self.serves = [[shard] for shard in range(len(urls)) for _ in range(count)]
            runs_slots = self._runs_slots(chosen.worker_class)
            self.workers_each = (threads or DEFAULT_SLOTS) if runs_slots else 1
        if chosen.fork:
            preload(threads, chosen.worker_class)
            # What we imported becomes the children's too: frozen, their collections leave it
            # alone instead of going over it all (and copying every page of it) at the first.
            gc.freeze()
        slots = {SLOTS_ENV: str(threads)} if threads else {}
        self.procs: list[subprocess.Popen | ForkedWorker] = []
        self._start(
            urls, [*command, *chosen.arguments(urls)], {**slots, **(chosen.env or {})}, chosen.fork
        )

    def _start(self, urls: list[str], argv: list[str], env: Mapping[str, str], fork: bool) -> None:
        """One process per entry of `serves`, `python -m` `argv` with `env`, forked or not."""
        argv = ["-m", *argv]
        outs = [self._log(n) for n in range(1, len(self.serves) + 1)]
        for out, served in zip(outs, self.serves, strict=True):
            workers_env = {
                **os.environ,
                **env,
                "RQ_REDIS_URL": " ".join(urls[shard] for shard in served),
            }
            if fork:
                self.procs.append(ForkedWorker(argv, out, workers_env))
            else:
                self.procs.append(
                    subprocess.Popen(
                        [sys.executable, *argv],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env=workers_env,
                        start_new_session=True,
                    )
                )
        for out in outs:  # the workers have their own copies
            out.close()

    def _log(self, n: int) -> BinaryIO:
        """Worker `n`'s output: appended to `log_dir`/<n>.log, or discarded."""
        if self.log_dir is None:
            return open(os.devnull, "ab")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return open(self.log_dir / f"{n}.log", "ab")

    def _runs_slots(self, worker_class: str | None) -> bool:
        """Whether each process runs slots of its own (the recommended worker). The class is
        imported only for a pool that runs it: an empty pool of render workers never loads
        the browser's modules (the render extra)."""
        found = self.serves and worker_class and import_attribute(worker_class)
        return bool(found and getattr(found, "runs_slots", False))

    def __enter__(self) -> LocalWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def alive(self) -> int:
        return sum(p.poll() is None for p in self.procs)

    def rq_workers(self, shard: int = 0) -> int:
        """How many RQ workers this fleet runs on shard `shard` (index of its URLs): every
        slot of every process that serves it."""
        return self.workers_each * sum(shard in served for served in self.serves)

    def registered(self, redis: Redis) -> list[float]:
        """When each of our worker processes of `redis` first registered with RQ (its first
        slot's birth), in epoch seconds: the moment it was ready for jobs (`rqcrawl crawl
        --timings`)."""
        pids = {p.pid for p in self.procs}
        first: dict[int, float] = {}
        for w in Worker.all(connection=redis):
            if w.pid in pids and w.birth_date:
                born = w.birth_date.replace(tzinfo=w.birth_date.tzinfo or UTC).timestamp()
                first[w.pid] = min(born, first.get(w.pid, born))
        return sorted(first.values())

    def unserved(self) -> list[int]:
        """The shards (indexes of the URLs) whose every worker process exited."""
        served = {s for p, shards in zip(self.procs, self.serves, strict=True)
                  if p.poll() is None for s in shards}  # fmt: skip
        return [shard for shard in range(self.shard_count) if shard not in served]

    def stop(self, grace: float = 30) -> None:
        """A warm stop: SIGTERM, each worker ends its current job (an idle one its blocking
        dequeue, at once: worker.StopBetweenDequeues), then is killed (with its process
        group: a work-horse) if still there after `grace` seconds."""
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


class ForkedWorker:
    """A worker process forked from this one, `python ARGV` (`-m MODULE ARGS`) run in it as
    the `main()` of MODULE with ARGS, in a session of its own with its output to `out`; as
    LocalWorkers uses a Popen: pid, poll, wait, send_signal."""

    def __init__(self, argv: list[str], out: BinaryIO, env: Mapping[str, str]):
        sys.stdout.flush()  # else the child would write our buffered output again
        sys.stderr.flush()
        self.args = argv
        self.returncode: int | None = None
        parent = os.getpid()
        self.pid = os.fork()
        if self.pid == 0:
            self._run_child(argv, out, env, parent)

    @staticmethod
    def _run_child(argv: list[str], out: BinaryIO, env: Mapping[str, str], parent: int) -> NoReturn:
        code = 1
        try:
            os.setsid()
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))
            os.environ.clear()
            os.environ.update(env)
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            end_with_parent(parent)  # (RQ's handler then takes it: a warm stop)
            sys.argv = [argv[1], *argv[2:]]
            importlib.import_module(argv[1]).main()  # what `python -m` would run
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
        finally:
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.005)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)


def progress_line(s: dict, width: int = 30) -> str:
    """A plain progress line of a fixed width: the bar is full once every URL admitted has
    ended once (a crawl with revisits goes on visiting them: its visits are counted beside)."""
    done = s["fetched"] + s["failed"] + s["skipped_total"]
    filled = min(width, width * done // max(s["admitted"], 1))
    bar = "#" * filled + "." * (width - filled)
    count = (
        f"{done} visits of {s['admitted']} URLs"
        if s["revisit_s"]
        else f"{done}/{s['admitted']} URLs"
    )
    return (
        f"[{bar}] {count}  {statustext.depth_progress(s)}  "
        f"{s['pages_per_s']:.1f} pages/s  {s['failed']} failed  {s['skipped_total']} skipped"
    )


class Changes:
    """Wakes `watch` as soon as the crawl's state changes, rather than on a poll interval:
    Redis's client-side caching messages (CLIENT TRACKING in broadcast mode, Redis 6 and
    later, no server setting needed) for the keys whose change can end a crawl, on a
    connection of its own. Without them (an older Redis, an ACL refusing CLIENT) `wait`
    sleeps its whole timeout."""

    def __init__(self, redis: Redis, prefixes: list[str]):
        self.conn: AbstractConnection | None = None
        pool = redis.connection_pool
        # RESP2: the messages come to a subscribed connection (redis-py's maintenance
        # notifications, on for TCP by default, need RESP3: off on this one)
        kwargs = {**pool.connection_kwargs, "protocol": 2, "maint_notifications_config": None}
        kwargs.pop("maint_notifications_pool_handler", None)
        try:
            self.conn = pool.connection_class(**kwargs)
            self._call("CLIENT", "TRACKING", "ON", "REDIRECT", self._call("CLIENT", "ID"),
                       "BCAST", *(word for p in prefixes for word in ("PREFIX", p)))  # fmt: skip
            self._call("SUBSCRIBE", INVALIDATE)
        except (RedisError, OSError, TypeError):  # TypeError: a pool class of other options
            self.close()

    def _call(self, *args: object) -> object:
        self.conn.send_command(*args)
        return self.conn.read_response()

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a change; whether one came (messages that came
        meanwhile are taken too)."""
        if self.conn is None:
            time.sleep(timeout)
            return False
        try:
            if not self.conn.can_read(timeout):
                return False
            while self.conn.can_read(0):
                self.conn.read_response()
        except (RedisError, OSError):  # a lost connection: plain sleeps from now on
            self.close()
        return True

    def close(self) -> None:
        if self.conn is not None:
            self.conn.disconnect()
            self.conn = None


def watch(
    conn: Redis,
    crawl: str,
    workers: LocalWorkers,
    out: TextIO = sys.stderr,
    stop: Stop | None = None,
    failure: Callable[[], str | None] = lambda: None,
) -> dict:
    """Show progress until the crawl is finished (or cancelled), pumping its due revisits
    (a crawl with revisits never finishes: it runs until interrupted); returns the final
    status. Raises StopAsked between two steps once `stop` was asked, and RuntimeError once
    a part the crawl needs says it failed (`failure`: the command's follower).

    On a terminal a progress bar (monitor.ProgressBar); otherwise (a file, a pipe, a dumb
    terminal) a plain line every 5 seconds.
    """
    crawl_keys = CrawlKeys(crawl)
    changes = Changes(conn, [crawl_keys.counters, crawl_keys.inflight])
    frontiers: list[Frontier] = []
    try:
        last_line = 0.0
        with ProgressBar(out) if live_terminal(out) else nullcontext() as bar:
            while True:
                if stop is not None:
                    stop.check()
                if why := failure():
                    raise RuntimeError(why)
                try:
                    frontiers = frontiers or crawl_frontiers(conn, crawl)
                    for frontier in frontiers:
                        frontier.maybe_reap()
                        frontier.maybe_pump()
                    s = stats.status(conn, crawl)
                except REDIS_DOWN as exc:  # Redis restarting: the workers wait for it too
                    out.write(f"\nRedis unreachable ({exc}), waiting for it\n")
                    time.sleep(1)
                    continue
                now = time.monotonic()
                if bar is not None:
                    bar.show(s)
                elif now - last_line >= 5 or s["state"] in stats.OVER:
                    out.write(progress_line(s) + "\n")
                    last_line = now
                if s["state"] in stats.OVER:
                    return s
                unserved = workers.unserved()
                if unserved:
                    where = workers.log_dir or "`rq worker` output"
                    of = f" of shard {unserved[0]}" if workers.shard_count > 1 else ""
                    raise RuntimeError(f"every worker process{of} exited; see {where}")
                until_refresh_or_end(changes, frontiers)
    finally:
        changes.close()


def crawl_frontiers(conn: Redis, crawl: str) -> list[Frontier]:
    """The crawl's Frontier on each of its shards (read from Redis: inside watch's loop,
    which waits for a Redis that is gone, as it may be by the time a busy machine gets here)."""
    cfg = configs.load(conn, crawl)
    return [Frontier(shard, crawl, cfg) for shard in all_shards(conn, crawl)]


def until_refresh_or_end(changes: Changes, states: list[Frontier]) -> None:
    """Wait REFRESH seconds, or less when the crawl may be over: on every change of its
    state, at most one look every CHECK_GAP (a busy crawl changes it all the time; END_GAP
    once at most END_NEAR URLs are left) at whether anything is left
    (Frontier.unfinished, cheaper than a status)."""
    end = time.monotonic() + REFRESH
    while (left := end - time.monotonic()) > 0:
        if not changes.wait(left):
            return
        try:
            pending = sum(state.unfinished() for state in states)
        except REDIS_DOWN:
            return  # the status read says so, and waits
        if pending == 0:
            return
        gap = CHECK_GAP if pending > END_NEAR else END_GAP
        time.sleep(max(0.0, min(gap, end - time.monotonic())))
