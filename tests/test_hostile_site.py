"""One site doing at once what the hostile web does, crawled through a proxy by real workers
with the address guard on: malformed links, a 100,000-link page, a drip-fed answer, a cookie
flood and a redirect to a loopback address. Every URL ends recorded exactly once with a
truthful outcome, no Redis command is slow, no worker prints a traceback, and the refused
address never sees a byte."""

from __future__ import annotations

import json
from collections import Counter
from http.server import BaseHTTPRequestHandler

from helpers import read_jsonl, rqcrawl, wait_finished
from servers import HTTPSite, drip, reply

from rqcrawl.workers.runner import LocalWorkers

# The proxy is the crawl's "internet": it answers for these hosts itself. Their addresses are
# ones the crawl allows (`allow_networks`); the redirect target's is not. The drip-fed page
# and the huge page are on hosts of their own, as on the web: one slow answer (or 100,000
# links to parse) holds its host's politeness slot, not every host's.
SITE = "http://127.0.0.2:8081"
SLOW = "http://127.0.0.4:8081"
HUGE = "http://127.0.0.5:8081"
LEAVES = "http://127.0.0.6:8081"
HOSTS = [SITE, SLOW, HUGE, LEAVES]
COOKIE_PAGES = 30
HUGE_LINKS = 100_000
LINK_CAP = 300


class HostileSite:
    """The handler of the proxy; records the Cookie header size of every request."""

    def __init__(self, refused_target: str):
        self.refused_target = refused_target
        self.cookie_bytes: list[int] = []

    def __call__(self, req: BaseHTTPRequestHandler) -> None:
        path = req.path
        if not path.startswith(tuple(h + "/" for h in HOSTS)):  # it got past the guard
            reply(req, 502, b"not this proxy's site")
        elif path.endswith("/robots.txt"):
            reply(req, 404, b"", "text/plain")
        elif path == SITE + "/":
            links = [SLOW + "/drip", "/out", *(f"/cookies/{n}" for n in range(COOKIE_PAGES))]
            reply(req, 200, _page("index", links))
        elif path == SITE + "/malformed":
            body = (
                '<base href="http://[bad">'  # ignored: links resolve against the page
                '<a href="http://[bad/">a</a><a href="http://ex ample.com/">b</a>'
                '<a href="http://a<b>.com/">c</a><a href="/ok">fine</a>'
            )
            reply(req, 200, f"<title>malformed</title>{body}".encode())
        elif path == HUGE + "/huge":
            reply(req, 200, _page("huge", [f"{LEAVES}/h/{n}" for n in range(HUGE_LINKS)]))
        elif path == SLOW + "/drip":
            drip(req, b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<title>late</title>")
        elif path.startswith(SITE + "/cookies/"):
            self.cookie_bytes.append(len(req.headers.get("Cookie", "")))
            name = "c" + path.rsplit("/", 1)[1]
            reply(req, 200, _page(name, []), headers={"Set-Cookie": f"{name}={'x' * 300}"})
        elif path == SITE + "/out":
            reply(req, 302, b"", headers={"Location": self.refused_target})
        else:
            reply(req, 200, _page(path, []))


def _page(title: str, links: list[str]) -> bytes:
    anchors = "".join(f'<a href="{link}">x</a>' for link in links)
    return f"<title>{title}</title>{anchors}".encode()


def test_a_hostile_site_through_a_proxy_ends_with_every_url_recorded_truthfully(
    redis_url, conn, slowlog, tmp_path
):
    with HTTPSite(lambda req: reply(req, 200, b"secret"), host="127.0.0.3") as secret:
        site = HostileSite(secret.base + "/secret")
        with HTTPSite(site, max_requests=2000, max_seconds=240) as proxy:
            settings = tmp_path / "hostile.toml"
            settings.write_text(
                "[crawl]\n"
                f"scope_hosts = {[h[7:] for h in HOSTS] + [secret.base[7:]]}\n"
                "allow_networks = ['127.0.0.2/32', '127.0.0.4/30']\n"
                f"max_links_per_page = {LINK_CAP}\n"
                "delay = 0\nretries = 1\nretry_base = 0.2\n"
                "read_timeout = 1.0\ndownload_timeout = 6.0\n"  # the huge page fits; the drip not
            )
            seeds = [f"{SITE}/", f"{HUGE}/huge", f"{SITE}/malformed"]
            rqcrawl(redis_url, "seed", *seeds, "--crawl", "hostile", "--max-depth", "1",
                    "--config", str(settings))  # fmt: skip
            proxy_env = {"HTTP_PROXY": proxy.base, "NO_PROXY": "", "no_proxy": ""}
            with LocalWorkers(redis_url, 2, log_dir=tmp_path, env=proxy_env):
                status = wait_finished(redis_url, "hostile", timeout=180)
    out = tmp_path / "hostile.jsonl"
    rqcrawl(redis_url, "export", "hostile", "-o", str(out))
    records = read_jsonl(out)
    by_url = {r["url"].removeprefix(SITE): r for r in records}

    # every URL recorded exactly once
    assert max(Counter(r["url"] for r in records).values()) == 1
    target = (
        secret.base + "/secret"
    )  # /out's redirect target: a URL of its own (rqcrawl.fetch.hops)
    expected = {"/", HUGE + "/huge", "/malformed", "/ok", SLOW + "/drip", "/out", target}
    expected |= {f"/cookies/{n}" for n in range(COOKIE_PAGES)}
    expected |= {f"{LEAVES}/h/{n}" for n in range(LINK_CAP)}
    assert set(by_url) == expected
    assert status["admitted"] == len(expected)

    # truthful outcomes
    assert by_url["/malformed"]["outcome"] == "fetched" and by_url["/ok"]["outcome"] == "fetched"
    assert status["links_dropped"]["bad"] == 3  # [bad/, a space in a host, <> in a host
    assert by_url[HUGE + "/huge"]["outcome"] == "fetched"
    assert by_url[HUGE + "/huge"]["links_cut"] == HUGE_LINKS - LINK_CAP
    drip_fed = by_url[SLOW + "/drip"]
    assert drip_fed["outcome"] == "failed" and "6.0s" in drip_fed["error"]
    assert drip_fed["attempts"] == 2  # a timeout is retried like one
    assert by_url["/out"]["outcome"] == "redirected" and by_url["/out"]["redirect_to"] == target
    assert by_url[target]["outcome"] == "refused_address"
    assert "127.0.0.3" in by_url[target]["error"] and by_url[target]["via"] == [SITE + "/out"]
    fetched = [u for u, r in by_url.items() if r["outcome"] == "fetched"]
    assert len(fetched) == len(expected) - 3  # the drip-fed page, /out and its target

    # the guard held through the proxy: the refused address got nothing, directly or not
    assert secret.hits == {}
    assert not [p for p in proxy.hits if not p.startswith(tuple(HOSTS))]
    # the cookie flood stayed within the host's cap, and cookies were really kept and sent
    assert 0 < max(site.cookie_bytes) <= 4096
    # no Redis call long enough to stall other clients, no traceback in any worker
    slow = slowlog()
    assert slow == [], json.dumps(slow, default=str)[:2000]
    logs = "".join(p.read_text() for p in tmp_path.glob("*.log"))
    assert "Traceback" not in logs
