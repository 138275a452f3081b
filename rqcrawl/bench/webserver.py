"""The servers of `rqcrawl bench --web` and `--card`: one listening socket per host on
127.0.0.x, all served by one asyncio loop in a thread of the bench's process (the crawler runs
in other processes), HTTP/1.1 with keep-alive, each answer after its host's latency.

Every request goes to the access log (Entry: host, connection, target, User-Agent, arrival,
end of the answer, status, Retry-After) and every accepted connection is counted per host:
the rule checks (conduct.py) and the requests per connection are read from these, as a site
owner would read them.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .webhosts import Reply

HANG_MAX = 600.0  # seconds a hanging answer waits for its client to give up (a bound only)
HEAD_LIMIT = 64 * 1024
REASONS = {200: "OK", 301: "Moved Permanently", 302: "Found", 404: "Not Found",
           429: "Too Many Requests", 500: "Internal Server Error",
           503: "Service Unavailable"}  # fmt: skip


@dataclass
class Entry:
    """One request as the host's access log has it (times: epoch seconds; `end`: when the
    answer's last byte was handed to the kernel (_sent), or the client left; status None: no
    answer)."""

    host: int
    conn: int
    target: str
    user_agent: str
    start: float
    end: float = 0.0
    status: int | None = None
    retry_after: float | None = None


class Responder(Protocol):
    """A host as the server needs it (webhosts.Host, card.StaticSite)."""

    def respond(self, target: str) -> Reply: ...


class WebServer:
    """Serve `hosts` (host i on 127.0.0.{i+1}, a free port each) until stopped."""

    def __init__(self, count: int):
        self.socks = []
        for i in range(count):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((f"127.0.0.{i + 1}", 0))
            sock.listen(1024)
            self.socks.append(sock)
        self.origins = [origin(s.getsockname()) for s in self.socks]
        self.hosts: Sequence[Responder] = []
        self.log: list[Entry] = []
        self.connections: Counter[int] = Counter()  # accepted, per host
        self._ids = itertools.count(1)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._servers: list[asyncio.Server] = []

    def start(self, hosts: Sequence[Responder]) -> WebServer:
        """Serve `hosts`, built for `origins` (in order)."""
        self.hosts = hosts
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result()
        return self

    async def _listen(self) -> None:
        for i, sock in enumerate(self.socks):
            serve = _bound(self._serve, i)
            self._servers.append(await asyncio.start_server(serve, sock=sock, limit=HEAD_LIMIT))

    def stop(self) -> None:
        """Close every listening socket and connection; the loop's thread ends."""
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        for sock in self.socks:
            sock.close()

    async def _close(self) -> None:
        for server in self._servers:
            server.close()
        current = asyncio.current_task()
        for task in asyncio.all_tasks():
            if task is not current:
                task.cancel()

    def __enter__(self) -> WebServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _serve(
        self, index: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.connections[index] += 1
        conn = next(self._ids)
        try:
            while await self._one(index, conn, reader, writer):
                pass
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # the client left
        finally:
            writer.close()

    async def _one(
        self, index: int, conn: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Answer one request; whether the connection stays open for another."""
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        parts = head[0].split(" ")
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in head[1:])}
        entry = Entry(index, conn, parts[1] if len(parts) > 1 else "", headers.get(
            "user-agent", ""), time.time())  # fmt: skip
        self.log.append(entry)
        reply = self.hosts[index].respond(entry.target)
        if reply.hang:
            await _hang(reader)
            entry.end = time.time()
            return False
        await asyncio.sleep(reply.latency)
        if reader.at_eof():  # the client gave up waiting (a timeout): it never had the answer
            entry.end = time.time()
            return False
        entry.end = await _sent(writer, _response(reply, parts[0] == "HEAD"))
        entry.status = reply.status
        if "Retry-After" in reply.headers:
            entry.retry_after = float(reply.headers["Retry-After"])
        return headers.get("connection", "").lower() != "close"


def origin(address: tuple[str, int]) -> str:
    return f"http://{address[0]}:{address[1]}"


def _bound(serve, index: int):
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await serve(index, reader, writer)
        except asyncio.CancelledError:
            pass  # the server stops (_close): an answer still waiting for its latency is dropped

    return handler


async def _sent(writer: asyncio.StreamWriter, data: bytes) -> float:
    """Write `data`; when its last byte was handed to the kernel, as a time no later than
    the client can have had it. An answer the kernel takes in the write itself (all but
    large ones) is stamped just before it: a stamp after it would be late by however long
    this process waited for a core meanwhile, and a paced next request would look early."""
    before = time.time()
    writer.write(data)
    if not writer.transport.get_write_buffer_size():
        return before
    await writer.drain()
    return time.time()


async def _hang(reader: asyncio.StreamReader) -> None:
    """Say nothing until the client closes (or HANG_MAX)."""
    try:
        await asyncio.wait_for(reader.read(), HANG_MAX)
    except (TimeoutError, ConnectionError):
        pass


def _response(reply: Reply, head_only: bool) -> bytes:
    headers = {"Content-Length": str(len(reply.body)), **reply.headers}
    lines = [f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'Status')}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (b"" if head_only else reply.body)
