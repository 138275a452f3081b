"""The HTTP client interface: what rqcrawl.fetch.http asks of a client library, and the
response type every caller sees instead of the library's.

A client sends one request, streamed, redirects not followed, and connects only through the
address guard (rqcrawl.fetch.guard: checked addresses, the connected peer checked again) and
under the thread's download deadline (rqcrawl.fetch.deadline.reading_from, told the socket each
response is read from). Everything else (following redirects, size caps, proxies, cookies,
failure reasons) is done above the client, once for all clients.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from rqcrawl.fetch.guard import Networks, exception_chain, find_refusal

REDIRECTS = {301, 302, 303, 307, 308}


class Headers(Mapping[str, str]):
    """Response headers as received: case-insensitive, a repeated header's lines joined by
    ", " when read as a mapping, each line kept apart by `getlist` (robots directives, cookies)."""

    def __init__(self, lines: Iterable[tuple[str, str]]):
        self.lines = list(lines)  # (name, value) in the order received
        self._by_name: dict[str, list[str]] = {}
        for name, value in self.lines:
            self._by_name.setdefault(name.lower(), []).append(value)

    def __getitem__(self, name: str) -> str:
        return ", ".join(self._by_name[name.lower()])

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def getlist(self, name: str) -> list[str]:
        return list(self._by_name.get(name.lower(), ()))

    def get_all(self, name: str, default: list[str] | None = None) -> list[str] | None:
        """What http.cookiejar reads Set-Cookie lines with (email.message's signature)."""
        return self.getlist(name) or default


@dataclass(frozen=True)
class Sent:
    """The request a response answers, as sent (for the WARC request record and cookies)."""

    method: str
    url: str
    headers: Mapping[str, str]


class HttpResponse(ABC):
    """A response whose body is not read yet; `with resp:` closes it."""

    def __init__(
        self, request: Sent, status: int, reason: str, headers: Headers, http_version: str
    ):
        self.request = request
        self.url = request.url
        self.status = status
        self.reason = reason
        self.headers = headers
        self.http_version = http_version  # "HTTP/1.1", "HTTP/2"

    @property
    def is_redirect(self) -> bool:
        return self.status in REDIRECTS and "location" in self.headers

    def info(self) -> Headers:
        """The headers, as http.cookiejar asks a response for them."""
        return self.headers

    @abstractmethod
    def iter_bytes(self, size: int) -> Iterator[bytes]:
        """The decoded body in chunks of about `size` bytes. Raises TransportError."""

    @abstractmethod
    def release(self) -> None:
        """Done with the answer, whatever of its body was read (a redirect's, an error's, a
        304's, a refused type's, a truncated one's, or all of it): read what is left of a
        short body so that the connection goes back to the pool for the host's next request
        (a handshake less for the site), else close it."""

    @abstractmethod
    def close(self) -> None:
        """Done: the connection goes back to the pool if the body was read, else closes."""

    def __enter__(self) -> HttpResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class TransportError(Exception):
    """A request that got no response, or whose body broke off: `kind` says why (see
    failure_kind), `refused` is the guard's detail when it refused the address, `proxy`
    whether the proxy itself failed (unreachable, or it refused the tunnel)."""

    def __init__(self, kind: str, message: str, refused: str | None = None, proxy: bool = False):
        super().__init__(message)
        self.kind = kind
        self.refused = refused
        self.proxy = proxy


class HttpClient(ABC):
    """One per process and guard setting (rqcrawl.fetch.clients.client): keeps its
    connections alive across requests and threads."""

    # Whether the client connects through the guard itself (checked addresses, the peer
    # checked again), as the built-in ones do. A client of the user's own that does not say
    # so gets only targets the guard accepted just before (rqcrawl.fetch.http.send).
    guarded_connections: bool = False

    def __init__(self, guard: bool, allowed: Networks):
        self.guard = guard  # connect only to addresses the guard accepts
        self.allowed = allowed  # networks the guard lets through (`allow_networks`)

    @abstractmethod
    def send(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        timeouts: tuple[float, float],
        data: bytes | None = None,
        proxy: str | None = None,
    ) -> HttpResponse:
        """One request, streamed, redirects not followed, under `timeouts` (to connect, to
        read each chunk), through `proxy` if given (whose
        own address is the operator's choice: the caller checks the target's). Raises
        TransportError."""

    def close(self) -> None:  # noqa: B027 - not abstract: a client that keeps none has none to close
        """Close the connections kept alive."""


Kinds = tuple[tuple[str, tuple[type[BaseException], ...]], ...]


def ca_bundle() -> str | None:
    """The CA bundle the operator names, read as requests and curl read it
    (REQUESTS_CA_BUNDLE, then CURL_CA_BUNDLE); None: the system's. Every client verifies
    against it, so that a private CA works with either."""
    return os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or None


def failure_kind(exc: BaseException, kinds: Kinds) -> str | None:
    """The first kind of `kinds` that an exception of `exc`'s chain is an instance of; None
    when no type says. Never by the message, which can contain the URL (a refused
    `http://host/getaddrinfo` is not a DNS failure)."""
    chain = list(exception_chain(exc))
    for kind, types in kinds:
        if any(isinstance(e, types) for e in chain):
            return kind
    return None


def transport_error(exc: BaseException, kinds: Kinds, default: str, proxy: bool) -> TransportError:
    """Our TransportError for a client library's exception: the guard's refusal buried in it,
    else the kind its types say (`default` when none say); `proxy`: the proxy failed."""
    refused = find_refusal(exc)
    if refused:
        return TransportError("refused_address", refused.detail, refused.detail, proxy)
    kind = failure_kind(exc, kinds) or default
    text = str(exc)
    text = text if len(text) < 200 else text[:197] + "..."
    return TransportError(kind, f"{kind}: {text}", proxy=proxy)
