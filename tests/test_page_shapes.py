"""Real page shapes parsed as a browser reads them: XHTML (with and without its XML
declaration, with a BOM, served as text/html or application/xhtml+xml), HTML 4 in capitals,
HTML5, frames, iframes and `<link rel=next|prev>`, encodings declared only in `<meta>`, and
`<base href>` in XHTML. The corpus is built here (no downloads); decode and parse are pure
functions, so the shapes are checked without a server. The end-to-end test crawls a generated
XHTML site with a real worker, and the last one shows a crawl that ends at its seed saying so."""

from __future__ import annotations

import codecs
import subprocess
from http.server import BaseHTTPRequestHandler

import pytest
from helpers import BIN, rqcrawl, seed_local, wait_finished, worker_names
from servers import HTTPSite, reply

from rqcrawl import api
from rqcrawl.bench.site import shortest_depths
from rqcrawl.config import CrawlConfig
from rqcrawl.parse.extract import decode, parse
from rqcrawl.workers.runner import LocalWorkers
from rqcrawl.workers.visit import visit

BASE = "http://site.example/docs/"
XML_DECL = '<?xml version="1.0" encoding="UTF-8"?>\n'
STRICT = (
    '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" '
    '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">\n'
)
TRANSITIONAL = (
    '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" '
    '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">\n'
)
XHTML_BODY = (
    '<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">\n'
    '<head><meta http-equiv="Content-Type" content="text/html; charset=UTF-8" />'
    "<title>Chapter 1. Getting started</title></head>\n"
    '<body><div class="toc"><a href="ch02.html">Next</a> <a href="../index.html">Up</a>'
    '<map name="m"><area shape="rect" coords="0,0,1,1" href="/map.html" /></map>'
    "</div></body></html>\n"
)
XHTML_LINKS = [BASE + "ch02.html", "http://site.example/index.html", "http://site.example/map.html"]


def utf16(text: str) -> bytes:
    """A UTF-16 page as editors write it: little-endian with its BOM."""
    return codecs.BOM_UTF16_LE + text.encode("utf-16-le")


def meta_page(charset: str, title: str, href: str) -> str:
    return (
        f'<html><head><meta http-equiv="Content-Type" content="text/html; charset={charset}">'
        f'<title>{title}</title></head><body><a href="{href}">x</a></body></html>'
    )


