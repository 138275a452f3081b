"""Fetching one URL: keep-alive session, timeouts, a total deadline, streamed size cap,
redirects re-checked, the crawl's own cookies."""

from __future__ import annotations

import codecs
import http.client
import os
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from http.cookiejar import DefaultCookiePolicy
from urllib.request import getproxies

import requests
import urllib3.exceptions

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.cookies import Cookies
from rqcrawl.fetch.deadline import Watch
from rqcrawl.fetch.guard import exception_chain, find_refusal, networks
from rqcrawl.fetch.transport import CrawlAdapter
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
    headers: Mapping[str, str]  # case-insensitive; urllib3's, whose getlist keeps each line
    redirect_to: str | None = None  # a redirect not followed (fetch's `follow`): its target


# Called with every HTTP response received (each redirect hop, errors too) and its decoded
# body, or None when the body was not downloaded: how responses reach the WARC archive.
Archive = Callable[[requests.Response, bytes | None], None]


def no_archive(resp: requests.Response, body: bytes | None) -> None:
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


_sessions: dict[tuple[bool, tuple[str, ...]], requests.Session] = {}


def _forked() -> None:
    """A forked child forgets the parent's sessions (their keep-alive sockets) now, while
    their descriptors are the inherited ones (see rqcrawl.frontier.shards)."""
    _sessions.clear()


os.register_at_fork(after_in_child=_forked)


def session(cfg: CrawlConfig) -> requests.Session:
    """The process's keep-alive session, one per guard setting (`allow_private`,
    `allow_networks`). Its own cookie jar refuses every cookie: a crawl's cookies are its
    own (see cookies.py)."""
    key = (cfg.allow_private, tuple(cfg.allow_networks))
    if key not in _sessions:
        s = requests.Session()
        if not getproxies():
            # requests looks for proxy variables (and ~/.netrc) again on every request, a
            # quarter of its CPU per page. With no proxy set, only the CA bundle variables
            # matter, read once here; and no .netrc credentials go to crawled sites.
            s.trust_env = False
            env = os.environ
            s.verify = env.get("REQUESTS_CA_BUNDLE") or env.get("CURL_CA_BUNDLE") or True
        s.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))
        allowed = networks(cfg.allow_networks)
        s.mount("http://", CrawlAdapter(not cfg.allow_private, allowed))
        s.mount("https://", CrawlAdapter(not cfg.allow_private, allowed))
        _sessions[key] = s
    return _sessions[key]


def send(
    cfg: CrawlConfig,
    method: str,
    url: str,
    headers: Mapping[str, str],
    cookies: requests.cookies.RequestsCookieJar | None = None,
    data: bytes | None = None,
) -> requests.Response:
    """One request, streamed, redirects not followed, through the session's adapter (the
    guard, the deadline's watch) with the session's headers and the crawl's timeouts.
    `Session.request` is skipped: what it adds per request (merging settings through a
    runtime Protocol check, hooks, its own cookie jar, redirect bookkeeping) is none of a
    crawler's business and cost a fifth of a fetch's CPU. Proxy variables still apply."""
    s = session(cfg)
    prepared = requests.PreparedRequest()
    prepared.prepare(
        method=method, url=url, headers={**s.headers, **headers}, cookies=cookies, data=data
    )
    env = s.merge_environment_settings(url, {}, True, s.verify, None) if s.trust_env else {}
    return s.get_adapter(url).send(
        prepared,
        stream=True,
        timeout=(cfg.connect_timeout, cfg.read_timeout),
        verify=env.get("verify", s.verify),
        cert=None,
        proxies=env.get("proxies", {}),
    )


def fetch(
    url: str,
    cfg: CrawlConfig,
    check_hop: Callable[[str], str | None],
    any_type: bool = False,
    truncate_at: int | None = None,
    archive: Archive = no_archive,
    cookies: Cookies | None = None,
    conditional: Mapping[str, str] | None = None,
    follow: bool = True,
) -> Response:
    """GET `url`, following redirects by hand so that `check_hop` (scope) sees every hop.
    With `follow` False, a redirect ends the fetch: the Response has no body and names its
    target in `redirect_to` (a page's redirect target is a URL of the crawl of its own,
    which passes robots.txt and its host's politeness gate like any other).

    `check_hop(url)` returns a skip reason or None. Only HTML bodies are downloaded unless
    `any_type`; `truncate_at` keeps the first bytes of a longer body instead of refusing it
    (robots.txt). Every response received is passed to `archive`, except those whose body
    failed to download. `download_timeout` bounds the whole, redirects, headers and bodies
    included. Cookies are sent and kept in `cookies`, if given. `conditional` headers
    (If-None-Match, If-Modified-Since) go with the request of `url` itself, not with a
    redirect's target: a 304 comes back as a Response with status 304 and no body.
    Raises FetchError.
    """
    with Watch(cfg.download_timeout) as watch:
        return _follow(
            url,
            cfg,
            check_hop,
            any_type,
            truncate_at,
            archive,
            cookies,
            watch,
            conditional or {},
            follow,
        )


