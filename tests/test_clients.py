"""The HTTP client seam: the `http_client` setting names a client of the registry or a
"module:Class" path, a bad one is a one-line error, and the response type keeps every
header line."""

from __future__ import annotations

import gzip

import pytest
from servers import HTTPSite

from rqcrawl.config import HTTP_CLIENTS, ConfigError, CrawlConfig
from rqcrawl.fetch.clients import CLIENTS, client_class
from rqcrawl.fetch.clients.requests_client import RequestsClient
from rqcrawl.fetch.http import FetchError, fetch

PATH = "rqcrawl.fetch.clients.requests_client:RequestsClient"


def test_the_settings_know_every_client():
    assert sorted(HTTP_CLIENTS) == sorted(CLIENTS)


@pytest.mark.parametrize(
    ("name", "error"),
    [("nope", "not one of"), ("os:path", "not an HttpClient"), ("no_such_mod:X", "No module")],
)
def test_a_bad_client_is_a_one_line_error(name, error):
    with pytest.raises(ValueError, match=error) as err:
        client_class(name)
    assert "\n" not in str(err.value)


def test_a_bad_client_name_is_refused_with_the_settings():
    with pytest.raises(ConfigError, match="http_client"):
        CrawlConfig.from_dict({"http_client": "no such client"})


def test_a_client_named_by_its_path_fetches():
    def two_cookies(req) -> None:
        body = b"<title>ok</title>"
        req.send_response(200)
        req.send_header("Set-Cookie", "a=1")
        req.send_header("Set-Cookie", "b=2")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    assert client_class(PATH) is RequestsClient
    cfg = CrawlConfig.from_dict({"allow_private": True, "http_client": PATH})
    with HTTPSite(two_cookies, max_seconds=30) as site:
        resp = fetch(site.base + "/", cfg, lambda hop: None)
    assert resp.status == 200 and resp.body == b"<title>ok</title>"
    assert resp.headers.getlist("SET-COOKIE") == ["a=1", "b=2"]  # each line, any case
    assert resp.headers["set-cookie"] == "a=1, b=2"


def test_the_size_cap_holds_for_every_client(http_client):
    """No Content-Length, and a gzip bomb: the cap is on decoded bytes, while streaming."""
    bomb = gzip.compress(b"<p>" + b"x" * 2_000_000)

    def big(req) -> None:
        req.send_response(200)
        req.send_header("Content-Type", "text/html")
        if req.path == "/bomb":
            req.send_header("Content-Encoding", "gzip")
            req.send_header("Content-Length", str(len(bomb)))
            req.end_headers()
            req.wfile.write(bomb)
            return
        req.send_header("Connection", "close")
        req.end_headers()
        req.wfile.write(b"<p>" + b"x" * 2_000_000)

    cfg = CrawlConfig.from_dict(
        {"allow_private": True, "max_body_bytes": 1_000_000, "http_client": http_client}
    )
    with HTTPSite(big, max_seconds=30) as site:
        for path in ("/stream", "/bomb"):
            with pytest.raises(FetchError) as err:
                fetch(site.base + path, cfg, lambda hop: None)
            assert err.value.reason == "too_large", path
            cut = fetch(site.base + path, cfg, lambda hop: None, truncate_at=1_000_000)
            assert cut.truncated and len(cut.body) == 1_000_000, path  # a page's read
