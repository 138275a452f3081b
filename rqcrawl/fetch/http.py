"""Fetching one URL: keep-alive session, timeouts, a total deadline, streamed size cap,
redirects re-checked, the crawl's own cookies."""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch import proxies
from rqcrawl.fetch.clients import client
from rqcrawl.fetch.clients.base import HttpResponse, TransportError
from rqcrawl.fetch.cookies import Cookies
from rqcrawl.fetch.deadline import Watch
from rqcrawl.fetch.guard import AddressRefused, check_url, networks
from rqcrawl.options import gathered
from rqcrawl.parse.urls import InvalidURL, canonicalize

HTML_TYPES = ("text/html", "application/xhtml+xml")
NOT_MODIFIED = 304
TRANSIENT_STATUS = {408, 429, 500, 502, 503, 504}
_CHUNK = 64 * 1024
RETRY_AFTER_MAX = 10 * 365 * 86400.0  # a parsed Retry-After is finite (max_retry_after judges)


@dataclass
class Response:
    url: str
    final_url: str
    status: int
    content_type: str
    body: bytes | None  # None when the page is not HTML (not downloaded)
    headers: Mapping[str, str]  # case-insensitive, getlist keeps each line (clients.base.Headers)
    redirect_to: str | None = None  # a redirect not followed (fetch's `follow`): its target
    truncated: bool = False  # the body is the first `truncate_at` bytes of a longer one


# Called with every HTTP response received (each redirect hop, errors too) and its decoded
# body, or None when the body was not downloaded: how responses reach the WARC archive.
Archive = Callable[[HttpResponse, bytes | None], None]


def no_archive(resp: HttpResponse, body: bytes | None) -> None:
    """The Archive of a crawl without `warc_dir`."""


