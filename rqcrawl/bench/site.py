"""The benchmark's web site: a deterministic link graph, pre-rendered in memory, served by a
small asyncio HTTP/1.1 server in several forked processes, so that the site is never what
limits the crawlers being compared.

Pages live at the same three kinds of address as the test site (`/pN.html`, `/d/pN.html`,
`/item?id=N&v=1`) and link to each other in every form a crawler must resolve: relative with
`../`, root-relative, absolute, protocol-relative, with fragments, and with query parameters
in another order. Each page also carries links no crawler may follow (mailto:, javascript:,
tel:, another host). Page i links to its tree children 8i+1..8i+8, so every page is
reachable from page 0, and to random pages up to about 40 links.

`bench --shards` spreads the same pages over several hosts (render_hosts, start_hosts), so
that they spread over shards.

The skewed site of `bench --skewed` is two hosts (two servers): one with many pages at one
level and a robots.txt Crawl-delay (FanSpec), one with a long chain of pages (ChainSpec).
"""

from __future__ import annotations

import asyncio
import functools
import mimetypes
import os
import posixpath
import random
import signal
import socket
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from rqcrawl.parse.urls import canonicalize

FANOUT = 8
UNCRAWLABLE = (
    "mailto:someone@example.org",
    "javascript:void(0)",
    "tel:+123456",
    "http://external.invalid/page",
)
_WORDS = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor".split()


def page_path(i: int) -> str:
    if i % 3 == 2:
        return f"/item?id={i}&v=1"
    return f"/d/p{i}.html" if i % 3 == 1 else f"/p{i}.html"


@dataclass(frozen=True)
class SiteSpec:
    """What the site looks like: its size and the seed that fixes every page."""

    pages: int = 20_000
    links: int = 40  # links per page, the uncrawlable ones included
    min_bytes: int = 15_000
    max_bytes: int = 25_000
    seed: int = 1
    start: str = "/p0.html"  # the seed's path

    def pages_at(self, origin: str) -> dict[str, bytes]:
        return render(self, origin)

    def urls_at(self, origin: str) -> list[str]:
        """Every page's URL, as the memory measures seed them."""
        return [canonicalize(origin + page_path(i)) for i in range(self.pages)]

    def depths_at(self, origin: str, max_depth: int) -> dict[str, int]:
        """Canonical URL -> shortest depth from the start page, for every page within
        `max_depth` (what an exact crawl records)."""
        urls = self.urls_at(origin)
        depths = shortest_depths(link_targets(self))
        return {urls[i]: d for i, d in depths.items() if d <= max_depth}


@dataclass(frozen=True)
class FanSpec:
    """The skewed site's slow host: `/` links to `pages` pages, all at depth 1, and
    robots.txt asks for `crawl_delay` seconds between two requests."""

    pages: int = 40
    crawl_delay: float = 0.5  # wide enough that the workers' scheduling jitter is no part of it
    start: str = "/"

    def pages_at(self, origin: str) -> dict[str, bytes]:
        paths = [f"/f{i}.html" for i in range(1, self.pages + 1)]
        robots = f"User-agent: *\nCrawl-delay: {self.crawl_delay:g}\n"
        return {
            "/robots.txt": robots.encode(),
            "/": _link_page("fan", paths),
            **{path: _link_page(path, []) for path in paths},
        }


@dataclass(frozen=True)
class ChainSpec:
    """The skewed site's other host: page i links to page i + 1 only (page i is at depth i),
    with no robots.txt (a 404: no delay)."""

    pages: int = 300
    start: str = "/c0.html"

    def pages_at(self, origin: str) -> dict[str, bytes]:
        last = self.pages - 1
        return {
            f"/c{i}.html": _link_page(f"chain {i}", [f"/c{i + 1}.html"] if i < last else [])
            for i in range(self.pages)
        }


