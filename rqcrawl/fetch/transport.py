"""The crawler's requests adapter: urllib3 connections that are guarded (unless the crawl
allows private addresses) and read under the fetch's deadline, direct or through a proxy."""

from __future__ import annotations

from functools import cache

import requests
from requests.adapters import HTTPAdapter
from requests.utils import select_proxy
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NewConnectionError

from rqcrawl.fetch.deadline import WatchedConnection
from rqcrawl.fetch.guard import GuardedConnection, Networks, check_url


def _pools(*mixins: type, **attrs: object) -> dict[str, type]:
    """urllib3 pool classes, by scheme, whose connections have `mixins` and `attrs`."""
    http = type("HTTPConnection", (*mixins, HTTPConnection), attrs)
    https = type("HTTPSConnection", (*mixins, HTTPSConnection), attrs)
    return {
        "http": type("HTTPConnectionPool", (HTTPConnectionPool,), {"ConnectionCls": http}),
        "https": type("HTTPSConnectionPool", (HTTPSConnectionPool,), {"ConnectionCls": https}),
    }


@cache
def guarded_pools(allowed: Networks) -> dict[str, type]:
    """Guarded pool classes letting `allowed` through: one set per distinct setting."""
    return _pools(GuardedConnection, WatchedConnection, allowed=allowed)


_WATCHED = _pools(WatchedConnection)


class CrawlAdapter(HTTPAdapter):
    """With `guard`, a request never reaches a refused address: direct connections connect
    only to checked addresses; through a proxy (whose own address is the operator's choice)
    the target's name is resolved and checked here before the request is sent."""

    def __init__(self, guard: bool, allowed: Networks = ()):
        self.guard = guard
        self.allowed = allowed  # networks the guard lets through (`allow_networks`)
        super().__init__()

    def init_poolmanager(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().init_poolmanager(*args, **kwargs)
        pools = guarded_pools(self.allowed) if self.guard else _WATCHED
        self.poolmanager.pool_classes_by_scheme = pools

    def proxy_manager_for(self, proxy: str, **proxy_kwargs):  # type: ignore[no-untyped-def]
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if not proxy.lower().startswith("socks"):  # SOCKS brings its own connection classes
            manager.pool_classes_by_scheme = _WATCHED
        return manager

    def send(  # type: ignore[override]
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: object = None,
        verify: bool | str = True,
        cert: object = None,
        proxies: dict[str, str] | None = None,
    ) -> requests.Response:
        if self.guard and select_proxy(request.url, proxies):
            try:
                check_url(request.url, self.allowed)
            except NewConnectionError as exc:  # refused, or a name we cannot resolve
                raise requests.ConnectionError(exc, request=request) from exc
        return super().send(request, stream, timeout, verify, cert, proxies)
