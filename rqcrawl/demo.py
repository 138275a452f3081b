"""A small two-site web that `rqcrawl demo` serves on this machine's loopback, so that a first
crawl works as written on a machine without internet, at default settings.

The two sites link to each other and show what a crawl does on the real web: a robots.txt
that disallows a folder, a sitemap that lists a page no link reaches, a broken link, links
spelled relative, absolute and with fragments, and a page four clicks deep.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# {path: (title, [links])}; "{other}" is the other site's origin.
DOCS = {
    "/": ("Demo docs", ["guide/", "/reference/", "about.html#team", "{other}/"]),
    "/guide/": ("Guide", ["install.html", "first-crawl.html", "../private/draft.html"]),
    "/guide/install.html": ("Install", ["first-crawl.html", "/"]),
    "/guide/first-crawl.html": ("Your first crawl", ["../reference/settings.html", "missing.html"]),
    "/reference/": ("Reference", ["settings.html", "cli.html"]),
    "/reference/settings.html": ("Settings", ["cli.html", "{other}/posts/politeness.html"]),
    "/reference/cli.html": ("Command line", ["/reference/"]),
    "/about.html": ("About", ["/"]),
    "/private/draft.html": ("A draft robots.txt keeps out", ["/"]),
    "/orphan.html": ("Only the sitemap lists this page", ["/"]),
}
BLOG = {
    "/": ("Demo blog", ["posts/hello.html", "posts/politeness.html", "{other}/guide/"]),
    "/posts/hello.html": ("Hello", ["politeness.html", "../tags/crawling.html"]),
    "/posts/politeness.html": ("One request per second", ["../tags/crawling.html"]),
    "/tags/crawling.html": ("Posts about crawling", ["/posts/hello.html", "/archive/2026.html"]),
    "/archive/2026.html": ("Archive", ["2025.html"]),
    "/archive/2025.html": ("Four clicks from the home page: past --max-depth 3", ["/"]),
}
ROBOTS = "User-agent: *\nDisallow: /private/\nSitemap: {origin}/sitemap.xml\n"
SITEMAP = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
    "<url><loc>{origin}/orphan.html</loc></url></urlset>\n"
)


def page(title: str, links: list[str], other: str) -> str:
    """An HTML page with its title and links."""
    items = "".join(f'<li><a href="{href.format(other=other)}">{href}</a></li>' for href in links)
    return (
        f"<!DOCTYPE html><html><head><title>{title}</title></head>"
        f"<body><h1>{title}</h1><ul>{items}</ul></body></html>"
    )


class DemoSite:
    """The two sites, each on its own loopback port, served by daemon threads until stop()."""

    def __init__(self) -> None:
        self.servers = [_server(DOCS, robots=True), _server(BLOG, robots=False)]
        docs, blog = (f"http://127.0.0.1:{s.server_port}" for s in self.servers)
        self.servers[0].origin, self.servers[0].other = docs, blog
        self.servers[1].origin, self.servers[1].other = blog, docs
        self.urls = [f"{docs}/", f"{blog}/"]  # both in scope: a crawl stays on its seeds' hosts

    def start(self) -> DemoSite:
        for server in self.servers:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()

    def origins(self) -> list[str]:
        return [s.origin for s in self.servers]


def _server(pages: dict, robots: bool) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.pages, server.robots = pages, robots
    return server


class _Handler(BaseHTTPRequestHandler):
    server_version = "rqcrawl-demo"

    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        server = self.server
        path = self.path.split("?", 1)[0]
        if path in server.pages:
            title, links = server.pages[path]
            self._send(200, "text/html; charset=utf-8", page(title, links, server.other))
        elif path == "/robots.txt" and server.robots:
            self._send(200, "text/plain", ROBOTS.format(origin=server.origin))
        elif path == "/sitemap.xml" and server.robots:
            self._send(200, "application/xml", SITEMAP.format(origin=server.origin))
        else:
            self._send(404, "text/html", page("Not found", [], server.other))

    def _send(self, status: int, content_type: str, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (http.server's name)
        """Quiet: the crawl's own progress is what the user watches."""