def _link_page(title: str, hrefs: list[str]) -> bytes:
    links = "".join(f'<li><a href="{h}">{h}</a></li>' for h in hrefs)
    page = f"<!doctype html><html><head><title>{title}</title></head><body><ul>{links}</ul>"
    return (page + "</body></html>").encode()


def shortest_depths(links: Mapping[int, list[int]] | list[list[int]]) -> dict[int, int]:
    """Page -> its shortest depth from page 0, by a breadth-first walk of `links` (page ->
    the pages it links to), for every page reachable."""
    depth, todo = {0: 0}, deque([0])
    while todo:
        i = todo.popleft()
        for j in links[i]:
            if j not in depth:
                depth[j] = depth[i] + 1
                todo.append(j)
    return depth


def link_targets(spec: SiteSpec) -> list[list[int]]:
    """For each page, the pages it links to: tree children first, then random pages."""
    rnd = random.Random(spec.seed)
    crawlable = spec.links - len(UNCRAWLABLE)
    out = []
    for i in range(spec.pages):
        tree = [c for c in range(FANOUT * i + 1, FANOUT * i + FANOUT + 1) if c < spec.pages]
        out.append(tree + [rnd.randrange(spec.pages) for _ in range(crawlable - len(tree))])
    return out


def href(source: int, target: int, form: int, origin: str) -> str:
    """One of six spellings of the link from `source` to `target`."""
    path = page_path(target)
    if form == 0:  # relative, with ../ where needed
        parts = urlsplit(path)
        rel = posixpath.relpath(parts.path, posixpath.dirname(urlsplit(page_path(source)).path))
        return rel + (f"?{parts.query}" if parts.query else "")
    if form == 1:
        return path
    if form == 2:
        return origin + path
    if form == 3:
        return "//" + origin.split("://", 1)[1] + path
    if form == 4:
        return path + "#section"
    if "?" in path:  # the same page with its parameters in another order
        return f"/item?v=1&id={target}"
    return origin + path + "#top"


def render(spec: SiteSpec, origin: str) -> dict[str, bytes]:
    """Every page's HTML by request path (as the site spells it), for `origin`."""
    return render_hosts(spec, [origin])[0]


def render_hosts(spec: SiteSpec, origins: list[str]) -> list[dict[str, bytes]]:
    """The site spread over several hosts, page i on host i % len(origins) (so the tree and
    the random links cross hosts): each host's pages by request path. A link to another
    host's page is absolute (or protocol-relative), a link within a host any of the six
    spellings."""
    rnd = random.Random(spec.seed + 1)
    hosts = len(origins)
    out: list[dict[str, bytes]] = [{} for _ in origins]
    for i, targets in enumerate(link_targets(spec)):
        hrefs = []
        for n, t in enumerate(targets):
            form = (i + n) % 6
            if t % hosts != i % hosts:
                form = (2, 3)[form % 2]
            hrefs.append(href(i, t, form, origins[t % hosts]))
        hrefs += UNCRAWLABLE
        links = "\n".join(
            f'<li><a href="{h}">link {n} of page {i}</a></li>' for n, h in enumerate(hrefs)
        )
        head = (
            f"<!doctype html><html><head><title>Page {i}</title></head>"
            f"<body><h1 id=section>Page {i}</h1><ul>{links}</ul>"
        )
        tail = "</body></html>"
        room = rnd.randint(spec.min_bytes, spec.max_bytes) - len(head) - len(tail)
        out[i % hosts][page_path(i)] = (head + _filler(rnd, room) + tail).encode()
    return out


def _filler(rnd: random.Random, size: int) -> str:
    """`size` bytes of paragraph (what makes pages realistically heavy): a slice of one random
    text, so rendering 20,000 pages takes seconds, not minutes."""
    text = _text(rnd.randrange(8))
    start = rnd.randrange(len(text) - size) if size < len(text) else 0
    return "<p>" + text[start : start + max(0, size - 7)] + "</p>"


