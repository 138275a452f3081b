"""Requisites (rqcrawl.frontier.requisites): what each page loads is fetched into the WARC
files, through robots.txt and its host's gate, once per crawl, never recorded as a page nor
counted in max_pages; and the pure extraction of them from HTML and CSS."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import read_jsonl, rqcrawl
from replaysite import FILES, REQUISITES, handler
from servers import HTTPSite, reply
from warcio.archiveiterator import ArchiveIterator

from rqcrawl.parse.extract import selector
from rqcrawl.parse.requisites import of_css, of_html


def responses(warc_dir: Path) -> dict[str, list[tuple[str, bytes]]]:
    """URL -> (status, payload) of every response record of the crawl's WARC files."""
    found: dict[str, list[tuple[str, bytes]]] = {}
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "response":
                    uri = rec.rec_headers.get_header("WARC-Target-URI")
                    status = rec.http_headers.get_statuscode()
                    found.setdefault(uri, []).append((status, rec.content_stream().read()))
    return found


def crawl_site(redis_url: str, tmp: Path, *extra: str) -> tuple[HTTPSite, HTTPSite, list[dict]]:
    with HTTPSite(lambda req: reply(req, 200, b"far"), host="127.0.0.2") as far:
        with HTTPSite(handler(far.base), max_requests=100) as http:
            rqcrawl(
                redis_url, "crawl", http.base + "/", "-o", str(tmp / "out.jsonl"),
                "--crawl", "req", "--allow-private", "--delay", "0", "--no-sitemaps",
                "--max-pages", "2", "--workers", "1", *extra,
            )  # fmt: skip
    return http, far, read_jsonl(tmp / "out.jsonl")


def test_each_requisite_is_archived_once_and_not_recorded(redis_url, tmp_path):
    warc_dir = tmp_path / "warc"
    http, far, records = crawl_site(redis_url, tmp_path, "--warc", str(warc_dir))
    base = http.base
    assert sorted(r["url"] for r in records) == [base + "/", base + "/two.html"]
    assert all(r["outcome"] == "fetched" for r in records)  # max_pages 2: both pages
    for path in REQUISITES:  # each once, though both pages load most of them
        assert http.hits[path] == 1, (path, http.hits)
    assert http.hits["/private/secret.png"] == 0  # robots.txt disallows it
    assert sum(far.hits.values()) == 0  # another host: not by default
    archived = responses(warc_dir)
    for path in REQUISITES:
        assert archived[base + path] == [("200", FILES[path][0])]
    assert len(archived) == len(REQUISITES) + 2
    status = json.loads(rqcrawl(redis_url, "status", "req", "--json").stdout)
    assert status["state"] == "finished"
    assert status["requisites"] == {
        "admitted": len(REQUISITES) + 1,  # and /private/secret.png, refused by robots.txt
        "archived": len(REQUISITES),
        "bytes": sum(len(FILES[p][0]) for p in REQUISITES),
        "cut": 0,
        "problems": {"robots": 1},
    }


def test_a_crawl_without_warc_fetches_no_requisite(redis_url, tmp_path):
    http, _, records = crawl_site(redis_url, tmp_path)
    assert len(records) == 2
    assert set(http.hits) == {"/robots.txt", "/", "/two.html"}


def test_requisite_hosts_lets_other_hosts_in(redis_url, tmp_path):
    warc_dir = tmp_path / "warc"
    config = tmp_path / "crawl.toml"
    config.write_text('[crawl]\nrequisite_hosts = ["*"]\n')  # any host
    _, far, _ = crawl_site(redis_url, tmp_path, "--warc", str(warc_dir), "--config", str(config))
    assert far.hits["/img/far.png"] == 1


def test_requisites_of_html_and_css():
    html = """<html><head><base href="http://h/b/">
    <link rel="stylesheet" href="s.css"><link rel="canonical" href="/c">
    <link rel="icon" href="/favicon.ico"><script src="a.js"></script>
    <style>@import 'i.css'; p { background: url( "bg.png" ) }</style></head>
    <body><img src="x.png" srcset="x2.png 2x, x3.png 3x"><img src="data:image/png;base64,AA">
    <a href="/page">a link is not a requisite</a><img src="x.png">
    <p style="background:url(p.png)"></p><video poster="v.jpg"></video></body></html>"""
    assert of_html(selector(html), "http://h/b/") == [
        "http://h/b/s.css", "http://h/favicon.ico", "http://h/b/a.js", "http://h/b/bg.png",
        "http://h/b/i.css", "http://h/b/x.png", "http://h/b/x2.png", "http://h/b/x3.png",
        "http://h/b/v.jpg", "http://h/b/p.png",
    ]  # fmt: skip
    css = """@import url("a.css"); @import "b.css"; /* url(no.png) */
    @font-face { src: url(f.woff2) format("woff2"), url('f.woff') }
    div { background: url(data:image/gif;base64,R0) }"""
    assert of_css(css, "http://h/s/site.css") == [
        "http://h/s/a.css", "http://h/s/f.woff2", "http://h/s/f.woff", "http://h/s/b.css",
    ]  # fmt: skip
