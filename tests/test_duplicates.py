"""Fewer duplicate URLs: session and tracking parameters stripped from every URL (seeds, links,
sitemaps, canonical URLs), and a page's canonical URL recorded and admitted as a link. The
pure functions first, then crawls of a loopback site that counts what it was asked for."""

from __future__ import annotations

import re
from http.server import BaseHTTPRequestHandler

import pytest
from helpers import read_jsonl, rqcrawl, seed_local, status, wait_finished
from servers import HTTPSite, reply

from rqcrawl import api
from rqcrawl.config import STRIP_PARAMS, ConfigError, CrawlConfig
from rqcrawl.parse.urls import canonicalize, param_filter, param_problem
from rqcrawl.workers.runner import LocalWorkers

DEFAULT = param_filter(STRIP_PARAMS)


@pytest.mark.parametrize(
    "url, stripped",
    [
        ("http://h/p?utm_source=a&utm_medium=b", "http://h/p"),
        ("http://h/p?b=2&UTM_Campaign=x&a=1", "http://h/p?a=1&b=2"),
        ("http://h/p?%75tm_source=a&x=1", "http://h/p?x=1"),  # the name decoded first
        ("http://h/p?utm_source", "http://h/p"),  # a name without a value
        ("http://h/p;jsessionid=0AF3?x=1", "http://h/p?x=1"),
        ("http://h/p;JSESSIONID=0AF3", "http://h/p"),
        ("http://h/;jsessionid=1", "http://h/"),
        ("http://h/a;jsessionid=1/b;v=2", "http://h/a/b;v=2"),  # other path parameters stay
        ("http://h/p?PHPSESSID=abc&page=2", "http://h/p?page=2"),
        ("http://h/p?sid=1&sidebar=left", "http://h/p?sidebar=left"),  # names, not prefixes
        ("http://h/p?gclid=1&fbclid=2&msclkid=3", "http://h/p"),
        ("http://h/p?aspsessionidqqgd=1", "http://h/p"),
        ("http://h/p?id=utm_source", "http://h/p?id=utm_source"),  # a value is not a name
        ("http://h/p?q=a%26utm_source%3Db", "http://h/p?q=a%26utm_source%3Db"),
        ("http://h/p?a=1#utm_source=x", "http://h/p?a=1"),
        ("http://h/p", "http://h/p"),
    ],
)
def test_default_strip_params(url, stripped):
    assert canonicalize(url, strip=DEFAULT) == stripped


def test_no_filter_and_an_empty_filter_keep_every_parameter():
    url = "http://h/p;jsessionid=1?utm_source=a"
    assert canonicalize(url) == canonicalize(url, strip=param_filter([])) == url


def test_strip_params_are_the_users_own_list():
    mine = param_filter(["ref", "track_*"])
    assert mine is param_filter(["ref", "track_*"])  # one object: extract's cache hits
    url = "http://h/p?ref=x&track_id=1&tracking=2&utm_source=a"
    assert canonicalize(url, strip=mine) == "http://h/p?tracking=2&utm_source=a"


@pytest.mark.parametrize(
    "url, collapsed",
    [
        ("http://h//", "http://h/"),
        ("http://h//a.html", "http://h/a.html"),
        ("http://h/a///b//c.html", "http://h/a/b/c.html"),
        ("http://h/a//b?y=a%2F%2Fb", "http://h/a/b?y=a%2F%2Fb"),  # not in the query
        ("http://h/a//b;jsessionid=1?utm_source=x", "http://h/a/b"),
        ("https://h:8443//a", "https://h:8443/a"),
        ("http://h/a/b", "http://h/a/b"),
    ],
)
def test_repeated_slashes_in_a_path_collapse(url, collapsed):
    assert canonicalize(url, strip=param_filter(STRIP_PARAMS, True)) == collapsed
    assert canonicalize(url, strip=CrawlConfig().url_filter) == collapsed  # the default
    kept = CrawlConfig(collapse_slashes=False).url_filter
    assert canonicalize(url, strip=kept) == canonicalize(url, strip=DEFAULT)


def test_a_backslash_link_resolves_to_the_page_it_collapses_to():
    strip = CrawlConfig().url_filter
    assert canonicalize("\\", "http://h/p.html", strip) == "http://h/"
    assert canonicalize("x.html", canonicalize("\\", "http://h/d/p.html", strip), strip) == (
        "http://h/d/x.html"
    )


@pytest.mark.parametrize(
    "pattern, problem",
    [
        ("", "must name a parameter"),
        ("*", "must name a parameter"),
        ("ut*m", "may have * only at its end"),
        ("a=b", "must not contain '='"),
        ("a b", "must not contain ' '"),
        ("utm_*", None),
        ("PHPSESSID", None),
    ],
)
def test_strip_param_patterns_are_checked(pattern, problem):
    found = param_problem(pattern)
    assert found == problem if problem is None else found.startswith(problem)


def test_a_bad_strip_params_setting_is_one_line_naming_it():
    with pytest.raises(ConfigError, match=r"setting 'strip_params': 'a&b' must not contain '&'"):
        CrawlConfig.from_dict({"strip_params": ["utm_*", "a&b"]})


def test_seeds_are_stripped_like_links():
    planned = api.plan(["http://h/p?utm_source=news&id=3", "http://h/q;jsessionid=9"], "s")
    assert planned.seeds == ["http://h/p?id=3", "http://h/q"]
    kept = api.plan(["http://h/p?utm_source=news"], "s", strip_params=[])
    assert kept.seeds == ["http://h/p?utm_source=news"]


# --- a crawl of a loopback site --------------------------------------------------------------


def page(*hrefs: str, head: str = "") -> bytes:
    anchors = "".join(f'<a href="{h}">{h}</a>' for h in hrefs)
    return f"<html><head><title>t</title>{head}</head><body>{anchors}</body></html>".encode()


def site(req: BaseHTTPRequestHandler) -> None:
    if req.path.startswith("/robots.txt"):
        req.send_error(404)
    elif req.path.split("?")[0] == "/":
        reply(req, 200, page(
            "/page?utm_source=a", "/page?utm_source=b&utm_medium=email", "/page;jsessionid=AB12",
            "/page?PHPSESSID=77&gclid=x", "/page", "/dup1", "/dup2", "/self", "/header",
            "/elsewhere",
        ))  # fmt: skip
    elif req.path in ("/dup1", "/dup2"):  # two URLs of one page, which names its canonical URL
        reply(req, 200, page(head='<link rel="canonical" href="/canon?utm_source=feed">'))
    elif req.path == "/self":
        reply(req, 200, page(head='<link rel="canonical" href="/self">'))
    elif req.path == "/header":
        reply(req, 200, page(), headers={"Link": '</canon-h>; rel="canonical"'})
    elif req.path == "/elsewhere":
        reply(req, 200, page(head='<link rel="canonical" href="http://other.invalid/x">'))
    else:
        reply(req, 200, page())


def test_session_and_tracking_variants_are_fetched_once_and_canonicals_admitted(
    redis_url, tmp_path
):
    with HTTPSite(site, max_requests=100, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/?utm_campaign=spring", "dup", 2)
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "dup", timeout=90)
        s = status(redis_url, "dup")
    assert http.hits["/page"] == 1 and http.hits["/"] == 1
    assert not [p for p in http.hits if "utm_" in p or "sessid" in p.lower() or "gclid" in p]
    assert http.hits["/canon"] == 1 and http.hits["/canon-h"] == 1 and http.hits["/self"] == 1
    assert set(http.hits) == {
        "/robots.txt", "/", "/page", "/dup1", "/dup2", "/self", "/header", "/elsewhere",
        "/canon", "/canon-h",
    }  # fmt: skip
    out = tmp_path / "dup.jsonl"
    rqcrawl(redis_url, "export", "dup", "-o", str(out))
    rows = {r["url"].removeprefix(http.base): r for r in read_jsonl(out)}
    assert len(rows) == len(read_jsonl(out))  # one record per URL
    assert rows["/dup1"]["canonical"] == rows["/dup2"]["canonical"] == http.base + "/canon"
    assert rows["/header"]["canonical"] == http.base + "/canon-h"
    assert rows["/self"]["canonical"] == http.base + "/self"
    assert rows["/elsewhere"]["canonical"] == "http://other.invalid/x"  # recorded, not crawled
    assert rows["/page"]["canonical"] is None
    assert s["links_dropped"]["out_of_scope"] == 1


# --- a site built like the SQLite documentation (Debian's sqlite3-doc) ------------------------

# Every page links `href="\"` and its neighbours by relative links; the server reads repeated
# slashes as one (as Apache does), so `//` is the home page and `//p1.html` is /p1.html.
DOC_PAGES = ["/", "/c3ref/"]
DOC_PAGES += [f"/p{i}.html" for i in range(1, 21)] + [f"/c3ref/f{i}.html" for i in range(1, 9)]


def doc_links(path: str) -> list[str]:
    if path == "/":
        return [p.lstrip("/") for p in DOC_PAGES[1:]]
    n = int(re.sub(r"\D", "", path.rsplit("/", 1)[1]) or 0)
    if path.startswith("/c3ref/"):  # (its `\` is /c3ref/, the directory's index)
        return ["\\", "../", "../p1.html", f"f{n % 8 + 1}.html"]
    return ["\\", f"p{n % 20 + 1}.html", "c3ref/f1.html"]


def doc_site(req: BaseHTTPRequestHandler) -> None:
    path = re.sub("//+", "/", req.path)
    if path == "/robots.txt" or path not in DOC_PAGES:
        req.send_error(404)
    else:
        reply(req, 200, page(*doc_links(path)))


def test_a_tree_like_the_sqlite_docs_is_fetched_once_per_page(redis_url, tmp_path):
    with HTTPSite(doc_site, max_requests=200, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/", "sqlitedoc", 3)
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "sqlitedoc", timeout=90)
    asked = {p: n for p, n in http.hits.items() if p != "/robots.txt"}
    assert asked == dict.fromkeys(DOC_PAGES, 1)  # each once (// read as /)
    out = tmp_path / "sqlitedoc.jsonl"
    rqcrawl(redis_url, "export", "sqlitedoc", "-o", str(out))
    urls = [r["url"].removeprefix(http.base) for r in read_jsonl(out)]
    assert sorted(urls) == sorted(DOC_PAGES)


# --- a page whose body the crawl already fetched ----------------------------------------------

MIRROR = page("a.html", "b.html")  # the same bytes under /docs/ and /copy/, relative links
MIRRORED = {"/", "/docs/", "/copy/", "/docs/a.html", "/copy/a.html", "/docs/b.html", "/copy/b.html"}


def mirror_site(req: BaseHTTPRequestHandler) -> None:
    if req.path == "/":
        reply(req, 200, page("/docs/", "/copy/"))
    elif req.path in ("/docs/", "/copy/"):
        reply(req, 200, MIRROR)
    elif req.path == "/robots.txt":
        req.send_error(404)
    else:
        reply(req, 200, page(req.path))  # a body of its own


@pytest.mark.parametrize("detect", [True, False])
def test_a_duplicate_page_is_recorded_and_its_links_followed(redis_url, tmp_path, detect):
    """Debian's Apache manual copies its English pages byte for byte under da/, de/...:
    their relative links lead to pages found nowhere else, which are fetched."""
    name = f"mirror{int(detect)}"
    settings = tmp_path / "crawl.toml"
    settings.write_text(f"[crawl]\ndetect_duplicates = {str(detect).lower()}\n")
    with HTTPSite(mirror_site, max_requests=100, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/", name, 3, "--config", str(settings))
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, name, timeout=90)
    out = tmp_path / "mirror.jsonl"
    rqcrawl(redis_url, "export", name, "-o", str(out))
    rows = {r["url"].removeprefix(http.base): r for r in read_jsonl(out)}
    copies = {p: rows[p]["duplicate_of"] for p in ("/docs/", "/copy/")}
    assert set(rows) == MIRRORED and all(r["outcome"] == "fetched" for r in rows.values())
    assert all(http.hits[p] == 1 for p in MIRRORED)
    if not detect:
        assert copies == {"/docs/": None, "/copy/": None}
        return
    first = next(p for p, dup in copies.items() if dup is None)  # whichever ended first
    second = "/copy/" if first == "/docs/" else "/docs/"
    assert copies[second] == http.base + first


def test_the_same_pages_on_two_hosts_are_each_crawled(redis_url, tmp_path):
    """Duplicates are found within a host: a mirror on another host (or hosts serving one
    default page) is crawled as the site it is."""
    with (
        HTTPSite(mirror_site, host="127.0.0.2", max_requests=100, max_seconds=120) as one,
        HTTPSite(mirror_site, host="127.0.0.3", max_requests=100, max_seconds=120) as two,
    ):
        seed_local(redis_url, one.base + "/", "hosts", 3, two.base + "/")
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "hosts", timeout=90)
    out = tmp_path / "hosts.jsonl"
    rqcrawl(redis_url, "export", "hosts", "-o", str(out))
    rows = {r["url"]: r for r in read_jsonl(out)}
    for http in (one, two):  # on each host, one of its two copies is the other's duplicate
        assert all(http.hits[p] == 1 for p in MIRRORED), dict(http.hits)
        dups = [rows[http.base + p]["duplicate_of"] for p in ("/docs/", "/copy/")]
        assert dups in ([None, http.base + "/docs/"], [http.base + "/copy/", None]), dups