@functools.cache
def _text(seed: int, size: int = 60_000) -> str:
    rnd = random.Random(seed)
    return " ".join(rnd.choice(_WORDS) for _ in range(size // 5))[:size]


def lookup(pages: dict[str, bytes], raw_path: str) -> bytes | None:
    """The page a request path names: `/item` accepts its parameters in any order, and any
    other path with a query is the file without it, as a static file server serves it."""
    body = pages.get(raw_path)
    if body is None and raw_path.startswith("/item?"):
        q = parse_qs(urlsplit(raw_path).query)
        if q.get("v") == ["1"] and q.get("id", [""])[0].isdigit():
            path = page_path(int(q["id"][0]))
            body = pages.get(path) if path.startswith("/item?") else None
    elif body is None and "?" in raw_path:
        body = pages.get(raw_path.split("?", 1)[0])
    return body


@functools.cache
def content_type(raw_path: str) -> bytes:
    """The Content-Type of a path, from its extension as a static file server guesses it;
    HTML where it has none (`/`, `/item?id=2&v=1`)."""
    kind, _ = mimetypes.guess_type(raw_path.split("?", 1)[0])
    kind = kind or "text/html"
    return (kind + "; charset=utf-8" if kind.startswith("text/") else kind).encode()


async def _serve_conn(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pages: dict, latency: float
) -> None:
    """HTTP/1.1 keep-alive: one GET after another on the connection until the client closes."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode("latin-1")
            body = lookup(pages, path)
            status, kind = b"200 OK", content_type(path)
            if body is None:
                status, kind = b"404 Not Found", content_type("/")
                body = b"<html><title>Not found</title></html>"
            if latency:
                await asyncio.sleep(latency)
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: " + kind + b"\r\n"
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, IndexError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


def _child(sock: socket.socket, pages: dict, latency: float) -> None:
    parent = os.getppid()

    async def main() -> None:
        server = await asyncio.start_server(
            lambda r, w: _serve_conn(r, w, pages, latency), sock=sock, backlog=1024
        )
        async with server:
            while os.getppid() == parent:  # never outlive the bench, however it ended
                await asyncio.sleep(1)

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    asyncio.run(main())


class SiteServer:
    """The site on 127.0.0.1, rendered once, served by `procs` forked processes that share one
    listening socket (the kernel spreads connections; copy-on-write shares the pages). Each
    server is a host of its own (host and port): a skewed site is two servers."""

    def __init__(
        self,
        spec: SiteSpec | FanSpec | ChainSpec,
        latency: float = 0.0,
        procs: int = 2,
        host: str = "127.0.0.1",
    ):
        self.spec = spec
        self.latency = latency
        self.procs = procs
        self.host = host
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.pids: list[int] = []

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, pages: dict[str, bytes] | None = None) -> SiteServer:
        """Serve `pages`, by default the spec's pages at this server's origin."""
        pages = self.spec.pages_at(self.origin) if pages is None else pages
        for _ in range(self.procs):
            pid = os.fork()
            if pid == 0:
                try:
                    _child(self.sock, pages, self.latency)
                finally:
                    os._exit(0)
            self.pids.append(pid)
        self.sock.close()
        return self

    def stop(self) -> None:
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            except ProcessLookupError:
                os.waitpid(pid, os.WNOHANG)
        self.pids = []


def start_hosts(spec: SiteSpec, hosts: int, latency: float = 0.0) -> list[SiteServer]:
    """The site spread over `hosts` hosts 127.0.0.1, 127.0.0.2, ... (render_hosts), one
    serving process each; the caller stops them."""
    servers: list[SiteServer] = []
    try:
        servers = [SiteServer(spec, latency, 1, f"127.0.0.{h + 1}") for h in range(hosts)]
        parts = render_hosts(spec, [s.origin for s in servers])
        for server, pages in zip(servers, parts, strict=True):
            server.start(pages)
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers
