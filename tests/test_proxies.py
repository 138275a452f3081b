"""The crawl's own proxies (`proxies`): each host is given one in turn and keeps it while it
works; a proxy that dies is retired and its hosts move on, with no page lost. Real forward
proxies on loopback (servers.forward) in front of real sites."""

from __future__ import annotations

import time

import pytest
from helpers import read_jsonl, rqcrawl, seed_local, wait_finished, wait_until
from servers import HTTPSite, forward, reply

from rqcrawl.config import ConfigError, CrawlConfig
from rqcrawl.fetch import proxies
from rqcrawl.fetch.http import FetchError, fetch
from rqcrawl.workers.runner import LocalWorkers

PAGES = 30  # pages per site


def site(others: list[str]):
    """A site whose / links to its /1 .. /PAGES and to the URLs in `others`; each page is
    slow enough (0.05 s) for a proxy to be stopped while a crawl goes on."""

    def handle(req) -> None:
        if req.path == "/robots.txt":
            reply(req, 404, b"")
            return
        time.sleep(0.05)
        urls = [*(f"/{i}" for i in range(1, PAGES + 1)), *others] if req.path == "/" else []
        links = "".join(f'<a href="{u}">{u}</a>' for u in urls)
        reply(req, 200, f"<title>{req.path}</title>{links}".encode())

    return handle


def no_hop_check(url: str) -> None:
    return None


def proxy_of(proxy: HTTPSite, target: HTTPSite) -> int:
    """Requests of `target` that went through `proxy`."""
    return sum(n for url, n in proxy.hits.items() if url.startswith(target.base))


def test_a_host_keeps_its_proxy_and_moves_when_it_dies(http_client):
    with (
        HTTPSite(forward, host="127.0.0.2", max_seconds=60) as p1,
        HTTPSite(forward, host="127.0.0.3", max_seconds=60) as p2,
        HTTPSite(site([]), host="127.0.0.4", max_seconds=60) as a,
        HTTPSite(site([]), host="127.0.0.5", max_seconds=60) as b,
    ):
        cfg = CrawlConfig.from_dict(
            {"allow_private": True, "proxies": [p1.base, p2.base], "http_client": http_client}
        )
        for i in range(1, 4):
            for target in (a, b):
                assert fetch(f"{target.base}/{i}", cfg, no_hop_check).status == 200
        # each host went through one proxy only, and not the same one
        assert {(proxy_of(p1, a), proxy_of(p2, a)), (proxy_of(p1, b), proxy_of(p2, b))} == {
            (3, 0),
            (0, 3),
        }
        first, second = (p1, p2) if proxy_of(p1, a) else (p2, p1)
        first.stop()  # nothing listens there now: refused, retired at once
        assert fetch(f"{a.base}/9", cfg, no_hop_check).status == 200
    assert proxy_of(second, a) == 1 and a.hits["/9"] == 1


def test_a_refused_target_never_reaches_a_listed_proxy():
    with HTTPSite(forward, host="127.0.0.2", max_seconds=30) as p:
        cfg = CrawlConfig.from_dict({"scope_hosts": ["127.0.0.1"], "proxies": [p.base]})
        with pytest.raises(FetchError) as err:
            fetch("http://127.0.0.1:8080/page", cfg, no_hop_check)
    assert err.value.reason == "refused_address" and p.hits == {}


def test_a_pool_retires_after_failures_in_a_row_and_tries_again_later():
    pool = proxies.ProxyPool(("http://p1", "http://p2"), max_failures=2, retry_seconds=0.2)
    assert pool.for_host("h") == "http://p1"
    assert not pool.failed("http://p1", refused=False)
    pool.worked("http://p1")  # in a row: a success starts the count again
    assert not pool.failed("http://p1", refused=False)
    assert pool.failed("http://p1", refused=False)
    assert pool.for_host("h") == "http://p2"
    time.sleep(0.25)
    assert pool.for_host("other") in ("http://p1", "http://p2")
    assert pool.failed("http://p1", refused=False)  # back, but one more failure retires it
    assert pool.for_host("again") == "http://p2"


def test_proxies_must_be_proxy_urls():
    with pytest.raises(ConfigError, match="not a proxy URL"):
        CrawlConfig.from_dict({"proxies": ["ftp://127.0.0.1:21"]})


def test_a_crawl_rotates_proxies_and_survives_one_dying(redis_url, tmp_path):
    with (
        HTTPSite(forward, host="127.0.0.2", max_seconds=120) as p1,
        HTTPSite(forward, host="127.0.0.3", max_seconds=120) as p2,
        HTTPSite(site(roots := []), host="127.0.0.4", max_seconds=120) as a,
        HTTPSite(site([]), host="127.0.0.5", max_seconds=120) as b,
    ):
        roots.append(b.base + "/")
        conf = tmp_path / "proxies.toml"
        conf.write_text(
            f'[crawl]\nproxies = ["{p1.base}", "{p2.base}"]\n'
            f'scope_hosts = ["{a.host}:{a.port}", "{b.host}:{b.port}"]\n'
        )
        seed_local(redis_url, a.base + "/", "px", 2, "--config", str(conf))
        with LocalWorkers(redis_url, 1, log_dir=tmp_path):
            wait_until(lambda: sum(p1.hits.values()) >= 5, 60, "p1 to carry pages")
            p1.stop()  # mid-crawl
            carried = sum(p2.hits.values())
            wait_finished(redis_url, "px", timeout=90)
        out = tmp_path / "px.jsonl"
        rqcrawl(redis_url, "export", "px", "-o", str(out))
    rows = read_jsonl(out)
    assert len(rows) == 2 * (PAGES + 1)
    lost = [r for r in rows if r["outcome"] != "fetched"]
    assert not lost, lost
    assert sum(p1.hits.values()) >= 5 and carried > 0  # both carried pages before
    assert sum(p2.hits.values()) > carried  # and the live one after


def test_status_config_masks_the_proxies_passwords(redis_url, tmp_path):
    """As it masks the task table's and the shards': `status --config` is pasted into
    tickets and chats."""
    conf = tmp_path / "proxies.toml"
    conf.write_text('[crawl]\nproxies = ["http://alice:S3cretPW@127.0.0.2:3128"]\n')
    rqcrawl(redis_url, "seed", "http://a.test/", "--crawl", "pw", "--config", str(conf))
    for shown in (
        rqcrawl(redis_url, "status", "pw", "--config").stdout,
        rqcrawl(redis_url, "status", "pw", "--config", "--json").stdout,
    ):
        assert "S3cretPW" not in shown, shown
        assert "http://alice:***@127.0.0.2:3128" in shown, shown
