"""A small site whose pages need their requisites to look as they did: a stylesheet that
@imports another and loads a font and a background image by url(), a script, images by
src and srcset; one image disallowed by robots.txt and one on another host (neither to be
fetched). Served by servers.HTTPSite (`handle`)."""

from __future__ import annotations

import struct
import zlib

from servers import reply

MARKER_COLOR = "rgb(1, 2, 3)"  # body's color: the stylesheet applies
IMPORTED_COLOR = "rgb(4, 5, 6)"  # h1's color: the @imported stylesheet applies


def png(width: int, height: int) -> bytes:
    """A valid RGB PNG of `width` x `height` (grey): a browser decodes it (naturalWidth)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\0" + b"\x80" * (3 * width) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )  # fmt: skip


def page(title: str, other: str, image: str, elsewhere: str | None) -> bytes:
    """A page of the site; with `elsewhere`, also an image robots.txt disallows and one of
    that other host."""
    refused = (
        f'<img id="private" src="/private/secret.png"><img id="far" src="{elsewhere}/img/far.png">'
        if elsewhere else ""
    )  # fmt: skip
    return f"""<!doctype html><html><head><title>{title}</title>
<link rel="stylesheet" href="/static/site.css"><script src="/static/app.js"></script>
</head><body><h1>{title}</h1>
<img id="main" src="{image}"><img id="set" srcset="/img/hero.png 1x">{refused}
<div style="background-image: url(/img/inline.png)">x</div>
<a href="{other}">next</a></body></html>""".encode()


CSS = b"""@import "/static/extra.css";
/* url(/img/commented.png) is not loaded */
@font-face { font-family: T; src: url("/fonts/t.woff2") format("woff2"); }
body { color: rgb(1, 2, 3); background: url('../img/bg.png') repeat; font-family: T; }
"""
FILES = {
    "/static/site.css": (CSS, "text/css"),
    "/static/extra.css": (b"h1 { color: rgb(4, 5, 6); }", "text/css"),
    "/static/app.js": (b"document.documentElement.dataset.js = 'ran';", "text/javascript"),
    "/fonts/t.woff2": (b"wOF2" + b"\0" * 60, "font/woff2"),
    "/img/logo.png": (png(3, 2), "image/png"),
    "/img/other.png": (png(4, 4), "image/png"),
    "/img/hero.png": (png(5, 3), "image/png"),
    "/img/bg.png": (png(2, 2), "image/png"),
    "/img/inline.png": (png(2, 3), "image/png"),
    "/private/secret.png": (png(2, 2), "image/png"),
}
# What a crawl of the site archives beside its two pages (robots.txt keeps /private/ out)
REQUISITES = sorted(p for p in FILES if not p.startswith("/private/"))


def handler(elsewhere: str | None = None):
    """The site's handler; `elsewhere`: the base URL of another host its pages load from
    (None: its pages load only what a crawl archives)."""

    def handle(req) -> None:
        if req.path == "/robots.txt":
            reply(req, 200, b"User-agent: *\nDisallow: /private/\n", "text/plain")
        elif req.path == "/":
            reply(req, 200, page("Home", "/two.html", "/img/logo.png", elsewhere), "text/html")
        elif req.path == "/two.html":
            reply(req, 200, page("Two", "/", "/img/other.png", elsewhere), "text/html")
        elif req.path in FILES:
            body, ctype = FILES[req.path]
            reply(req, 200, body, ctype)
        else:
            reply(req, 404, b"missing")

    return handle
