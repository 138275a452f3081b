"""Running the real commands (`rqcrawl ...` and worker fleets as subprocesses) and waiting for
what they do: one `wait_until` for every test that waits."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from redis import Redis
from rq import Worker

from rqcrawl.workers.runner import LocalWorkers

ROOT = Path(__file__).resolve().parent.parent  # the repository
CONF = ROOT / "conf"
BIN = Path(sys.executable).parent  # the venv's commands: rqcrawl, warcio, rq-dashboard

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    timeout: float,
    what: str,
    *,
    accept: Callable[[T], object] = bool,
    ignoring: tuple[type[Exception], ...] = (),
    every: float = 0.05,
) -> T:
    """Call `condition` every `every` seconds until `accept` holds for its value (by default:
    until the value is truthy), and return that value. An exception in `ignoring` counts as
    "not yet" (a server still starting). After `timeout` seconds, fail the test saying what
    was awaited and the last value seen, so that a slow or broken run explains itself."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = condition()
            if accept(value):
                return value
        except ignoring as exc:
            value = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout} s for {what}; last value: {value!r}")
        time.sleep(every)


def env_with(redis_url: str) -> dict[str, str]:
    """This environment for a subprocess, with RQ's Redis URL set to `redis_url`."""
    env = dict(os.environ)
    env.pop("REDIS_URL", None)
    env["RQ_REDIS_URL"] = redis_url
    return env


def rqcrawl(redis_url: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(BIN / "rqcrawl"), *args],
        env=env_with(redis_url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"rqcrawl {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def seed_local(redis_url: str, url: str, crawl: str, max_depth: int, *extra: str):
    """`rqcrawl seed` of a crawl on loopback servers (so with --allow-private), without the
    politeness delay unless `extra` sets one (robots.txt stays on), and without sitemaps
    unless `extra` says `--sitemaps`: the test sites have none, and tests that count their
    requests are about other things (tests/test_sitemaps.py turns them on)."""
    delay = () if "--delay" in extra else ("--delay", "0")
    maps = () if "--sitemaps" in extra else ("--no-sitemaps",)
    return rqcrawl(
        redis_url, "seed", url, "--max-depth", str(max_depth), "--crawl", crawl,
        "--allow-private", *delay, *maps, *extra,
    )  # fmt: skip


def status(redis_url: str, crawl: str) -> dict:
    return json.loads(rqcrawl(redis_url, "status", crawl, "--json").stdout)


def wait_finished(redis_url: str, crawl: str, timeout: float = 120) -> dict:
    """`rqcrawl status` until the crawl is finished (every 0.3 s: each call is a process)."""
    return wait_until(
        lambda: status(redis_url, crawl),
        timeout,
        f"crawl {crawl} to finish",
        accept=lambda s: s["state"] == "finished",
        every=0.3,
    )


def worker_names(conn: Redis, workers: LocalWorkers, timeout: float = 30) -> list[str]:
    """The RQ names of `workers`' processes once each has registered: every worker of each
    (the recommended worker runs its slots as workers of their own), process by process,
    the first one's first (a stock worker's name is random; RQ stores every worker's pid)."""

    def names() -> list[list[str]]:
        by_pid: dict[int, list[str]] = {}
        for w in Worker.all(connection=conn):
            by_pid.setdefault(w.pid, []).append(w.name)
        return [sorted(by_pid.get(p.pid, []), key=len) for p in workers.procs]

    each = workers.workers_each
    found = wait_until(
        names, timeout, "every worker to register", accept=lambda n: all(len(p) == each for p in n)
    )
    return [name for process in found for name in process]


def child_pids(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def stop_pids(pids: list[int], grace: float = 5) -> None:
    """Stop processes that are not our children (orphans of a killed worker): SIGTERM, then
    SIGKILL for those still running after `grace` seconds."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    with contextlib.suppress(AssertionError):  # the grace is over: what is left is killed
        wait_until(lambda: not any(map(running, pids)), grace, "processes to exit")
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def running(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def command_calls(conn: Redis, command: str) -> int:
    """How many times Redis ran `command` so far (INFO commandstats; inside scripts too)."""
    return conn.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0)


def waiting(state) -> dict[str, int]:
    """URL -> depth of every URL waiting in its host's queue (-1: in flight, back in turn)
    of a CrawlState."""
    found = {}
    for key in state.redis.smembers(state.keys.qkeys):
        queue = state.keys.qprefix + key.decode()
        for url, score in state.redis.zrange(queue, 0, -1, withscores=True):
            found[url.decode()] = -1 if score < 0 else int(score // 2_097_152)
    return found


SLOW_US = 100_000  # what "slow" means for a Redis command in these tests: 100 ms
# Commands whose work does not grow with their data, at these word counts at most (command,
# key, one member or field and its value): one of them over SLOW_US was the server held off
# the CPU (a loaded machine's scheduler, its container's CPU quota), not at work.
CONSTANT = {"ZADD": 4, "ZREM": 3, "ZSCORE": 3, "HSET": 4, "HDEL": 3, "HGET": 3, "HEXISTS": 3,
            "HINCRBY": 4, "SADD": 3, "SREM": 3, "SISMEMBER": 3, "GET": 2, "SET": 6, "INCRBY": 3,
            "RPUSH": 3, "XADD": 5, "EXISTS": 2, "HLEN": 2, "ZCARD": 2, "LLEN": 2}  # fmt: skip


def busy_in_slowlog(entries: list[dict]) -> list[dict]:
    """The entries of Redis's slow log (newest first, as SLOWLOG GET gives them) that are
    work: a stall inside a command of constant work is not, nor a script slow by its stalls
    alone (a script's own commands are logged just before it)."""
    work, stalled = [], 0
    for entry in reversed(entries):  # oldest first: a script's commands, then the script
        words = entry["command"].decode(errors="replace").split()
        name = words[0].upper() if words else ""
        if len(words) <= CONSTANT.get(name, 0):
            stalled += entry["duration"] if entry["client_address"] == b"?:0" else 0
        elif name in ("EVALSHA", "EVAL") and entry["duration"] - stalled < SLOW_US:
            stalled = 0
        else:
            work.append(entry)
            stalled = 0
    return work[::-1]
