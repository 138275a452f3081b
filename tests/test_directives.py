"""Page-level robots directives (meta robots, X-Robots-Tag, rel=nofollow) and canonical URLs:
the parsers as pure functions, then crawls of loopback sites whose servers count what the
crawler asked for."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

import pytest
from helpers import read_jsonl, rqcrawl, seed_local, wait_finished
from parsel import Selector
from requests.structures import CaseInsensitiveDict
from servers import HTTPSite
from urllib3 import HTTPHeaderDict

from rqcrawl import api
from rqcrawl.config import CrawlConfig
from rqcrawl.parse.directives import (
    Directives,
    canonical_from_headers,
    from_header_lines,
    from_headers,
    from_meta,
    product_token,
)
from rqcrawl.parse.extract import parse
from rqcrawl.parse.urls import param_filter
from rqcrawl.workers.runner import LocalWorkers
from rqcrawl.workers.visit import visit

NOINDEX, NOFOLLOW, BOTH = (
    Directives(noindex=True),
    Directives(nofollow=True),
    Directives(True, True),
)


@pytest.mark.parametrize(
    "agent, token",
    [
        ("rqcrawl/0.1 (+https://pypi.org/project/rqcrawl/)", "rqcrawl"),
        ("MyBot", "mybot"),
        ("  Acme-Crawler_2/3.0", "acme-crawler_2"),
        ("", ""),
    ],
)
def test_product_token_is_the_first_product_lowercased(agent, token):
    assert product_token(agent) == token


def meta(*tags: str) -> Selector:
    return Selector(text=f"<html><head>{''.join(tags)}</head><body></body></html>")


@pytest.mark.parametrize(
    "tags, said",
    [
        (['<meta name="robots" content="nofollow">'], NOFOLLOW),
        (['<meta name="ROBOTS" content="NoIndex, follow">'], NOINDEX),
        (['<meta name="robots" content="none">'], BOTH),
        (['<meta name="robots" content="noindex nofollow">'], BOTH),
        (['<meta name="robots" content="index,follow,noarchive">'], Directives()),
        (['<meta name="robots" content="noindex">', '<meta name=robots content=nofollow>'], BOTH),
        (['<meta name="rqcrawl" content="nofollow">'], NOFOLLOW),
        (['<meta name=" RQCrawl " content="noindex">'], NOINDEX),
        (['<meta name="otherbot" content="noindex, nofollow">'], Directives()),
        (['<meta name="googlebot" content="none">', '<meta name=robots content=noindex>'], NOINDEX),
        (['<meta name="description" content="nofollow noindex">'], Directives()),
        (['<meta name="robots">'], Directives()),
    ],
)  # fmt: skip
def test_meta_robots_and_the_meta_of_our_product_token(tags, said):
    assert from_meta(meta(*tags), "rqcrawl") == said


@pytest.mark.parametrize(
    "lines, said",
    [
        (["noindex"], NOINDEX),
        (["noindex, nofollow"], BOTH),
        (["NONE"], BOTH),
        (["rqcrawl: nofollow"], NOFOLLOW),
        (["RQCRAWL:noindex"], NOINDEX),
        (["otherbot: noindex"], Directives()),
        (["otherbot: noindex, nofollow"], Directives()),  # the agent covers its whole line
        (["otherbot: noindex", "nofollow"], NOFOLLOW),  # but not the next line
        (["otherbot: noindex, rqcrawl: nofollow"], NOFOLLOW),
        (["noindex, otherbot: nofollow"], NOINDEX),
        (["unavailable_after: 25 Jun 2010 15:00:00 PST, nofollow"], NOFOLLOW),
        (["max-snippet: 20, noindex"], NOINDEX),
        (["all", "noarchive"], Directives()),
        ([""], Directives()),
        ([": , :noindex, bad bot: nofollow"], Directives()),  # garbage: no error, no directive
    ],
)
def test_x_robots_tag_lines_for_every_agent_and_for_ours(lines, said):
    assert from_header_lines(lines, "rqcrawl") == said


def test_x_robots_tag_lines_stay_apart_in_urllib3_headers():
    """Two header lines, one for another bot: joined with a comma, the second would read as
    that bot's too; urllib3 keeps them apart (the headers fetch gives the job)."""
    headers = HTTPHeaderDict()
    headers.add("X-Robots-Tag", "otherbot: noindex")
    headers.add("x-robots-tag", "nofollow")
    assert from_headers(headers, "rqcrawl") == NOFOLLOW
    joined = CaseInsensitiveDict({"X-Robots-Tag": "noindex"})  # requests' headers
    assert from_headers(joined, "rqcrawl") == NOINDEX


