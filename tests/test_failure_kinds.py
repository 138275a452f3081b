"""Failure reasons come from the type of what went wrong, never from the message, which can
contain the URL: real servers that misbehave on purpose (nothing listening, a hang-up, a
1 MB header line, 101 headers, plain HTTP on an https URL), visited by the page job's own
code, and the reason each record gets."""

from __future__ import annotations

import socket
from http.server import BaseHTTPRequestHandler

import pytest
import requests
from servers import HTTPSite, free_port
from urllib3.exceptions import MaxRetryError, NameResolutionError

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.clients.base import failure_kind
from rqcrawl.fetch.clients.requests_client import KINDS
from rqcrawl.workers.visit import visit

CFG = CrawlConfig.from_dict({"allow_private": True})


def raw(answer: bytes):
    """A handler that sends `answer` as it is and hangs up."""

    def handle(req: BaseHTTPRequestHandler) -> None:
        req.wfile.write(answer)
        req.close_connection = True

    return handle


HEADER_LINE = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 1_000_000 + b"\r\n\r\n"
MANY_HEADERS = b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(101)) + b"\r\n"


def reason_of(url: str) -> str:
    found = visit(url, 0, CFG).record
    assert found["outcome"] == "failed", found
    return found["reason"]


def test_a_refused_connection_to_a_path_named_getaddrinfo_is_refused_not_dns():
    assert reason_of(f"http://127.0.0.1:{free_port()}/getaddrinfo") == "connection_refused"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (HEADER_LINE, "bad_response"),
        (MANY_HEADERS, "bad_response"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100\r\n\r\ncut",
            "read_error",
        ),
        (b"", "connection_reset"),  # a hang-up with no answer at all
    ],
    ids=["1 MB header line", "101 headers", "body cut short", "no answer"],
)
def test_what_the_server_sent_decides_the_reason(answer, reason):
    with HTTPSite(raw(answer), host="127.0.0.9", max_seconds=60) as site:
        assert reason_of(site.base + "/getaddrinfo/connection-reset") == reason


def test_plain_http_on_an_https_url_is_tls():
    with HTTPSite(raw(b"HTTP/1.1 400 Bad Request\r\n\r\n"), host="127.0.0.9") as site:
        assert reason_of(f"https://127.0.0.9:{site.port}/connection-refused") == "tls"


def test_a_name_that_does_not_resolve_is_dns_whatever_the_message():
    """The chain requests builds for a name that does not resolve (the guard raises the
    same); its message names another kind on purpose."""
    cause = NameResolutionError("x.invalid", None, socket.gaierror(-2, "connection refused"))
    exc = requests.ConnectionError(MaxRetryError(None, "/", cause))
    assert failure_kind(exc, KINDS) == "dns"