class FetchError(Exception):
    """A fetch that ended without a usable response.

    `reason` is a short machine-readable word (timeout, too_large, redirect_loop...);
    `transient` says whether trying again later may help; `retry_after` is the server's wish.
    """

    def __init__(
        self,
        reason: str,
        message: str,
        transient: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.reason = reason
        self.transient = transient
        self.status = status
        self.retry_after = retry_after


def send(
    cfg: CrawlConfig, method: str, url: str, headers: Mapping[str, str], data: bytes | None = None
) -> HttpResponse:
    """One request, streamed, redirects not followed, through the crawl's client (the
    guard, the deadline's watch) with the crawl's timeouts, and through its proxy for the
    host if any (see rqcrawl.fetch.proxies): the proxy's own address is the operator's
    choice, the target's is checked here, for every client, before the proxy hears of it.
    A client of the user's own that does not guard its connections (guarded_connections)
    has its target checked here too, before it is handed the request.
    A proxy that dies is retired and the request goes to the next live one. Raises
    TransportError."""
    http = client(cfg.http_client, cfg.allow_private, cfg.allow_networks)
    timeouts = (cfg.connect_timeout, cfg.read_timeout)
    if not cfg.proxies:
        proxy = proxies.from_environment(url)
        if proxy or not http.guarded_connections:
            _check_target(cfg, url)
        return http.send(method, url, headers, timeouts, data, proxy)
    _check_target(cfg, url)
    pool = proxies.pool(cfg.proxies, cfg.proxy_max_failures, cfg.proxy_retry_seconds)
    host = urlsplit(url).netloc
    for _ in cfg.proxies:
        proxy = pool.for_host(host)
        try:
            resp = http.send(method, url, headers, timeouts, data, proxy)
        except TransportError as exc:
            if not exc.proxy or not pool.failed(proxy, exc.kind == "connection_refused"):
                raise
            continue  # retired: the host moves to the next live proxy
        pool.worked(proxy)
        return resp
    raise TransportError("proxy", f"no live proxy of {len(cfg.proxies)}", proxy=True)


def _check_target(cfg: CrawlConfig, url: str) -> None:
    """The guard's check of a target reached through a proxy or a client that does not
    guard its own connections (unless the crawl allows private addresses)."""
    if cfg.allow_private:
        return
    try:
        check_url(url, networks(cfg.allow_networks))
    except AddressRefused as exc:
        raise TransportError("refused_address", exc.detail, refused=exc.detail) from None
    except OSError as exc:  # socket.gaierror: a name that does not resolve
        raise TransportError("dns", f"dns: {exc}") from None


@dataclass(frozen=True)
class Fetching:
    """How fetch GETs a URL (its keyword arguments, see fetch)."""

    any_type: bool = False
    truncate_at: int | None = None
    archive: Archive = no_archive
    cookies: Cookies | None = None
    conditional: Mapping[str, str] | None = None
    follow: bool = True


@gathered(Fetching, "how")
def fetch(
    url: str, cfg: CrawlConfig, check_hop: Callable[[str], str | None], how: Fetching
) -> Response:
    """GET `url`, following redirects by hand so that `check_hop` (scope) sees every hop.
    With `follow` False, a redirect ends the fetch: the Response has no body and names its
    target in `redirect_to` (a page's redirect target is a URL of the crawl of its own,
    which passes robots.txt and its host's politeness gate like any other).

    `check_hop(url)` returns a skip reason or None (or raises FetchError: a hop that could
    not wait for its host's turn). Only HTML bodies are downloaded unless
    `any_type`; `truncate_at` keeps the first bytes of a longer body instead of refusing it
    (robots.txt, a page: Response.truncated says so), reading no further. Every response
    received is passed to `archive`, except those whose body failed to download or was
    cut. `download_timeout` bounds the whole, redirects, headers and bodies included.
    Cookies are sent and kept in `cookies`, if given. `conditional` headers (If-None-Match,
    If-Modified-Since) go with the request of `url` itself, not with a redirect's target: a
    304 comes back as a Response with status 304 and no body.
    Raises FetchError.
    """
    with Watch(cfg.download_timeout) as watch:
        return _follow(url, cfg, check_hop, how, watch)


def _follow(
    url: str, cfg: CrawlConfig, check_hop: Callable[[str], str | None], how: Fetching,
    watch: Watch,
) -> Response:  # fmt: skip
    visited = [url]
    current = url
    while True:
        conditional = (how.conditional or {}) if current == url else {}
        resp = _get(current, cfg, how.cookies, watch, conditional)
        if not resp.is_redirect:
            return _read(resp, (url, current), cfg, watch, how)
        how.archive(resp, None)
        resp.release()
        try:
            target = canonicalize(resp.headers["location"], current)
        except InvalidURL as exc:  # the server's text: records are loaded into HTML pages
            message = f"bad redirect: {exc.inert()}"
            raise FetchError("bad_redirect", message, status=resp.status) from None
        if not how.follow:
            ctype = resp.headers.get("content-type", "")
            return Response(url, current, resp.status, ctype, None, resp.headers, target)
        if target in visited:
            raise FetchError("redirect_loop", f"redirect loop back to {target}")
        if len(visited) > cfg.max_redirects:
            raise FetchError("too_many_redirects", f"more than {cfg.max_redirects} redirects")
        reason = check_hop(target)
        if reason:
            raise FetchError(reason, f"redirect to {target}: {reason}", status=resp.status)
        visited.append(target)
        current = target


def _get(
    url: str,
    cfg: CrawlConfig,
    cookies: Cookies | None,
    watch: Watch,
    conditional: Mapping[str, str],
) -> HttpResponse:
    headers = {"User-Agent": cfg.agent, **conditional}
    cookie = cookies.header(url) if cookies else None
    if cookie:
        headers["Cookie"] = cookie
    try:
        resp = send(cfg, "GET", url, headers)
    except TransportError as exc:
        if exc.refused:
            raise FetchError("refused_address", exc.refused) from None
        if watch.fired:
            raise _too_slow(cfg, None) from None
        raise FetchError(exc.kind, str(exc), transient=True) from None
    if cookies:
        cookies.receive(resp)
    return resp


def _read(
    resp: HttpResponse, urls: tuple[str, str], cfg: CrawlConfig, watch: Watch, how: Fetching
) -> Response:
    """The Response of the last answer `resp` (`urls`: the URL asked for, and the one that
    answered)."""
    (url, final), any_type, truncate_at, archive = urls, how.any_type, how.truncate_at, how.archive
    with resp:  # released on leaving: its connection kept for the next request
        status = resp.status
        ctype = resp.headers.get("content-type", "")
        mime = ctype.split(";")[0].strip().lower()
        wanted = any_type or mime in HTML_TYPES or not mime  # no type: sniffed from the body
        if status == NOT_MODIFIED:  # the answer to a conditional GET: no body
            archive(resp, None)
            return Response(url, final, status, ctype, None, resp.headers)
        if status >= 400 or not wanted:
            archive(resp, None)
        if status in TRANSIENT_STATUS:
            wait = retry_after(resp.headers.get("retry-after"))
            if wait is not None and wait > cfg.max_retry_after:
                message = f"HTTP {status} with Retry-After {wait:.0f}s, over max_retry_after"
                raise FetchError("retry_after_too_long", message, status=status, retry_after=wait)
            raise FetchError(
                f"http_{status}", f"HTTP {status}", transient=True, status=status, retry_after=wait
            )
        if status >= 400:
            raise FetchError(f"http_{status}", f"HTTP {status}", status=status)
        if not wanted:
            return Response(url, final, status, ctype, None, resp.headers)
        declared = resp.headers.get("content-length", "")
        if truncate_at is None and declared.isdigit() and int(declared) > cfg.max_body_bytes:
            raise FetchError("too_large", f"Content-Length {declared} over the cap", status=status)
        body, cut = _body(resp, cfg, watch, truncate_at)
        if not cut:  # (a WARC record of a cut body would pass for the whole response)
            archive(resp, body)
        if not (any_type or mime or sniff_html(body)):
            return Response(url, final, status, ctype, None, resp.headers)
        return Response(url, final, status, ctype, body, resp.headers, truncated=cut)


# What a body without a Content-Type must start with to be taken for HTML (the WHATWG MIME
# sniffing standard's HTML patterns, each followed by a space or `>`), and an XML
# declaration followed by an XHTML root: what a browser renders as a page.
_HTML_STARTS = tuple(
    f"<{tag}".encode()
    for tag in ("!doctype html", "html", "head", "script", "iframe", "h1", "div", "font",
                "table", "a", "style", "title", "b", "body", "br", "p", "!--")
)  # fmt: skip
_SNIFFED = 1445  # bytes the standard looks at


def sniff_html(body: bytes) -> bool:
    """Whether a body served without a Content-Type is HTML, by its first bytes."""
    head = body[:_SNIFFED].removeprefix(codecs.BOM_UTF8).lstrip(b" \t\n\f\r").lower()
    if head.startswith(b"<?xml"):
        return b"<html" in head
    for start in _HTML_STARTS:
        if head.startswith(start) and head[len(start) : len(start) + 1] in (b" ", b">"):
            return True
    return False


def _body(
    resp: HttpResponse, cfg: CrawlConfig, watch: Watch, truncate_at: int | None
) -> tuple[bytes, bool]:
    """Read the decoded body, and whether it was cut at `truncate_at` (nothing past it is
    read); a cap on decoded bytes also stops decompression bombs. A body cut short by the
    deadline may look complete (a connection closed ends a body without length): the watch,
    not the read, says whether it was."""
    chunks, size = [], 0
    try:
        for chunk in resp.iter_bytes(_CHUNK):
            size += len(chunk)
            if truncate_at is not None and size > truncate_at:
                chunks.append(chunk)
                return b"".join(chunks)[:truncate_at], True
            if size > cfg.max_body_bytes:
                raise FetchError(
                    "too_large", f"body over {cfg.max_body_bytes} bytes", status=resp.status
                )
            chunks.append(chunk)
    except TransportError as exc:
        if watch.fired:
            raise _too_slow(cfg, resp.status) from None
        raise FetchError(exc.kind, str(exc), transient=True) from None
    if watch.fired:
        raise _too_slow(cfg, resp.status)
    return b"".join(chunks), False


def _too_slow(cfg: CrawlConfig, status: int | None) -> FetchError:
    return FetchError(
        "download_timeout",
        f"download took over {cfg.download_timeout}s",
        transient=True,
        status=status,
    )


def retry_after(value: str | None) -> float | None:
    """Seconds asked for by a Retry-After header (delta-seconds or an HTTP date), at most
    RETRY_AFTER_MAX; None for anything else. Never raises, whatever the server sent."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # 400 digits make inf, not an error
        return min(float(value), RETRY_AFTER_MAX)
    try:
        wait = parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return min(max(0.0, wait), RETRY_AFTER_MAX)
