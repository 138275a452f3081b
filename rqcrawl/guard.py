"""The address guard: a crawl must not be turned against the machine it runs on or its network.

The check runs on the socket's actual peer address, after DNS resolution, every time a
connection is opened, so redirects and DNS rebinding cannot slip past it.
"""

from __future__ import annotations

import ipaddress

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NewConnectionError

_CGNAT = ipaddress.ip_network("100.64.0.0/10")


def refusal(ip: str) -> str | None:
    """Why the guard refuses `ip` (e.g. "loopback"), or None when it is a public address."""
    addr = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped:
        addr = addr.ipv4_mapped
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


class AddressRefused(NewConnectionError):
    """The peer address of a new connection is not one a crawl may reach."""


class _GuardMixin:
    def _new_conn(self):
        sock = super()._new_conn()
        ip = sock.getpeername()[0]
        reason = refusal(ip)
        if reason:
            sock.close()
            raise AddressRefused(self, f"refused address {ip} ({reason})")
        return sock


class _GuardedHTTPConnection(_GuardMixin, HTTPConnection):
    pass


class _GuardedHTTPSConnection(_GuardMixin, HTTPSConnection):
    pass


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


class GuardedAdapter(HTTPAdapter):
    """A requests adapter whose connections refuse non-public peers."""

    def init_poolmanager(self, *args, **kwargs):
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {
            "http": _GuardedHTTPPool,
            "https": _GuardedHTTPSPool,
        }


def find_refusal(exc: BaseException) -> AddressRefused | None:
    """The AddressRefused buried in a requests exception chain, if any."""
    seen = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, AddressRefused):
            return e
        todo.extend(x for x in (e.__cause__, e.__context__, getattr(e, "reason", None)) if x)
        todo.extend(a for a in getattr(e, "args", ()) if isinstance(a, BaseException))
    return None
