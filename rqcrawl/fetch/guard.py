"""The address guard: a crawl must not be turned against the machine it runs on or its network.

A connection resolves the name itself, checks every address the name resolves to, and
connects only to a checked address, so a refused address never sees a byte from us, not even
a TCP handshake. The peer of the connected socket is checked again as a second line. Every
connection is checked, so redirects and DNS rebinding cannot slip past. Through a proxy the
proxy connects, not us: the target's name is resolved and checked here before the request is
sent to the proxy (which then resolves the name again itself).

Nothing here knows a client library: each client (rqcrawl.fetch.clients) connects with
`checked_addresses` and `check_peer`.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]


def networks(cidrs: list[str]) -> Networks:
    """The crawl's `allow_networks` as networks (ValueError names a bad one)."""
    return tuple(ipaddress.ip_network(c, strict=False) for c in cidrs)


def refusal(ip: str, allowed: Networks = ()) -> str | None:
    """Why the guard refuses `ip` (e.g. "loopback"), or None when it is a public address or
    in one of the `allowed` networks (an intranet the crawl is meant to reach).

    IPv6 forms that carry an IPv4 address (mapped, IPv4-compatible, 6to4, Teredo, NAT64) are
    judged by the IPv4 address they carry, which is where their packets end up."""
    addr = ipaddress.ip_address(ip.split("%", 1)[0])
    embedded = _embedded_ipv4(addr)
    if embedded is None:
        return _refusal(addr, allowed)
    form, inner = embedded
    reasons = [f"{form} of {v4}: {why}" for v4 in inner if (why := _refusal(v4, allowed))]
    return "; ".join(reasons) or None


def _embedded_ipv4(addr: IPAddress) -> tuple[str, list[ipaddress.IPv4Address]] | None:
    if not isinstance(addr, ipaddress.IPv6Address):
        return None
    if addr.ipv4_mapped:
        return "IPv4-mapped", [addr.ipv4_mapped]
    if addr.sixtofour:
        return "6to4", [addr.sixtofour]
    if addr.teredo:
        return "Teredo", list(addr.teredo)
    low32 = ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    if addr in _NAT64:
        return "NAT64", [low32]
    if addr in _IPV4_COMPATIBLE and int(addr) > 1:  # not :: nor ::1, judged as themselves
        return "IPv4-compatible", [low32]
    return None


def _refusal(addr: IPAddress, allowed: Networks) -> str | None:
    if any(addr in net for net in allowed if net.version == addr.version):
        return None
    if addr.is_loopback:
        return "loopback"
    if addr.is_link_local:
        return "link-local or cloud metadata"
    if addr in _CGNAT:
        return "carrier-grade NAT"
    if addr.is_private:
        return "private"
    if addr.is_multicast or addr.is_unspecified or addr.is_reserved:
        return "reserved"
    return None


class AddressRefused(OSError):
    """An address a crawl may not reach: `detail` says which and why. An OSError, as a
    failed connection is, so that client libraries pass it up as one."""

    def __init__(self, ip: str, why: str):
        self.detail = f"refused address {ip} ({why})"
        super().__init__(self.detail)


def checked_addresses(host: str, port: int, allowed: Networks = ()) -> list[tuple[int, tuple]]:
    """(family, sockaddr) of every address `host` resolves to; AddressRefused if any is
    refused (a name that also points inward is not trusted with its other addresses).
    Raises socket.gaierror for a name that does not resolve."""
    found = resolve(host, port)
    for _, sockaddr in found:
        why = refusal(sockaddr[0], allowed)
        if why:
            raise AddressRefused(sockaddr[0], why)
    return found


def resolve(host: str, port: int) -> list[tuple[int, tuple]]:
    """(family, sockaddr) of every address `host` resolves to: the crawler's one resolver,
    for connections and for the per-IP politeness gate alike. Raises socket.gaierror."""
    family = socket.AF_UNSPEC if socket.has_ipv6 else socket.AF_INET
    infos = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)
    return [(family, sockaddr) for family, *_, sockaddr in infos]


def check_url(url: str, allowed: Networks = ()) -> None:
    """Raise AddressRefused when the host of `url` resolves to a refused address (the check
    made before a request goes to a proxy)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    checked_addresses(parts.hostname or "", port, allowed=allowed)


def check_peer(sock: socket.socket, allowed: Networks = ()) -> socket.socket:
    """The second line: the connected socket's actual peer must be allowed too (else the
    socket is closed and AddressRefused raised)."""
    ip = sock.getpeername()[0]
    why = refusal(ip, allowed)
    if why:
        sock.close()
        raise AddressRefused(ip, why)
    return sock


def exception_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and every exception buried in it: client libraries wrap the cause in `args`
    and `reason` as well as in `__cause__` and `__context__`."""
    seen = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        found = (e.__cause__, e.__context__, getattr(e, "reason", None), *getattr(e, "args", ()))
        todo.extend(x for x in found if isinstance(x, BaseException))


def find_refusal(exc: BaseException) -> AddressRefused | None:
    """The AddressRefused buried in a client library's exception chain, if any."""
    return next((e for e in exception_chain(exc) if isinstance(e, AddressRefused)), None)
