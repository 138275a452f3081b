"""HTTP/2 over TLS (docs/howto/http-clients.md): a site that offers h2 by ALPN is fetched over
HTTP/2 by the httpx client, its pages on one connection, and over HTTP/1.1 by requests; both
verify it against the operator's CA bundle (REQUESTS_CA_BUNDLE). A real TLS server on
loopback: hypercorn with a certificate of a test CA (trustme)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import threading
from collections.abc import Callable

import pytest
import trustme
from helpers import BIN, read_jsonl, wait_until
from hypercorn.asyncio import serve
from hypercorn.config import Config
from servers import free_port

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch import clients
from rqcrawl.fetch.http import FetchError, fetch

PAGES = 8


class TLSSite:
    """/ links to /p0../p{PAGES-1}; robots.txt answers 404. Its log: (path, HTTP version,
    client port) per request, a client port standing for one connection. It stops when the
    block is left, or after `max_seconds`."""

    def __init__(self, directory, max_seconds: float = 60):
        ca = trustme.CA()
        self.ca_file = directory / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        server_pem = directory / "server.pem"
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(server_pem))
        self.port = free_port()
        self.base = f"https://127.0.0.1:{self.port}"
        self.log: list[tuple[str, str, int]] = []
        self.config = Config()
        self.config.bind = [f"127.0.0.1:{self.port}"]
        self.config.certfile = self.config.keyfile = str(server_pem)
        self.config.accesslog = self.config.errorlog = None
        self.config.graceful_timeout = 0.2  # at the end, open keep-alive connections are cut
        self.max_seconds = max_seconds
        self._started = threading.Event()

    async def app(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        path = scope["path"]
        self.log.append((path, scope["http_version"], scope["client"][1]))
        if path == "/robots.txt" or (path != "/" and not path.startswith("/p")):
            status, body = 404, b"not found"
        else:
            links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(PAGES)) if path == "/" else ""
            status, body = 200, f"<html><title>{path}</title>{links}</html>".encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"text/html")]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})

    def _run(self) -> None:
        async def main() -> None:
            self._stop = asyncio.Event()
            self._loop = asyncio.get_running_loop()
            self._loop.call_soon(self._started.set)

            async def until_stopped() -> None:
                try:
                    await asyncio.wait_for(self._stop.wait(), self.max_seconds)
                except TimeoutError:
                    pass

            await serve(self.app, self.config, shutdown_trigger=until_stopped)

        asyncio.run(main())

    def __enter__(self) -> TLSSite:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._started.wait(10)
        wait_until(self._listening, 10, "the TLS site listening")
        return self

    def _listening(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port)):
            return True
        return False

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def pages(self) -> list[tuple[str, str, int]]:
        return [entry for entry in self.log if entry[0] != "/robots.txt"]


@pytest.fixture
def fresh_clients(monkeypatch) -> Callable[[], None]:
    """No client kept from another test (each reads the CA bundle when it is made); the
    function closes this test's, as a test must before its TLS site stops (its server waits
    for a kept connection's TLS shutdown)."""
    made: dict = {}
    monkeypatch.setattr(clients, "_clients", made)
    return lambda: [client.close() for client in made.values()]


def no_hop_check(url: str) -> None:
    return None


@pytest.mark.parametrize(("client", "version"), [("httpx", "2"), ("requests", "1.1")])
def test_a_tls_site_is_fetched_over_http2_by_httpx_on_one_connection(
    client, version, tmp_path, monkeypatch, fresh_clients
):
    with TLSSite(tmp_path) as site:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(site.ca_file))
        cfg = CrawlConfig.from_dict({"allow_private": True, "http_client": client})
        for i in range(PAGES):
            assert fetch(f"{site.base}/p{i}", cfg, no_hop_check).status == 200
        fresh_clients()
    assert [v for _, v, _ in site.pages()] == [version] * PAGES
    assert len({port for _, _, port in site.pages()}) == 1  # kept alive, on both versions


@pytest.mark.parametrize("client", ["httpx", "requests"])
def test_a_tls_site_whose_ca_is_not_the_operators_is_refused(
    client, tmp_path, monkeypatch, fresh_clients
):
    with TLSSite(tmp_path) as site:
        monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
        monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
        cfg = CrawlConfig.from_dict({"allow_private": True, "http_client": client})
        with pytest.raises(FetchError) as err:
            fetch(f"{site.base}/p0", cfg, no_hop_check)
        fresh_clients()
    assert err.value.reason == "tls", err.value
    assert site.pages() == []


def test_rqcrawl_crawl_of_a_tls_site_over_http2(tmp_path):
    """The literal command, at default settings but the client (and --allow-private)."""
    with TLSSite(tmp_path) as site:
        settings = tmp_path / "h2.toml"
        settings.write_text('http_client = "httpx"\n')
        env = {**os.environ, "REQUESTS_CA_BUNDLE": str(site.ca_file)}
        done = subprocess.run(
            [str(BIN / "rqcrawl"), "crawl", site.base + "/", "-o", str(tmp_path / "o.jsonl"),
             "--allow-private", "--config", str(settings), "--data-dir", str(tmp_path / "d")],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    fetched = {r["url"] for r in read_jsonl(tmp_path / "o.jsonl") if r["outcome"] == "fetched"}
    assert fetched == {site.base + "/"} | {f"{site.base}/p{i}" for i in range(PAGES)}
    assert {v for _, v, _ in site.log} == {"2"}
