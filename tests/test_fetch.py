"""fetch honours the proxy settings of the environment, which the session reads once: a proxy
in HTTP_PROXY is used, NO_PROXY is honoured, and with no proxy requests go straight to the
site. A proxy does not lift the address guard: a refused target never reaches it."""

from __future__ import annotations

import socket
from dataclasses import replace

import pytest
from servers import HTTPSite, reply

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch import proxies
from rqcrawl.fetch.http import FetchError, fetch

CFG = CrawlConfig.from_dict({"allow_private": True, "scope_hosts": ["site.invalid"]})


def page(req) -> None:
    reply(req, 200, b"<html><title>ok</title></html>")


@pytest.fixture
def env(monkeypatch):
    """No proxy variables, read anew (a process reads them once)."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    proxies.environment.cache_clear()
    yield monkeypatch
    proxies.environment.cache_clear()


def no_hop_check(url: str) -> None:
    return None


def test_without_a_proxy_requests_go_to_the_site(env, http_client):
    with HTTPSite(page, max_requests=5, max_seconds=30) as site:
        resp = fetch(site.base + "/page", replace(CFG, http_client=http_client), no_hop_check)
    assert resp.status == 200 and site.hits == {"/page": 1}


def test_a_proxy_from_the_environment_is_used(env, http_client):
    with HTTPSite(page, max_requests=5, max_seconds=30) as proxy:
        env.setenv("HTTP_PROXY", proxy.base)
        resp = fetch(
            "http://site.invalid/page", replace(CFG, http_client=http_client), no_hop_check
        )
    assert resp.status == 200
    assert proxy.hits == {"http://site.invalid/page": 1}  # the absolute form proxies get


def test_no_proxy_is_honoured(env, http_client):
    with HTTPSite(page, max_requests=5, max_seconds=30) as site:
        env.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens: must not be used
        env.setenv("NO_PROXY", "127.0.0.1")
        resp = fetch(site.base + "/page", replace(CFG, http_client=http_client), no_hop_check)
    assert resp.status == 200 and site.hits == {"/page": 1}


GUARDED = CrawlConfig.from_dict({"scope_hosts": ["127.0.0.1", "8.8.8.8"]})


def test_a_proxy_does_not_lift_the_guard(env, http_client):
    # The proxy on loopback is the operator's choice; the target on loopback is refused
    # before any request reaches the proxy.
    with HTTPSite(page, host="127.0.0.2", max_requests=5, max_seconds=30) as proxy:
        env.setenv("HTTP_PROXY", proxy.base)
        with pytest.raises(FetchError) as err:
            fetch(
                "http://127.0.0.1:8080/page",
                replace(GUARDED, http_client=http_client),
                no_hop_check,
            )
    assert err.value.reason == "refused_address"
    assert proxy.hits == {}


def test_a_proxy_reaches_public_targets_under_the_guard(env, http_client):
    with HTTPSite(page, host="127.0.0.2", max_requests=5, max_seconds=30) as proxy:
        env.setenv("HTTP_PROXY", proxy.base)
        resp = fetch(
            "http://8.8.8.8/page", replace(GUARDED, http_client=http_client), no_hop_check
        )  # the proxy answers
    assert resp.status == 200 and proxy.hits == {"http://8.8.8.8/page": 1}


def test_a_proxy_gets_no_connect_for_a_refused_https_target(env, http_client):
    # The proxy is a listener nobody accepts on: a CONNECT attempt would leave a connection
    # in its backlog.
    with socket.socket() as proxy:
        proxy.bind(("127.0.0.2", 0))
        proxy.listen(8)
        proxy.setblocking(False)
        env.setenv("HTTPS_PROXY", f"http://127.0.0.2:{proxy.getsockname()[1]}")
        cfg = CrawlConfig.from_dict(
            {"scope_hosts": ["127.0.0.1"], "read_timeout": 1.0, "http_client": http_client}
        )
        with pytest.raises(FetchError) as err:
            fetch("https://127.0.0.1:8443/page", cfg, no_hop_check)
        assert err.value.reason == "refused_address"
        with pytest.raises(BlockingIOError):
            proxy.accept()
