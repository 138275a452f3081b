"""A site that only JavaScript builds, and its server-side twin: the render path's test and
bench site (`rqcrawl bench --render`, tests/test_render.py).

Page i (`/pI`) is, in its script-built form, an empty shell: a title, an empty
`<div id="root">` and `/app.js`, which asks `/api/pI` for the page's text and links (JSON) and
writes them into the DOM. Its server-side form carries the same text and links in its HTML.
Page i links to its tree children 3i+1..3i+3 and to two pages drawn at random, so every page
is reachable from page 0 at a known depth.
"""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .site import shortest_depths

APP_JS = b"""
fetch('/api' + location.pathname).then(r => r.json()).then(page => {
  const root = document.getElementById('root');
  const h1 = document.createElement('h1'); h1.textContent = page.title; root.appendChild(h1);
  const p = document.createElement('p'); p.textContent = page.text; root.appendChild(p);
  const ul = document.createElement('ul');
  for (const href of page.links) {
    const li = document.createElement('li'); const a = document.createElement('a');
    a.href = href; a.textContent = 'page ' + href; li.appendChild(a); ul.appendChild(li);
  }
  root.appendChild(ul);
});
"""
_TEXT = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor " * 8


class JSSite:
    """The link graph and both forms of every page (see the module docstring)."""

    def __init__(self, pages: int = 40, seed: int = 7, server_side: bool = False):
        rnd = random.Random(seed)
        self.pages = pages
        self.server_side = server_side
        self.links = {
            i: [c for c in (3 * i + 1, 3 * i + 2, 3 * i + 3) if c < pages]
            + rnd.sample(range(pages), min(2, pages))
            for i in range(pages)
        }

    def expected(self, max_depth: int) -> dict[str, int]:
        """Path -> shortest depth from page 0, for every page within max_depth."""
        depths = shortest_depths(self.links)
        return {f"/p{i}": d for i, d in depths.items() if d <= max_depth}

    def _page(self, i: int) -> dict:
        return {"title": f"Page {i}", "text": _TEXT, "links": [f"/p{j}" for j in self.links[i]]}

    def shell(self, i: int) -> bytes:
        return (
            f"<!doctype html><html><head><title>Page {i}</title>"
            '<script src="/app.js" defer></script></head>'
            '<body><div id="root"></div></body></html>'
        ).encode()

    def server_rendered(self, i: int) -> bytes:
        page = self._page(i)
        items = "".join(f'<li><a href="{h}">page {h}</a></li>' for h in page["links"])
        return (
            f"<!doctype html><html><head><title>{page['title']}</title></head><body>"
            f'<div id="root"><h1>{page["title"]}</h1><p>{page["text"]}</p>'
            f"<ul>{items}</ul></div></body></html>"
        ).encode()

    def answer(self, path: str) -> tuple[int, str, bytes]:
        """(status, content type, body) for a request path."""
        if path == "/app.js":
            return 200, "application/javascript", APP_JS
        api = path.startswith("/api/")
        name = path.removeprefix("/api")
        i = int(name[2:]) if name.startswith("/p") and name[2:].isdigit() else -1
        if not 0 <= i < self.pages:
            return 404, "text/html", b"<html><title>Not found</title></html>"
        if api:
            return 200, "application/json", json.dumps(self._page(i)).encode()
        body = self.server_rendered(i) if self.server_side else self.shell(i)
        return 200, "text/html; charset=utf-8", body

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        status, ctype, body = self.answer(req.path)
        req.send_response(status)
        req.send_header("Content-Type", ctype)
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)


def serve(site: JSSite, host: str = "127.0.0.1") -> tuple[ThreadingHTTPServer, str]:
    """Serve `site` from a thread on a free port of `host` (the bench's server); the server,
    to shut down, and its base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):  # noqa: N802
            site.handle(self)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://{host}:{server.server_address[1]}"
