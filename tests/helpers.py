"""Running the real commands: `rqcrawl ...` and `rq worker crawl` as subprocesses."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from servers import env_with

BIN = Path(sys.executable).parent


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
    politeness delay unless `extra` sets one (robots.txt stays on)."""
    delay = () if "--delay" in extra else ("--delay", "0")
    return rqcrawl(
        redis_url, "seed", url, "--max-depth", str(max_depth), "--crawl", crawl,
        "--allow-private", *delay, *extra,
    )  # fmt: skip


def status(redis_url: str, crawl: str) -> dict:
    return json.loads(rqcrawl(redis_url, "status", crawl, "--json").stdout)


def wait_finished(redis_url: str, crawl: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        s = status(redis_url, crawl)
        if s["state"] == "finished":
            return s
        if time.monotonic() > deadline:
            raise AssertionError(f"crawl {crawl} not finished after {timeout}s: {s}")
        time.sleep(0.3)


class Workers:
    """Real `rq worker crawl` processes, stopped (warm shutdown, then kill) on exit."""

    def __init__(
        self,
        redis_url: str,
        count: int,
        *extra: str,
        log_dir: Path | None = None,
        env: dict[str, str] | None = None,
    ):
        self.procs = []
        self.names = []
        for n in range(count):
            name = f"w{n}-{time.monotonic_ns()}"
            log = open(log_dir / f"{name}.log", "w") if log_dir else subprocess.DEVNULL
            self.names.append(name)
            self.procs.append(
                subprocess.Popen(
                    [str(BIN / "rq"), "worker", "crawl", "--name", name, *extra],
                    env=env_with(redis_url) | (env or {}),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def child_pids(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def stop_pids(pids: list[int], grace: float = 5) -> None:
    """Stop processes that are not our children (orphans of a killed worker): SIGTERM, then
    SIGKILL after `grace` seconds."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]