def _follow(
    url: str,
    cfg: CrawlConfig,
    check_hop: Callable[[str], str | None],
    any_type: bool,
    truncate_at: int | None,
    archive: Archive,
    cookies: Cookies | None,
    watch: Watch,
    conditional: Mapping[str, str],
    follow: bool,
) -> Response:
    visited = [url]
    current = url
    while True:
        resp = _get(current, cfg, cookies, watch, conditional if current == url else {})
        if not resp.is_redirect:
            return _read(resp, url, current, cfg, watch, any_type, truncate_at, archive)
        archive(resp, None)
        resp.close()
        try:
            target = canonicalize(resp.headers["location"], current)
        except InvalidURL as exc:
            message = f"bad redirect: {exc}"
            raise FetchError("bad_redirect", message, status=resp.status_code) from None
        if not follow:
            ctype = resp.headers.get("content-type", "")
            return Response(url, current, resp.status_code, ctype, None, resp.headers, target)
        if target in visited:
            raise FetchError("redirect_loop", f"redirect loop back to {target}")
        if len(visited) > cfg.max_redirects:
            raise FetchError("too_many_redirects", f"more than {cfg.max_redirects} redirects")
        reason = check_hop(target)
        if reason:
            raise FetchError(reason, f"redirect to {target}: {reason}", status=resp.status_code)
        visited.append(target)
        current = target


def _get(
    url: str,
    cfg: CrawlConfig,
    cookies: Cookies | None,
    watch: Watch,
    conditional: Mapping[str, str],
) -> requests.Response:
    try:
        jar = cookies.jar(url) if cookies else None
        headers = {"User-Agent": cfg.user_agent, **conditional}
        resp = send(cfg, "GET", url, headers, jar)
    except requests.RequestException as exc:
        refused = find_refusal(exc)
        if refused:
            raise FetchError("refused_address", refused.detail) from None
        if watch.fired:
            raise _too_slow(cfg, None) from None
        kind = failure_kind(exc) or "connection"
        raise FetchError(kind, f"{kind}: {_short(exc)}", transient=True) from None
    if cookies:
        cookies.receive(resp)
    return resp


def _read(
    resp: requests.Response,
    url: str,
    final: str,
    cfg: CrawlConfig,
    watch: Watch,
    any_type: bool,
    truncate_at: int | None,
    archive: Archive,
) -> Response:
    with resp:
        status = resp.status_code
        ctype = resp.headers.get("content-type", "")
        mime = ctype.split(";")[0].strip().lower()
        wanted = any_type or mime in HTML_TYPES or not mime  # no type: sniffed from the body
        if status == NOT_MODIFIED:  # the answer to a conditional GET: no body
            archive(resp, None)
            return Response(url, final, status, ctype, None, resp.raw.headers)
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
            return Response(url, final, status, ctype, None, resp.raw.headers)
        declared = resp.headers.get("content-length", "")
        if truncate_at is None and declared.isdigit() and int(declared) > cfg.max_body_bytes:
            raise FetchError("too_large", f"Content-Length {declared} over the cap", status=status)
        body = _body(resp, cfg, watch, truncate_at)
        archive(resp, body)
        if not (any_type or mime or sniff_html(body)):
            return Response(url, final, status, ctype, None, resp.raw.headers)
        return Response(url, final, status, ctype, body, resp.raw.headers)


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
    resp: requests.Response, cfg: CrawlConfig, watch: Watch, truncate_at: int | None
) -> bytes:
    """Read the decoded body; a cap on decoded bytes also stops decompression bombs. A body
    cut short by the deadline may look complete (a connection closed ends a body without
    length): the watch, not the read, says whether it was."""
    chunks, size = [], 0
    try:
        for chunk in resp.iter_content(_CHUNK):
            size += len(chunk)
            if truncate_at is not None and size >= truncate_at:
                chunks.append(chunk)
                return b"".join(chunks)[:truncate_at]
            if size > cfg.max_body_bytes:
                raise FetchError(
                    "too_large", f"body over {cfg.max_body_bytes} bytes", status=resp.status_code
                )
            chunks.append(chunk)
    except requests.RequestException as exc:
        if watch.fired:
            raise _too_slow(cfg, resp.status_code) from None
        kind = failure_kind(exc) or "read_error"
        raise FetchError(kind, f"{kind}: {_short(exc)}", transient=True) from None
    if watch.fired:
        raise _too_slow(cfg, resp.status_code)
    return b"".join(chunks)


# Kinds of failed connection by exception type: the first kind that an exception of the
# chain is an instance of. Never by the message, which can contain the URL (a refused
# `http://host/getaddrinfo` is not a DNS failure). RemoteDisconnected (no answer at all) is
# a ConnectionResetError; the other HTTPExceptions (a 1 MB header line, 101 headers, a
# garbled status line) are the server's answer, not the network's fault.
_FAILURE_KINDS: tuple[tuple[str, tuple[type[BaseException], ...]], ...] = (
    ("dns", (socket.gaierror, urllib3.exceptions.NameResolutionError)),
    ("tls", (ssl.SSLError, urllib3.exceptions.SSLError)),
    ("connection_refused", (ConnectionRefusedError,)),
    ("timeout", (TimeoutError, requests.Timeout, urllib3.exceptions.TimeoutError)),
    ("connection_reset", (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)),
    ("read_error", (http.client.IncompleteRead,)),  # a body cut short
    ("bad_response", (http.client.HTTPException, urllib3.exceptions.DecodeError)),
)


def failure_kind(exc: BaseException) -> str | None:
    """What went wrong under a requests exception, by the types in its chain: dns, tls,
    connection_refused, timeout, connection_reset, read_error or bad_response; None when no
    type says."""
    chain = list(exception_chain(exc))
    for kind, types in _FAILURE_KINDS:
        if any(isinstance(e, types) for e in chain):
            return kind
    return None


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


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) < 200 else text[:197] + "..."
