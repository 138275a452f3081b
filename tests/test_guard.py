"""The address guard: embedded IPv4 forms are judged by the IPv4 they carry, and a refused
address gets no byte from us, not even a TCP handshake, whatever the client (a client class
of the user's own included)."""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator
from dataclasses import replace
from urllib.parse import urlsplit

import pytest
from servers import HTTPSite, reply

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.clients import CLIENTS
from rqcrawl.fetch.clients.base import Headers, HttpClient, HttpResponse, Sent
from rqcrawl.fetch.guard import networks, refusal
from rqcrawl.fetch.http import FetchError, fetch

GUARDED = CrawlConfig.from_dict({"scope_hosts": ["127.0.0.9"]})


@pytest.mark.parametrize(
    ("ip", "form", "ipv4"),
    [
        ("2002:7f00:1::", "6to4", "127.0.0.1"),
        ("2002:a9fe:a9fe::1", "6to4", "169.254.169.254"),  # cloud metadata
        ("2002:c0a8:101::", "6to4", "192.168.1.1"),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo", "127.0.0.1"),  # the client's
        ("64:ff9b::a00:1", "NAT64", "10.0.0.1"),
        ("::7f00:1", "IPv4-compatible", "127.0.0.1"),
        ("::ffff:127.0.0.1", "IPv4-mapped", "127.0.0.1"),
    ],
)
def test_ipv6_forms_embedding_a_refused_ipv4_are_refused(ip, form, ipv4):
    why = refusal(ipv4)
    assert why is not None  # the carried address is refused itself
    assert refusal(ip) == f"{form} of {ipv4}: {why}"  # and so, for that reason, is its form


@pytest.mark.parametrize("ip", ["2002:808:808::1", "64:ff9b::808:808", "8.8.8.8", "2606:4700::1"])
def test_public_addresses_and_their_embeddings_pass(ip):
    assert refusal(ip) is None


class OwnClient(HttpClient):
    """A client of a user's own (`http_client = "test_guard:OwnClient"`): http.client
    straight to the URL's host, with no guard of its own."""

    def send(self, method, url, headers, timeouts, data=None, proxy=None) -> HttpResponse:
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeouts[0])
        conn.request(method, parts.path or "/", body=data, headers=dict(headers))
        return OwnResponse(conn.getresponse(), Sent(method, url, headers))


class OwnResponse(HttpResponse):
    def __init__(self, resp: http.client.HTTPResponse, sent: Sent):
        super().__init__(sent, resp.status, resp.reason, Headers(resp.getheaders()), "HTTP/1.1")
        self._resp = resp

    def iter_bytes(self, size: int) -> Iterator[bytes]:
        while chunk := self._resp.read(size):
            yield chunk

    def release(self) -> None:
        self._resp.close()

    def close(self) -> None:
        self._resp.close()


OWN = "test_guard:OwnClient"


@pytest.mark.parametrize("host", ["127.0.0.9", "localhost"])
@pytest.mark.parametrize("client", [*sorted(CLIENTS), OWN])
def test_a_refused_address_gets_no_handshake(host, client):
    # A listening socket nobody accepts on: the kernel would complete a handshake into the
    # backlog, where a non-blocking accept() finds it.
    with socket.socket() as listener:
        listener.bind((socket.gethostbyname(host), 0))
        listener.listen(8)
        listener.setblocking(False)
        url = f"http://{host}:{listener.getsockname()[1]}/"
        with pytest.raises(FetchError) as err:
            fetch(url, replace(GUARDED, http_client=client), lambda hop: None)
        assert err.value.reason == "refused_address" and "loopback" in str(err.value)
        with pytest.raises(BlockingIOError):
            listener.accept()


def test_a_client_of_ones_own_reaches_what_the_crawl_allows():
    """The refusal above is the guard's: the same client fetches with allow_private."""
    with HTTPSite(lambda req: reply(req, 200, b"<title>in</title>"), max_seconds=30) as site:
        cfg = replace(GUARDED, http_client=OWN, allow_private=True)
        resp = fetch(site.base + "/", cfg, lambda hop: None)
    assert resp.status == 200 and resp.body == b"<title>in</title>"


def test_allowed_networks_let_only_themselves_through():
    allowed = networks(["127.0.0.2/32", "10.20.0.0/16"])
    assert refusal("127.0.0.2", allowed) is None
    assert refusal("10.20.3.4", allowed) is None
    assert refusal("2002:7f00:2::", allowed) is None  # 6to4 of an allowed address
    assert refusal("127.0.0.3", allowed) == "loopback"
    assert refusal("10.21.0.1", allowed) == "private"
    assert refusal("169.254.169.254", allowed) == "link-local or cloud metadata"


def test_a_redirect_to_a_refused_address_never_reaches_it(http_client):
    def moved(req) -> None:
        reply(req, 302, b"", headers={"Location": f"{inner.base}/inside"})

    with (
        HTTPSite(lambda req: reply(req, 200, b"<title>in</title>"), host="127.0.0.3") as inner,
        HTTPSite(moved, host="127.0.0.2", max_seconds=30) as outer,
    ):
        cfg = CrawlConfig.from_dict(
            {"allow_networks": ["127.0.0.2/32"], "http_client": http_client}
        )
        with pytest.raises(FetchError) as err:
            fetch(outer.base + "/", cfg, lambda hop: None)
    assert err.value.reason == "refused_address" and "127.0.0.3" in str(err.value)
    assert outer.hits == {"/": 1} and inner.hits == {}
