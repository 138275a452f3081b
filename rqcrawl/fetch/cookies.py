"""Cookies: each crawl keeps its own, per host, capped.

A worker serves many crawls with one keep-alive session, whose own jar is kept empty: a
crawl's cookies live in a jar per host, at most `max_cookies_per_host` cookies and
`max_cookie_bytes_per_host` bytes of names and values (which bounds the Cookie header sent).
Past the cap a host's new cookies are dropped (largest first), the ones it set first are
kept: those are the session and consent cookies a site sets on its first pages, and a site
that sets a cookie per page only floods its own jar. The jars of all crawls of a process sit
in one LRU, so a worker serving thousands of crawls over its life keeps a bounded number.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from http.cookiejar import Cookie, CookieJar
from urllib.parse import urlsplit
from urllib.request import Request

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.clients.base import HttpResponse

MAX_JARS = 1000  # host jars kept per process, all crawls together

_jars: OrderedDict[tuple[int, str], CookieJar] = OrderedDict()
_lock = threading.Lock()
_crawl_ids = itertools.count()


class Cookies:
    """The cookies of one crawl in this process (none when the crawl's `cookies` is off)."""

    def __init__(self, cfg: CrawlConfig):
        self.enabled = cfg.cookies
        self.max_count = cfg.max_cookies_per_host
        self.max_bytes = cfg.max_cookie_bytes_per_host
        self._id = next(_crawl_ids)  # never reused: a purged crawl's name starts afresh

    def header(self, url: str) -> str | None:
        """The Cookie header to send with a request of `url`, if any cookie goes with it."""
        if not self.enabled:
            return None
        request = Request(url)
        with _lock:
            self._host_jar(url).add_cookie_header(request)
        return request.get_header("Cookie")

    def receive(self, resp: HttpResponse) -> None:
        """Keep the cookies `resp` sets (or deletes), within the host's cap."""
        if not self.enabled:
            return
        with _lock:
            jar = self._host_jar(resp.url)
            before = {_key(c) for c in jar}
            jar.extract_cookies(resp, Request(resp.url))  # type: ignore[arg-type]
            jar.clear_expired_cookies()
            _cap(jar, before, self.max_count, self.max_bytes)

    def _host_jar(self, url: str) -> CookieJar:
        """The jar of `url`'s host (the caller holds the lock)."""
        key = (self._id, urlsplit(url).hostname or "")
        jar = _jars.get(key)
        if jar is None:
            jar = _jars[key] = CookieJar()
            if len(_jars) > MAX_JARS:
                _jars.popitem(last=False)
        else:
            _jars.move_to_end(key)
        return jar


def _cap(jar: CookieJar, before: set[tuple], max_count: int, max_bytes: int) -> None:
    """Drop cookies until `jar` is within the cap: new ones first, largest first."""
    cookies = list(jar)
    count, size = len(cookies), sum(map(_size, cookies))
    for c in sorted(cookies, key=lambda c: (_key(c) in before, -_size(c))):
        if count <= max_count and size <= max_bytes:
            return
        jar.clear(c.domain, c.path, c.name)
        count, size = count - 1, size - _size(c)


def _key(c: Cookie) -> tuple[str, str, str]:
    return c.domain, c.path, c.name


def _size(c: Cookie) -> int:
    """What the cookie adds to a Cookie header: `name=value; `."""
    return len(c.name) + len(c.value or "") + 3
