"""HTTP clients behind one interface (base.HttpClient), one module per library; the crawl's
`http_client` setting names one of CLIENTS or a "module:Class" path of its own."""

from __future__ import annotations

import os

from rqcrawl.extras import MissingExtra, extra_for
from rqcrawl.fetch.clients.base import HttpClient
from rqcrawl.fetch.guard import networks
from rqcrawl.loading import load_class

CLIENTS = {
    "requests": "rqcrawl.fetch.clients.requests_client:RequestsClient",
    "httpx": "rqcrawl.fetch.clients.httpx_client:HttpxClient",  # extra: rqcrawl[http2]
}

_clients: dict[tuple, HttpClient] = {}


def _forked() -> None:
    """A forked child forgets the parent's clients (their keep-alive sockets) now, while
    their descriptors are the inherited ones (see rqcrawl.frontier.shards)."""
    _clients.clear()


os.register_at_fork(after_in_child=_forked)


def client_class(name: str) -> type[HttpClient]:
    """The class `name` stands for (a key of CLIENTS, or "module:Class"). Raises ValueError
    with a one-line reason."""
    path = CLIENTS.get(name, name)
    if ":" not in path:
        raise ValueError(f"http_client {name!r}: not one of {sorted(CLIENTS)} nor module:Class")
    try:
        with extra_for(f"http_client {name!r}"):
            return load_class(path, HttpClient)
    except MissingExtra as exc:
        raise ValueError(str(exc)) from None
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"http_client {name!r}: {exc}") from None
    except TypeError:
        raise ValueError(f"http_client {name!r}: not an HttpClient") from None


def client(name: str, allow_private: bool, allow_networks: list[str]) -> HttpClient:
    """The process's client of this kind and guard setting (one keeps its connections)."""
    key = (name, allow_private, tuple(allow_networks))
    if key not in _clients:
        _clients[key] = client_class(name)(not allow_private, networks(allow_networks))
    return _clients[key]
