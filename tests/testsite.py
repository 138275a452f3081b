"""A generated site with a known link graph, for end-to-end crawls.

Pages live at three kinds of address (`/pN.html`, `/d/pN.html`, `/item?id=N&v=1`) and link
to each other in every form a crawler must understand: relative (with `../`), root-relative,
absolute, protocol-relative, with fragments, with query parameters in another order. Every
page also carries links that must not be crawled (mailto:, javascript:, tel:, an external
host) and some link to pages that answer 404.
"""

from __future__ import annotations

import random
import time
from collections import deque
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from servers import reply

from rqcrawl.bench.site import href, page_path  # one spelling of addresses and links


class Site:
    def __init__(self, pages: int = 40, seed: int = 7, slow: dict[int, float] | None = None):
        rnd = random.Random(seed)
        self.pages = pages
        self.slow = slow or {}
        self.links: dict[int, list[int]] = {}
        for i in range(pages):
            tree = [c for c in (3 * i + 1, 3 * i + 2, 3 * i + 3) if c < pages]
            cross = rnd.sample(range(pages), 2)
            self.links[i] = tree + cross
        self.missing = {i: f"/missing{i}" for i in range(pages) if i % 5 == 0}

    def expected(self, max_depth: int) -> dict[str, int]:
        """Path (with query) -> shortest depth from page 0, for everything within max_depth."""
        depth = {0: 0}
        todo = deque([0])
        while todo:
            i = todo.popleft()
            for j in self.links[i]:
                if j not in depth:
                    depth[j] = depth[i] + 1
                    todo.append(j)
        out = {page_path(i): d for i, d in depth.items() if d <= max_depth}
        for i, path in self.missing.items():
            if i in depth and depth[i] + 1 <= max_depth:
                out.setdefault(path, depth[i] + 1)
        return out

    def render(self, i: int, origin: str) -> bytes:
        hrefs = [href(i, t, (i + n) % 6, origin) for n, t in enumerate(self.links[i])]
        hrefs += [
            "mailto:someone@example.org",
            "javascript:void(0)",
            "tel:+123456",
            "http://external.invalid/page",
        ]
        if i in self.missing:
            hrefs.append(self.missing[i])
        links = "\n".join(f'<li><a href="{h}">link {n}</a></li>' for n, h in enumerate(hrefs))
        filler = "<p>" + "lorem ipsum " * 50 + "</p>"
        return (
            f"<!doctype html><html><head><title>Page {i}</title></head>"
            f"<body><h1 id=section>Page {i}</h1><ul>{links}</ul>{filler}</body></html>"
        ).encode()

    def page_of(self, raw_path: str) -> int | None:
        """The page a request path names, or None for a 404."""
        parts = urlsplit(raw_path)
        if parts.path == "/item":
            q = parse_qs(parts.query)
            if q.get("v") == ["1"] and q.get("id", [""])[0].isdigit():
                i = int(q["id"][0])
                return i if i < self.pages and i % 3 == 2 else None
            return None
        for i in range(self.pages):
            if page_path(i) == parts.path:
                return i
        return None

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        i = self.page_of(req.path)
        if i is None:
            reply(req, 404, b"<html><title>Not found</title></html>")
            return
        if i in self.slow:
            time.sleep(self.slow[i])
        host = req.headers.get("Host")
        reply(req, 200, self.render(i, f"http://{host}"), "text/html; charset=utf-8")
