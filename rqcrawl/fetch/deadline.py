"""A total deadline on a download, headers and body included.

Socket timeouts bound each read, not their sum: a server that drips a byte every half second
never trips them. One watchdog thread per process keeps the deadlines of live downloads in a
heap and, when one passes, shuts the download's socket down, so that the blocked read returns
at once and the download fails. A fetch costs a heap push and three short lock holds, a few
microseconds (no thread or timer per request, no wrapper around each read); a finished
download's entry stays in the heap, without its socket, until its deadline comes.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time


class Watch:
    """`with Watch(seconds) as watch:` reads this thread's responses under a deadline of
    `seconds`; `watch.fired` then says whether the deadline cut the download short."""

    __slots__ = ("deadline", "sock", "fired", "done")

    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds
        self.sock: socket.socket | None = None  # the socket the download reads from now
        self.fired = False
        self.done = False

    def __enter__(self) -> Watch:
        _watchdog.add(self)
        _current.watch = self
        return self

    def __exit__(self, *exc: object) -> None:
        _current.watch = None
        _watchdog.end(self)


class _Watchdog:
    """The thread that fires the deadlines, started with the first download."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Watch]] = []
        self._seq = itertools.count()
        self._wake = threading.Condition(threading.Lock())
        self._thread: threading.Thread | None = None

    def add(self, watch: Watch) -> None:
        with self._wake:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="deadlines", daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (watch.deadline, next(self._seq), watch))
            if self._heap[0][2] is watch:
                self._wake.notify()

    def attach(self, watch: Watch, sock: socket.socket | None) -> None:
        """`sock` is the socket the download reads from now (redirects may change it)."""
        with self._wake:
            watch.sock = sock
            if watch.fired or time.monotonic() >= watch.deadline:
                self._fire(watch)

    def end(self, watch: Watch) -> None:
        with self._wake:
            watch.done = True
            watch.sock = None  # the heap keeps the entry until its deadline, not the socket

    def _run(self) -> None:
        with self._wake:
            while True:
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    _, _, watch = heapq.heappop(self._heap)
                    if not watch.done:
                        self._fire(watch)
                self._wake.wait(self._heap[0][0] - now if self._heap else None)

    @staticmethod
    def _fire(watch: Watch) -> None:
        watch.fired = True
        # TLS in TLS (an https proxy) reads through an SSLTransport over a socket.
        sock = getattr(watch.sock, "socket", watch.sock)
        if sock is not None:
            try:  # the plain socket's shutdown, also under TLS: a blocked read returns now
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass  # already closed


_watchdog = _Watchdog()
_current = threading.local()


def _forked() -> None:
    """A forked child (RQ's work horse) has none of the parent's threads: a watchdog anew."""
    global _watchdog
    _watchdog = _Watchdog()


os.register_at_fork(after_in_child=_forked)


def reading_from(sock: socket.socket | None) -> None:
    """Called by a client (rqcrawl.fetch.clients) before it reads a response from `sock`:
    the thread's download, if under a Watch, is cut short by shutting `sock` down."""
    watch = getattr(_current, "watch", None)
    if watch is not None:
        _watchdog.attach(watch, sock)
