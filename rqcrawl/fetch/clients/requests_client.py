"""The default HTTP client, on requests and urllib3: connections that are guarded (unless
the crawl allows private addresses) and read under the fetch's deadline, direct or through
a proxy, kept alive in pools."""

from __future__ import annotations

import http.client
import socket
import ssl
from collections.abc import Iterator, Mapping

import requests
import urllib3.exceptions
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

from rqcrawl.fetch import deadline
from rqcrawl.fetch.clients.base import (
    Headers,
    HttpClient,
    HttpResponse,
    Kinds,
    Sent,
    TransportError,
    ca_bundle,
    transport_error,
)
from rqcrawl.fetch.guard import Networks, check_peer, checked_addresses


class WatchedConnection(HTTPConnection):
    """Mixed into urllib3's connections: a response is read under the thread's deadline."""

    def getresponse(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        deadline.reading_from(self.sock)
        return super().getresponse(*args, **kwargs)


class GuardedConnection(HTTPConnection):
    """Mixed into urllib3's connections: connect only to checked addresses."""

    allowed: Networks = ()  # set per crawl setting by guarded_pools

    def _new_conn(self) -> socket.socket:
        name = self._dns_host
        try:
            found = checked_addresses(name.strip("[]"), self.port, self.allowed)
        except socket.gaierror as exc:
            raise NameResolutionError(name, self, exc) from exc
        last: Exception | None = None
        for _, sockaddr in found:
            # urllib3 connects to _dns_host; `host` (Host header, SNI) derives from it, so
            # the checked address stands in for the name only while connecting.
            self._dns_host = sockaddr[0]
            try:
                sock = super()._new_conn()
            except ConnectTimeoutError as exc:  # NewConnectionError too: try the next one
                last = exc
                continue
            finally:
                self._dns_host = name
            return check_peer(sock, self.allowed)
        raise last or NewConnectionError(self, f"no address for {name}")


def _pools(*mixins: type, **attrs: object) -> dict[str, type]:
    """urllib3 pool classes, by scheme, whose connections have `mixins` and `attrs`."""
    plain = type("HTTPConnection", (*mixins, HTTPConnection), attrs)
    tls = type("HTTPSConnection", (*mixins, HTTPSConnection), attrs)
    return {
        "http": type("HTTPConnectionPool", (HTTPConnectionPool,), {"ConnectionCls": plain}),
        "https": type("HTTPSConnectionPool", (HTTPSConnectionPool,), {"ConnectionCls": tls}),
    }


_WATCHED = _pools(WatchedConnection)

POOL_HOSTS = 512  # hosts whose idle connections a process keeps
POOL_PER_HOST = 16  # idle connections kept per host (the default slots of a process)


class CrawlAdapter(HTTPAdapter):
    """Direct connections connect only to checked addresses (with `guard`); connections to
    a proxy (whose own address is the operator's choice) are watched, not guarded."""

    def __init__(self, guard: bool, allowed: Networks = ()):
        self.pools = _pools(GuardedConnection, WatchedConnection, allowed=allowed)
        if not guard:
            self.pools = _WATCHED
        # requests keeps 10 hosts' pools (least recently used first out): a crawl of 50 hosts
        # opened a connection for nearly every request. POOL_HOSTS hosts, each with a
        # connection for every slot of the process that may be on it.
        super().__init__(pool_connections=POOL_HOSTS, pool_maxsize=POOL_PER_HOST)

    def init_poolmanager(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = self.pools

    def proxy_manager_for(self, proxy: str, **proxy_kwargs):  # type: ignore[no-untyped-def]
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):  # SOCKS brings its own connection classes
            manager.pool_classes_by_scheme = _WATCHED
        return manager


# Kinds of failed connection by exception type (see base.failure_kind). RemoteDisconnected
# (no answer at all) is a ConnectionResetError; the other HTTPExceptions (a header line over
# 64 KiB, 101 headers, a garbled status line) are the server's answer, not the network's fault.
KINDS: Kinds = (
    ("dns", (socket.gaierror, NameResolutionError)),
    ("tls", (ssl.SSLError, urllib3.exceptions.SSLError)),
    ("connection_refused", (ConnectionRefusedError,)),
    ("timeout", (TimeoutError, requests.Timeout, urllib3.exceptions.TimeoutError)),
    ("connection_reset", (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)),
    ("read_error", (http.client.IncompleteRead,)),  # a body cut short
    ("bad_response", (http.client.HTTPException, urllib3.exceptions.DecodeError)),
)


def _error(exc: requests.RequestException, default: str) -> TransportError:
    return transport_error(exc, KINDS, default, isinstance(exc, requests.exceptions.ProxyError))


class RequestsResponse(HttpResponse):
    def __init__(self, resp: requests.Response, sent: Sent):
        version = resp.raw.version or 11
        super().__init__(
            sent,
            resp.status_code,
            resp.reason or "",
            Headers(resp.raw.headers.items()),
            f"HTTP/{version // 10}.{version % 10}",
        )
        self._resp = resp

    def iter_bytes(self, size: int) -> Iterator[bytes]:
        try:
            yield from self._resp.iter_content(size)
        except requests.RequestException as exc:
            raise _error(exc, "read_error") from exc

    def release(self) -> None:
        raw = self._resp.raw
        if raw.closed:  # read to its end: urllib3 gave the connection back already
            raw.release_conn()
            return
        left = raw.length_remaining  # None: no Content-Length (chunked, or until the close)
        if left is not None and left > DRAIN_BYTES:
            self._resp.close()
            return
        try:  # (a body partly decoded, gzip cut by truncate_at, cannot be read raw: closed)
            raw.read(DRAIN_BYTES, decode_content=False)
            drained = raw.read(1, decode_content=False) == b""
        except Exception:  # noqa: BLE001 - a broken body: the connection is not reused
            drained = False
        if drained:
            raw.release_conn()
        else:
            self._resp.close()

    def close(self) -> None:
        self._resp.close()


DRAIN_BYTES = 64 * 1024  # the most of an unread body read to keep its connection


class RequestsClient(HttpClient):
    guarded_connections = True  # GuardedConnection

    def __init__(self, guard: bool, allowed: Networks):
        super().__init__(guard, allowed)
        s = requests.Session()
        # Proxies are chosen above the client (rqcrawl.fetch.http); requests would look for
        # proxy variables (and ~/.netrc) again on every request, a quarter of its CPU per
        # page: only the CA bundle variables matter, read once here, and no .netrc
        # credentials go to crawled sites.
        s.trust_env = False
        s.verify = ca_bundle() or True
        adapter = CrawlAdapter(guard, allowed)
        s.mount("http://", adapter)
        s.mount("https://", adapter)
        self._session = s
        self._adapter = adapter

    def close(self) -> None:
        self._session.close()

    def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        timeouts: tuple[float, float],
        data: bytes | None = None,
        proxy: str | None = None,
    ) -> HttpResponse:
        """`Session.request` is skipped: what it adds per request (merging settings through
        a runtime Protocol check, hooks, its own cookie jar, redirect bookkeeping) is none
        of a crawler's business and cost a fifth of a fetch's CPU."""
        prepared = requests.PreparedRequest()
        prepared.prepare(
            method=method, url=url, headers={**self._session.headers, **headers}, data=data
        )
        try:
            resp = self._adapter.send(
                prepared,
                stream=True,
                timeout=timeouts,
                verify=self._session.verify,
                cert=None,
                proxies={"http": proxy, "https": proxy} if proxy else {},
            )
        except requests.RequestException as exc:
            raise _error(exc, "connection") from exc
        return RequestsResponse(resp, Sent(method, url, prepared.headers))