# name: (body, Content-Type, title, links in page order)
CORPUS = {
    "xhtml strict, XML declaration": (
        (XML_DECL + STRICT + XHTML_BODY).encode(), "text/html",
        "Chapter 1. Getting started", XHTML_LINKS,
    ),
    "xhtml strict as application/xhtml+xml": (
        (XML_DECL + STRICT + XHTML_BODY).encode(), "application/xhtml+xml",
        "Chapter 1. Getting started", XHTML_LINKS,
    ),
    "xhtml transitional, no XML declaration": (
        (TRANSITIONAL + XHTML_BODY).encode(), "text/html; charset=utf-8",
        "Chapter 1. Getting started", XHTML_LINKS,
    ),
    "xhtml transitional, BOM and XML declaration": (
        codecs.BOM_UTF8 + (XML_DECL + TRANSITIONAL + XHTML_BODY).encode(), "text/html",
        "Chapter 1. Getting started", XHTML_LINKS,
    ),
    "html 4, capitals and unquoted attributes": (
        b'<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN">\n'
        b"<HTML><HEAD><TITLE>Old   Page</TITLE></HEAD><BODY BGCOLOR=white>"
        b"<A HREF=page2.html>two</A><P><A HREF=/top.html TARGET=_top>top</A>"
        b"<MAP NAME=m><AREA SHAPE=rect COORDS=0,0,1,1 HREF=area.html></MAP></BODY></HTML>",
        "text/html", "Old Page",
        [BASE + "page2.html", "http://site.example/top.html", BASE + "area.html"],
    ),
    "html5": (
        b"<!doctype html><meta charset=utf-8><title>Modern</title>"
        b"<nav><a href=/a>a</a><a href='b?x=1#frag'>b</a></nav><main><a href=//other.example/c>c"
        b"</a></main>",
        "text/html", "Modern",
        ["http://site.example/a", BASE + "b?x=1", "http://other.example/c"],
    ),
    "frameset": (
        b'<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Frameset//EN">'
        b"<html><head><title>Frames</title></head>"
        b'<frameset cols="20%,80%"><frame src="nav.html" name="nav">'
        b'<frame src="/main.html" name="main"><noframes><a href="nav.html">nav</a></noframes>'
        b"</frameset></html>",
        "text/html", "Frames",
        [BASE + "nav.html", "http://site.example/main.html"],
    ),
    "iframe and link rel next/prev": (
        b'<html><head><title>Part 2</title><link rel="stylesheet" href="style.css">'
        b'<link rel="Prev" href="part1.html"><link rel="next" href="part3.html">'
        b'<link rel="alternate next" href="alt.html"><link rel="previous" href="p0.html">'
        b'<link rel="icon" href="favicon.ico"></head>'
        b'<body><iframe src="embed.html"></iframe></body></html>',
        "text/html", "Part 2",
        [BASE + s for s in ("part1.html", "part3.html", "alt.html", "p0.html", "embed.html")],
    ),
    "utf-16 with BOM, meta charset": (
        utf16(meta_page("utf-16", "Страница", "next.html")), "text/html",
        "Страница", [BASE + "next.html"],
    ),
    "shift_jis in meta only": (
        meta_page("Shift_JIS", "日本語のページ", "/日本.html").encode("shift_jis"), "text/html",
        "日本語のページ", ["http://site.example/%E6%97%A5%E6%9C%AC.html"],
    ),
    "windows-1251 in meta only": (
        meta_page("windows-1251", "Новости", "мир.html").encode("cp1251"), "text/html",
        "Новости", [BASE + "%D0%BC%D0%B8%D1%80.html"],  # a browser sends paths in UTF-8
    ),
    "xhtml with base href": (
        (
            XML_DECL + STRICT + '<html xmlns="http://www.w3.org/1999/xhtml"><head>'
            '<base href="http://site.example/manual/v2/" /><title>Base</title></head>'
            '<body><a href="intro.html">i</a><a href="../v1/">old</a></body></html>'
        ).encode(),
        "text/html", "Base",
        ["http://site.example/manual/v2/intro.html", "http://site.example/manual/v1/"],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", CORPUS)
def test_each_page_shape_gives_its_title_and_the_links_a_browser_follows(name):
    body, ctype, title, links = CORPUS[name]
    page = parse(decode(body, ctype), BASE + "ch01.html")
    assert (page.title, page.links) == (title, links)
    # fields and the hook see the same (HTML) selector: element names without a namespace
    assert page.selector.css("title::text").get().split() == title.split()
    assert page.selector.xpath("//title/text()").get().split() == title.split()


UNTYPED = {
    "/xhtml": (XML_DECL + STRICT + XHTML_BODY).encode(),
    "/html": b"\n  <!DOCTYPE html><title>No type</title><a href=/b>b</a>",
    "/text": b"just text, <html> later",
    "/png": b"\x89PNG\r\n\x1a\n<html>",
}


def untyped(req: BaseHTTPRequestHandler) -> None:
    """Bodies sent without a Content-Type header."""
    body = UNTYPED[req.path]
    req.send_response(200)
    req.send_header("Content-Length", str(len(body)))
    req.end_headers()
    req.wfile.write(body)


def test_a_body_without_a_content_type_is_parsed_when_it_sniffs_as_html():
    cfg = CrawlConfig.from_dict({"allow_private": True})
    with HTTPSite(untyped, host="127.0.0.7") as http:
        found = {path: visit(http.base + path, 1, cfg).record for path in UNTYPED}
    assert {path: r["outcome"] for path, r in found.items()} == {
        "/xhtml": "fetched", "/html": "fetched", "/text": "not_html", "/png": "not_html"
    }  # fmt: skip
    assert (found["/xhtml"]["title"], found["/html"]["title"]) == (
        "Chapter 1. Getting started", "No type"
    )  # fmt: skip


PAGES = 15


def xhtml_links() -> dict[int, list[int]]:
    """A binary tree of PAGES pages, a shortcut from page 1 to page 14 (depth 2, not 3) and
    a link back to the start from every leaf."""
    links = {i: [c for c in (2 * i + 1, 2 * i + 2) if c < PAGES] or [0] for i in range(PAGES)}
    links[1].append(14)
    return links


def page_path(i: int) -> str:
    return "/" if i == 0 else f"/book/ch{i:02d}.html"


def relative(i: int, j: int) -> str:
    """The relative href from page i to page j."""
    if j == 0:
        return "../"
    return f"ch{j:02d}.html" if i else f"book/ch{j:02d}.html"


def xhtml_page(i: int, links: list[int]) -> bytes:
    """Page i as a documentation toolchain writes it: an XML declaration, the XHTML 1.0
    doctype and namespace, relative links (`../` from the start page's view)."""
    anchors = "".join(f'<li><a href="{relative(i, j)}">to {j}</a></li>' for j in links)
    return (
        XML_DECL + STRICT + '<html xmlns="http://www.w3.org/1999/xhtml"><head>'
        f"<title>Chapter {i}</title></head><body><ul>{anchors}</ul></body></html>"
    ).encode()


def expected_depths(links: dict[int, list[int]]) -> dict[str, int]:
    return {page_path(i): d for i, d in shortest_depths(links).items()}


def test_a_site_of_xhtml_served_as_html_is_crawled_whole_at_exact_depths(redis_url, conn):
    links = xhtml_links()
    pages = {page_path(i): xhtml_page(i, links[i]) for i in links}

    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path in pages:
            reply(req, 200, pages[req.path], "text/html")
        else:
            reply(req, 404, b"<html><title>Not found</title></html>")

    with HTTPSite(handle, host="127.0.0.7") as http, LocalWorkers(redis_url, 2) as workers:
        worker_names(conn, workers)
        seed_local(redis_url, http.base + "/", "xhtml", 5)
        s = wait_finished(redis_url, "xhtml")
    base = len(http.base)
    fetched = {r["url"][base:]: r for r in api.records(conn, "xhtml") if r["outcome"] == "fetched"}
    assert {path: r["depth"] for path, r in fetched.items()} == expected_depths(links)
    assert {path: r["title"] for path, r in fetched.items()} == {
        page_path(i): f"Chapter {i}" for i in links
    }
    assert s["fetched"] == PAGES and s["thin_crawl"] is None


def js_only_site(req: BaseHTTPRequestHandler) -> None:
    """A start page whose only link is built by a script: no `<a>` for the crawler."""
    page = (
        b"<html><head><title>App</title></head><body><div id=app></div>"
        b"<script>location.href = '/next.html'</script></body></html>"
    )
    reply(req, 200, page) if req.path == "/" else reply(req, 404, b"not found")


def test_a_crawl_whose_seed_had_no_links_says_so_in_status(redis_url, conn):
    with HTTPSite(js_only_site, host="127.0.0.7") as http, LocalWorkers(redis_url, 1) as workers:
        worker_names(conn, workers)
        seed_local(redis_url, http.base + "/", "jsonly", 3)
        s = wait_finished(redis_url, "jsonly")
        shown = rqcrawl(redis_url, "status", "jsonly").stdout
    assert s["fetched"] == 1
    assert s["thin_crawl"].startswith("crawl over after the 1 fetched page(s) had no links")
    assert s["thin_crawl"] in s["warnings"]
    warning = next(line for line in shown.splitlines() if line.startswith("WARNING"))
    assert "had no links at all" in warning and "robots.txt" in warning and "nofollow" in warning


def test_rqcrawl_crawl_ends_with_the_warning_when_its_seed_had_no_links(tmp_path):
    out = tmp_path / "out.jsonl"
    with HTTPSite(js_only_site, host="127.0.0.7") as http:
        proc = subprocess.run(
            [
                str(BIN / "rqcrawl"), "crawl", http.base + "/", "-o", str(out), "--data-dir",
                str(tmp_path / "data"), "--allow-private", "--delay", "0", "--workers", "1",
                "--no-sitemaps",
            ],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("warning: crawl over after the 1 fetched page(s) had no links"), last


def test_a_seed_whose_links_all_leave_the_scope_says_no_page_beyond_it_was_fetched(redis_url, conn):
    def handle(req: BaseHTTPRequestHandler) -> None:
        body = b'<html><title>Hub</title><a href="http://127.0.0.8:9/elsewhere">x</a></html>'
        reply(req, 200, body) if req.path == "/" else reply(req, 404, b"not found")

    with HTTPSite(handle, host="127.0.0.7") as http, LocalWorkers(redis_url, 1) as workers:
        worker_names(conn, workers)
        seed_local(redis_url, http.base + "/", "offsite", 3)
        s = wait_finished(redis_url, "offsite")
    assert s["thin_crawl"].startswith(
        "crawl over after the seed page(s) had 1 link(s) but no page beyond them was fetched"
    )