@pytest.mark.parametrize(
    "value, canonical",
    [
        ('<http://h/c>; rel="canonical"', "http://h/c"),
        ("</c?utm_source=x&b=1>; rel=canonical", "http://h/c?b=1"),
        ('<http://h/a>; rel="alternate", <http://h/c>; rel="Canonical"', "http://h/c"),
        ('<http://[bad/>; rel="canonical", <http://h/c2>; rel="canonical"', "http://h/c2"),
        ('<http://h/a>; rel="alternate"', None),
        ("garbage", None),
        ('<>; rel="canonical"', None),
    ],
)
def test_canonical_from_the_link_header(value, canonical):
    strip = param_filter(CrawlConfig().strip_params)
    headers = CaseInsensitiveDict({"Link": value})
    assert canonical_from_headers(headers, "http://h/dir/p", strip) == canonical


PAGE = """<html><head><base href="/base/"><link rel="alternate" href="/alt">
<link rel="Canonical stylesheet" href="canon?utm_medium=x"></head><body>
<a href="/a">a</a><a rel="nofollow" href="/nf">nf</a><a rel="ugc NOFOLLOW" href="/ugc">ugc</a>
<a rel="nofollow" href="/a">a again</a><area rel="nofollow" href="/area">
<a rel="nofollowed" href="/word">not the word</a><a rel="nofollow" href="mailto:x@y">mail</a>
</body></html>"""


def test_rel_nofollow_links_are_left_out_unless_linked_otherwise_too():
    page = parse(PAGE, "http://h/p", skip_nofollow=True)
    assert page.links == ["http://h/a", "http://h/word"]
    assert page.nofollow_links == 3  # /nf, /ugc, /area: /a is linked without it too
    assert page.canonical == "http://h/base/canon?utm_medium=x"  # relative to <base>
    everything = parse(PAGE, "http://h/p")
    assert everything.links == [
        "http://h/a", "http://h/nf", "http://h/ugc", "http://h/area", "http://h/word",
    ]  # fmt: skip
    assert everything.nofollow_links == 0


# --- crawls of loopback sites ---------------------------------------------------------------


def answer(req: BaseHTTPRequestHandler, body: str, headers: list[tuple[str, str]] = ()) -> None:
    """200 with `body`, and `headers` in order, a name possibly on several lines."""
    data = body.encode()
    req.send_response(200)
    req.send_header("Content-Type", "text/html")
    req.send_header("Content-Length", str(len(data)))
    for name, value in headers:
        req.send_header(name, value)
    req.end_headers()
    req.wfile.write(data)


def anchors(*paths: str, rel: str = "") -> str:
    return "".join(f'<a{f" rel={rel!r}" if rel else ""} href="{p}">{p}</a>' for p in paths)


def links(*paths: str, head: str = "", more: str = "") -> str:
    """A page linking to `paths`, with `head` in its head and `more` after the links."""
    body = anchors(*paths) + more
    return f"<html><head><title>t</title>{head}</head><body>{body}</body></html>"


# Pages of the directives site: path -> (body, headers). The pages under /no/ must never be
# requested; those under /yes/ must.
DIRECTIVES_SITE = {
    "/": (
        links("/meta", "/meta-ua", "/meta-other", "/header", "/header-ua", "/header-other",
              "/header-lines", "/noindex", "/header-noindex", "/yes/plain",
              more=anchors("/no/rel", rel="nofollow") + anchors("/no/ugc", rel="ugc nofollow")),
        [],
    ),
    "/meta": (links("/no/meta", head='<meta name="robots" content="nofollow">'), []),
    "/meta-ua": (links("/no/meta-ua", head='<meta name="rqcrawl" content="none">'), []),
    "/meta-other": (links("/yes/meta-other", head='<meta name="otherbot" content="none">'), []),
    "/header": (links("/no/header"), [("X-Robots-Tag", "nofollow")]),
    "/header-ua": (links("/no/header-ua"), [("X-Robots-Tag", "rqcrawl: nofollow, noindex")]),
    "/header-other": (
        links("/yes/header-other"),
        [("X-Robots-Tag", "otherbot: nofollow, noindex"), ("X-Robots-Tag", "noarchive")],
    ),
    "/header-lines": (  # the second line is for every agent, not otherbot's
        links("/no/header-lines"),
        [("X-Robots-Tag", "otherbot: noindex"), ("X-Robots-Tag", "nofollow")],
    ),
    "/noindex": (links("/yes/noindex", head='<meta name="robots" content="noindex">'), []),
    "/header-noindex": (links("/yes/header-noindex"), [("X-Robots-Tag", "noindex")]),
}  # fmt: skip


