"""The crawl's proxies (`proxies`): each host is given one, in turn, and keeps it while it
works; a proxy that refuses connections, or fails `proxy_max_failures` times in a row, is
retired for `proxy_retry_seconds` and its hosts move to the next live one. With no list,
the environment's proxy variables (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY) apply.

The state is the process's own (each worker process learns on its own that a proxy died),
one pool per distinct setting. A proxy's own address is the operator's choice: the guard
checks the target's (rqcrawl.fetch.http.send).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from functools import cache
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass_environment

from rqcrawl.lru import LRU

HOSTS_KEPT = 10_000  # hosts whose proxy a process remembers


class ProxyPool:
    """Proxies handed out per host, dead ones retired and tried again later."""

    def __init__(self, urls: tuple[str, ...], max_failures: int, retry_seconds: float):
        self.urls = urls
        self.max_failures = max_failures
        self.retry_seconds = retry_seconds
        self._of_host: LRU[str, str] = LRU(HOSTS_KEPT)
        self._failures = dict.fromkeys(urls, 0)  # failures in a row
        self._retired: dict[str, float] = {}  # proxy: monotonic time it may be tried again
        self._turn = itertools.cycle(urls)
        self._lock = threading.Lock()

    def for_host(self, host: str) -> str:
        """The proxy of `host`: its own while that one is live, else the next live one in
        turn (when all are retired, the one that may be tried again first)."""
        now = time.monotonic()
        with self._lock:
            mine = self._of_host.get(host)
            if mine is not None and self._live(mine, now):
                return mine
            live = [u for u in self.urls if self._live(u, now)]
            if live:
                mine = next(u for u in self._turn if u in live)
            else:
                mine = min(self.urls, key=self._retired.__getitem__)
            return self._of_host.put(host, mine)

    def worked(self, proxy: str) -> None:
        with self._lock:
            self._failures[proxy] = 0
            self._retired.pop(proxy, None)

    def failed(self, proxy: str, refused: bool) -> bool:
        """Count a failure of `proxy` itself (`refused`: nothing listens there); True when
        this retires it."""
        with self._lock:
            self._failures[proxy] += 1
            if refused or self._failures[proxy] >= self.max_failures:
                self._retired[proxy] = time.monotonic() + self.retry_seconds
                return True
            return False

    def _live(self, proxy: str, now: float) -> bool:
        return self._retired.get(proxy, 0.0) <= now


_pools: dict[tuple, ProxyPool] = {}
_pools_lock = threading.Lock()


def pool(urls: list[str], max_failures: int, retry_seconds: float) -> ProxyPool:
    """The process's pool for this setting."""
    key = (tuple(urls), max_failures, retry_seconds)
    with _pools_lock:
        if key not in _pools:
            _pools[key] = ProxyPool(key[0], max_failures, retry_seconds)
        return _pools[key]


@cache
def environment() -> dict[str, str]:
    """The proxy variables, read once per process (reading them per request cost requests
    a quarter of its CPU per page)."""
    return getproxies()


def from_environment(url: str) -> str | None:
    """The proxy the environment gives `url`, if any (NO_PROXY honoured)."""
    found = environment()
    if not found:
        return None
    parts = urlsplit(url)
    proxy = found.get(parts.scheme) or found.get("all")
    if proxy is None or proxy_bypass_environment(parts.netloc, found):
        return None
    return proxy


def _forked() -> None:
    """A forked child learns anew which proxies live."""
    _pools.clear()


os.register_at_fork(after_in_child=_forked)
