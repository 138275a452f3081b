"""An HTTP/2-capable client, on httpx and httpcore (`pip install rqcrawl[http2]`,
`http_client = "httpx"`): HTTP/2 where the site offers it over TLS, HTTP/1.1 elsewhere.

httpcore connects through a network backend: ours resolves and checks the address with the
guard, connects only to a checked one, checks the peer, and tells the deadline which socket
each read is from. A connection to a proxy is watched, not guarded (the proxy's address is
the operator's choice; the target's was checked by rqcrawl.fetch.http). On HTTP/2 several
downloads share a connection: one past its deadline shuts that connection down, and the
others on it fail as transient errors too.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterable, Iterator, Mapping

import httpcore
import httpx

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

LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=512 * 16)


class _WatchedStream(httpcore.NetworkStream):
    """A stream whose reads are under the thread's deadline."""

    def __init__(self, stream: httpcore.NetworkStream):
        self._stream = stream
        self._sock = stream.get_extra_info("socket")

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        deadline.reading_from(self._sock)
        return self._stream.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, timeout)

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        return _WatchedStream(self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> object:
        return self._stream.get_extra_info(info)


class _Backend(httpcore.SyncBackend):
    """httpcore's own backend, its streams watched; with `guard`, connecting only to
    addresses the guard accepts (each in turn), the connected peer checked again."""

    def __init__(self, guard: bool, allowed: Networks):
        self.guard = guard
        self.allowed = allowed

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable | None = None,
    ) -> httpcore.NetworkStream:
        if not self.guard:
            return _WatchedStream(
                super().connect_tcp(host, port, timeout, local_address, socket_options)
            )
        try:
            found = checked_addresses(host.strip("[]"), port, self.allowed)
        except OSError as exc:  # refused, or a name that does not resolve
            raise httpcore.ConnectError(str(exc)) from exc
        last: Exception | None = None
        for _, sockaddr in found:
            try:
                stream = super().connect_tcp(
                    sockaddr[0], port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
                continue
            try:
                check_peer(stream.get_extra_info("socket"), self.allowed)
            except OSError as exc:
                raise httpcore.ConnectError(str(exc)) from exc
            return _WatchedStream(stream)
        raise last or httpcore.ConnectError(f"no address for {host}")


KINDS: Kinds = (
    ("dns", (socket.gaierror,)),
    ("tls", (ssl.SSLError,)),
    ("connection_refused", (ConnectionRefusedError,)),
    ("timeout", (TimeoutError, httpx.TimeoutException, httpcore.TimeoutException)),
    ("connection_reset", (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)),
    ("read_error", (httpx.ReadError,)),
    ("bad_response", (httpx.RemoteProtocolError, httpx.DecodingError)),
)


def _error(exc: httpx.HTTPError, default: str, proxy: str | None = None) -> TransportError:
    """Through a proxy, a connection that fails is the proxy's (the proxy connects to the
    target itself; a tunnel it refuses is a ProxyError)."""
    connecting = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
    failed = isinstance(exc, httpx.ProxyError) or (proxy is not None and connecting)
    return transport_error(exc, KINDS, default, failed)


class HttpxResponse(HttpResponse):
    def __init__(self, resp: httpx.Response, sent: Sent):
        super().__init__(
            sent,
            resp.status_code,
            resp.reason_phrase,
            Headers(resp.headers.multi_items()),
            resp.http_version,
        )
        self._resp = resp

    def iter_bytes(self, size: int) -> Iterator[bytes]:
        try:
            yield from self._resp.iter_bytes(size)
        except httpx.HTTPError as exc:
            raise _error(exc, "read_error") from exc

    def release(self) -> None:
        """httpx keeps a connection whose body was read to its end: a short one is."""
        if self._resp.is_stream_consumed:  # read to its end (or closed) already
            self._resp.close()
            return
        read = 0
        try:
            for chunk in self._resp.iter_raw():
                read += len(chunk)
                if read > DRAIN_BYTES:
                    break  # long: closed below with its connection
        except httpx.HTTPError:
            pass
        self._resp.close()

    def close(self) -> None:
        self._resp.close()


DRAIN_BYTES = 64 * 1024


class HttpxClient(HttpClient):
    guarded_connections = True  # _Backend.connect_tcp

    def __init__(self, guard: bool, allowed: Networks):
        super().__init__(guard, allowed)
        self._clients: dict[str | None, httpx.Client] = {}
        self._lock = threading.Lock()

    def _client(self, proxy: str | None) -> httpx.Client:
        """One httpx client per proxy (httpx binds a proxy to its transport)."""
        with self._lock:
            if proxy not in self._clients:
                bundle = ca_bundle()
                verify = ssl.create_default_context(cafile=bundle) if bundle else True
                transport = httpx.HTTPTransport(
                    http2=True, limits=LIMITS, proxy=proxy, verify=verify
                )
                # httpx takes no network backend: its pool's is replaced by ours.
                transport._pool._network_backend = _Backend(self.guard and not proxy, self.allowed)
                self._clients[proxy] = httpx.Client(transport=transport, trust_env=False)
            return self._clients[proxy]

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()

    def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        timeouts: tuple[float, float],
        data: bytes | None = None,
        proxy: str | None = None,
    ) -> HttpResponse:
        client = self._client(proxy)
        timeout = httpx.Timeout(timeouts[1], connect=timeouts[0])
        try:
            request = client.build_request(
                method, url, headers=headers, content=data, timeout=timeout
            )
            resp = client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _error(exc, "connection", proxy) from exc
        except httpx.InvalidURL as exc:
            raise TransportError("bad_url", f"bad_url: {exc}") from exc
        return HttpxResponse(resp, Sent(method, url, dict(request.headers)))