def directives_site(req: BaseHTTPRequestHandler) -> None:
    if req.path in DIRECTIVES_SITE:
        answer(req, *DIRECTIVES_SITE[req.path])
    elif req.path.startswith(("/yes/", "/no/")):
        answer(req, links())
    else:
        req.send_error(404)


def test_nofollow_in_meta_header_and_rel_is_obeyed_and_noindex_recorded(redis_url, tmp_path):
    """No link a page forbids is requested: not those of a page whose meta robots, meta of
    our product token or X-Robots-Tag (plain or for rqcrawl) says nofollow, nor rel=nofollow
    links; forms for another bot change nothing. noindex pages are recorded as such and left
    out by `export --skip-noindex`."""
    with HTTPSite(directives_site, max_requests=100, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/", "dir", 3)
        with LocalWorkers(redis_url, 1):
            s = wait_finished(redis_url, "dir", timeout=90)
    assert not [p for p in http.hits if p.startswith("/no/")]
    expected = {p for p in DIRECTIVES_SITE} | {"/yes/plain", "/yes/meta-other"}
    expected |= {"/yes/header-other", "/yes/noindex", "/yes/header-noindex", "/robots.txt"}
    assert set(http.hits) == expected
    out = tmp_path / "all.jsonl"
    rqcrawl(redis_url, "export", "dir", "-o", str(out))
    rows = {r["url"].removeprefix(http.base): r for r in read_jsonl(out)}
    assert {p for p, r in rows.items() if r["nofollow"]} == {
        "/meta", "/meta-ua", "/header", "/header-ua", "/header-lines",
    }  # fmt: skip
    noindex = {"/meta-ua", "/header-ua", "/noindex", "/header-noindex"}
    assert {p for p, r in rows.items() if r["noindex"]} == noindex
    assert rows["/meta-other"]["nofollow"] is None and rows["/meta-other"]["noindex"] is None
    assert s["links_dropped"]["nofollow"] == 5 and s["links_dropped"]["rel_nofollow"] == 2
    assert "nofollow 5" in rqcrawl(redis_url, "status", "dir").stdout
    kept = tmp_path / "kept.jsonl"
    rqcrawl(redis_url, "export", "dir", "-o", str(kept), "--skip-noindex")
    assert {r["url"].removeprefix(http.base) for r in read_jsonl(kept)} == set(rows) - noindex


def test_directives_are_ignored_when_the_crawl_says_so():
    """obey_page_directives = false: rel=nofollow links and the links of a nofollow page
    are followed, noindex is not recorded."""

    def site(req: BaseHTTPRequestHandler) -> None:
        head = '<meta name="robots" content="none">'
        body = links("/a", head=head, more=anchors("/b", rel="nofollow"))
        answer(req, body, [("X-Robots-Tag", "none")])

    with HTTPSite(site, max_requests=10, max_seconds=60) as http:
        host = http.base.removeprefix("http://")
        base = {"allow_private": True, "scope_hosts": [host]}
        ignored = CrawlConfig.from_dict(base | {"obey_page_directives": False})
        ignoring = visit(http.base + "/", 0, ignored)
        obeying = visit(http.base + "/", 0, CrawlConfig.from_dict(base))
    assert [u for _, u in ignoring.children] == [http.base + "/a", http.base + "/b"]
    assert ignoring.record["noindex"] is None and ignoring.record["nofollow"] is None
    assert obeying.children == [] and obeying.record["noindex"] is True
    assert obeying.counts["links:nofollow"] == 1 and obeying.counts["links:rel_nofollow"] == 1


def test_no_page_directives_flag_reaches_the_crawls_settings(conn, redis_url):
    seed_local(redis_url, "http://127.0.0.1:9/", "flag", 1, "--no-page-directives")
    seed_local(redis_url, "http://127.0.0.1:9/", "default", 1)
    assert api.crawl_config(conn, "flag").obey_page_directives is False
    assert api.crawl_config(conn, "default").obey_page_directives is True
