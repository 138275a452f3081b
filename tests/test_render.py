"""The render path (rqcrawl.render.browser, rqcrawl.parse.rendering) with a real Chromium (Debian's
`chromium`, driven by Playwright): script-built sites crawled completely at exact depths with
`render` patterns and with "auto", a plain site under "auto" rendering nothing, the address
guard inside the browser (a canary on 127.0.0.2 counts connections), a render worker killed
mid-page, and the browser's recycling."""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest
from helpers import BIN, read_jsonl, rqcrawl, seed_local, stop_pids, wait_finished, wait_until
from rq import Queue
from servers import HTTPSite, reply
from testsite import Site

from rqcrawl.bench.jssite import APP_JS, JSSite
from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import keys
from rqcrawl.parse import rendering
from rqcrawl.parse.extract import parse
from rqcrawl.workers.runner import RENDER_WORKER_CLASS, LocalWorkers

CHROMIUM = Path("/usr/bin/chromium")
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists() or importlib.util.find_spec("playwright") is None,
    reason="needs Debian's chromium (/usr/bin/chromium) and PyPI playwright",
)


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def render_workers(redis_url: str, log_dir: Path, count: int = 1) -> LocalWorkers:
    return LocalWorkers(
        redis_url, count, log_dir=log_dir, worker_class=RENDER_WORKER_CLASS,
        queue=keys.RENDER_QUEUE,
    )  # fmt: skip


def crawled(redis_url: str, crawl: str, tmp_path: Path) -> list[dict]:
    out = tmp_path / f"{crawl}.jsonl"
    rqcrawl(redis_url, "export", crawl, "-o", str(out))
    return read_jsonl(out)


# -- which pages `auto` renders (pure) --------------------------------------------------------


def test_auto_rule_on_the_test_sites():
    """Every script-built page of the JS site needs the browser; no page of its server-side
    twin nor of the plain test site does (the measurement docs/howto/rendering.md cites)."""
    js, ssr, plain = JSSite(40), JSSite(40, server_side=True), Site(pages=40)
    origin = "http://127.0.0.1:8000"

    def verdict(body: bytes) -> str | None:
        page = parse(body.decode(), origin + "/")
        return rendering.needs_rendering(page.selector, len(page.links))

    assert {verdict(js.shell(i)) for i in range(40)} == {"empty_root"}
    assert {verdict(ssr.server_rendered(i)) for i in range(40)} == {None}
    assert {verdict(plain.render(i, origin)) for i in range(40)} == {None}
    shell = b"<html><body><noscript>Please enable JavaScript.</noscript><script>x()</script>"
    assert verdict(shell + b"<p>" + b"words " * 100 + b"</p></body></html>") == "noscript"
    assert verdict(b"<html><body><script src=a.js></script><p>hi</p></body></html>") == (
        "little_text"
    )


def test_render_patterns_name_urls_or_hosts():
    cfg = CrawlConfig.from_dict({"render": ["*.app.example", "https://spa.example/app/*"]})
    assert rendering.matches("https://x.app.example/a", cfg.render)
    assert rendering.matches("https://spa.example/app/b", cfg.render)
    assert not rendering.matches("https://spa.example/blog/b", cfg.render)
    assert not rendering.auto(cfg.render)
    auto = CrawlConfig.from_dict({"render": "auto"})
    assert auto.render == ["auto"] and rendering.auto(auto.render)
    assert not rendering.matches("https://spa.example/", auto.render)


def test_the_plain_worker_never_imports_playwright():
    code = (
        "import sys, rqcrawl.workers.worker, rqcrawl.workers.jobs, rqcrawl.frontier.dispatch;"
        "import rqcrawl.cli;"
        "assert 'playwright' not in sys.modules and 'rqcrawl.render.browser' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_browsers_offline_wrapper_is_removed_when_its_process_exits():
    code = "from rqcrawl.render.browser import offline; print(offline('/usr/bin/chromium'))"
    launched = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    wrapper = Path(launched.stdout.decode().strip())
    if wrapper == CHROMIUM:
        pytest.skip("no network namespace on this machine: no wrapper is written")
    assert wrapper.name == "chromium-offline" and not wrapper.parent.exists()


# -- crawls ------------------------------------------------------------------------------------


@needs_chromium
@pytest.mark.parametrize("render", ["patterns", "auto"])
def test_a_script_built_site_is_crawled_completely(render, redis_url, conn, tmp_path):
    """Every link of the site is made by script from a JSON API: without the browser the
    crawl would end at page 0. Both ways of choosing pages reach every page within
    max_depth, each at its exact depth, rendered; patterns send the pages to the browser
    at once (one request each), auto after an HTTP fetch (two)."""
    site = JSSite(pages=20)
    warc_dir = tmp_path / "warc"
    setting = '"auto"' if render == "auto" else '["127.0.0.1"]'
    conf = tmp_path / "render.toml"
    conf.write_text(f'[crawl]\nrender = {setting}\nwarc_dir = "{warc_dir}"\n')
    with HTTPSite(site.handle, max_requests=500) as http:
        seed_local(redis_url, http.base + "/p0", render, 2, "--config", str(conf))
        with (
            LocalWorkers(redis_url, 1, log_dir=tmp_path / "plain"),
            render_workers(redis_url, tmp_path / "render"),
        ):
            wait_finished(redis_url, render, timeout=240)
    rows = crawled(redis_url, render, tmp_path)
    want = site.expected(2)
    assert len(want) < site.pages  # max_depth cuts: the depths are checked, not only reached
    assert {path_of(r["url"]): r["depth"] for r in rows} == want
    assert all(r["outcome"] == "fetched" and r["rendered"] for r in rows), rows
    assert all(r["render_ms"] > 0 for r in rows)
    page_hits = {p: n for p, n in http.hits.items() if p in want}
    assert set(page_hits.values()) == {2 if render == "auto" else 1}, page_hits
    assert http.hits["/app.js"] == len(want)  # the browser asked for the script each time
    records = warc_records(warc_dir)
    assert sorted(records["conversion"]) == sorted(http.base + p for p in want)
    assert all(b"<li>" in body for body in records["conversion"].values())  # rendered DOM
    assert all(b"<li>" not in body for body in records["response"].values())  # as served
    # what the browser loaded through the crawl's fetch is archived too (replay needs it),
    # and not fetched again as a requisite (/app.js was asked for once a page, above)
    assert records["response"][http.base + "/app.js"] == APP_JS
    assert {http.base + "/api" + p for p in want} <= set(records["response"])


def warc_records(directory: Path) -> dict[str, dict[str, bytes]]:
    """Record type -> target URI -> payload, of every WARC file in `directory`."""
    from warcio.archiveiterator import ArchiveIterator

    found: dict[str, dict[str, bytes]] = {}
    for path in directory.glob("*.warc.gz"):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                uri = rec.rec_headers.get_header("WARC-Target-URI")
                found.setdefault(rec.rec_type, {})[uri] = rec.content_stream().read()
    return found


def test_a_plain_site_under_auto_renders_nothing(redis_url, conn, tmp_path):
    """No render worker runs: a page sent to the browser would keep the crawl from ending."""
    site = Site(pages=40)
    conf = tmp_path / "auto.toml"
    conf.write_text('[crawl]\nrender = "auto"\n')
    with HTTPSite(site.handle, max_requests=400) as http:
        seed_local(redis_url, http.base + "/p0.html", "plain", 3, "--config", str(conf))
        with LocalWorkers(redis_url, 1, log_dir=tmp_path):
            wait_finished(redis_url, "plain", timeout=120)
    rows = crawled(redis_url, "plain", tmp_path)
    assert len(rows) == len(site.expected(3))
    assert not any(r.get("rendered") for r in rows)
    assert Queue(keys.RENDER_QUEUE, connection=conn).count == 0


# -- the guard inside the browser ----------------------------------------------------------


class Canary:
    """A TCP server on 127.0.0.2 that counts the connections it accepts (and answers none)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.2", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.sock.accept()
                self.connections += 1
                conn.close()

    def close(self) -> None:
        self.sock.close()


def leaky_page(canary: str) -> bytes:
    """A page whose script and markup reach for the canary in every way a page can."""
    ws = canary.replace("http://", "ws://")
    return f"""<!doctype html><html><head><title>leaky</title>
<link rel="preconnect" href="{canary}/"><link rel="dns-prefetch" href="{canary}/">
<link rel="stylesheet" href="{canary}/secret.css"></head>
<body><div id="root"></div><img src="{canary}/secret.png"><iframe src="{canary}/secret"></iframe>
<script>
fetch('{canary}/secret').catch(() => {{}});
const x = new XMLHttpRequest(); x.open('GET', '{canary}/secret'); x.send();
try {{ new WebSocket('{ws}/secret'); }} catch (e) {{}}
fetch('/hop').catch(() => {{}});
fetch('/private/data').catch(() => {{}});
navigator.sendBeacon('{canary}/beacon', 'x');
document.getElementById('root').innerHTML = '<a href="/done">done</a>';
</script></body></html>""".encode()


def guard_site(canary: str):
    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/":
            reply(req, 200, leaky_page(canary))
        elif req.path == "/robots.txt":
            reply(req, 200, b"User-agent: *\nDisallow: /private\n", "text/plain")
        elif req.path == "/hop":  # a redirect of a page's own request to the canary
            reply(req, 302, b"", headers={"Location": f"{canary}/secret"})
        elif req.path == "/done":
            reply(req, 200, b"<html><title>done</title><body>done</body></html>")
        else:
            reply(req, 404, b"not found")

    return handle


@needs_chromium
def test_the_page_never_reaches_a_refused_address(redis_url, conn, tmp_path):
    """The crawl may reach 127.0.0.1 only (allow_networks), not the canary on 127.0.0.2:
    XHR, fetch, <img>, CSS, an iframe, a WebSocket, a beacon, a preconnect and a redirect of
    the page's own request all stay short of it, while the page itself renders; its request
    to a path robots.txt disallows is not made. The control crawl lets 127.0.0.2 through:
    the same page then reaches the canary."""
    canary = Canary()
    target = f"http://127.0.0.2:{canary.port}"
    try:
        with HTTPSite(guard_site(target), max_requests=200) as http:
            for crawl, allowed in (("guarded", '"127.0.0.1/32"'), ("control", '"127.0.0.0/8"')):
                conf = tmp_path / f"{crawl}.toml"
                conf.write_text(
                    f'[crawl]\nrender = ["127.0.0.1"]\nrender_block_media = false\n'
                    f"allow_networks = [{allowed}]\nrender_timeout = 8.0\n"
                )
                rqcrawl(
                    redis_url, "seed", http.base + "/", "--crawl", crawl, "--max-depth", "1",
                    "--delay", "0", "--no-sitemaps", "--config", str(conf),
                )  # fmt: skip
                with (
                    LocalWorkers(redis_url, 1, log_dir=tmp_path / "plain"),
                    render_workers(redis_url, tmp_path / "render"),
                ):
                    wait_finished(redis_url, crawl, timeout=180)
                if crawl == "guarded":
                    guarded = canary.connections
                    rows = {path_of(r["url"]): r for r in crawled(redis_url, crawl, tmp_path)}
        assert rows["/"]["rendered"] and rows["/done"]["outcome"] == "fetched"
        assert http.hits["/hop"] >= 1  # the redirect was asked for, its target refused
        assert http.hits["/private/data"] == 0  # the site's robots.txt holds for the page too
        assert guarded == 0, f"{guarded} connection(s) reached the canary"
        assert canary.connections > 0  # the control: the canary counts what gets through
    finally:
        canary.close()


# -- a render worker killed mid-page -------------------------------------------------------


SLOW_S = 3.0


def slow_js_site(req: BaseHTTPRequestHandler) -> None:
    """/ builds its links from /slow, which takes SLOW_S seconds; /a and /b are plain."""
    if req.path == "/":
        body = (
            b'<html><title>slow</title><body><div id="root"></div><script>'
            b"fetch('/slow').then(r => r.text()).then(t => "
            b"document.getElementById('root').innerHTML = t);</script></body></html>"
        )
        reply(req, 200, body)
    elif req.path == "/slow":
        time.sleep(SLOW_S)
        reply(req, 200, b'<a href="/a">a</a> <a href="/b">b</a>', "text/plain")
    elif req.path in ("/a", "/b"):
        reply(req, 200, b"<html><title>leaf</title><body>leaf</body></html>")
    else:
        reply(req, 404, b"not found")


@needs_chromium
def test_a_render_worker_killed_mid_page_loses_nothing(redis_url, conn, tmp_path):
    conf = tmp_path / "kill.toml"
    conf.write_text('[crawl]\nrender = ["127.0.0.1"]\njob_timeout = 40\n')
    with HTTPSite(slow_js_site, max_requests=100) as http:
        seed_local(redis_url, http.base + "/", "killed", 1, "--config", str(conf))
        with (
            LocalWorkers(redis_url, 1, log_dir=tmp_path / "plain"),
            render_workers(redis_url, tmp_path / "render1") as first,  # stopped however it ends
        ):
            wait_until(lambda: http.hits["/slow"] >= 1, 120, "the page to be mid-render")
            proc = first.procs[0]
            family = [c.pid for c in psutil.Process(proc.pid).children(recursive=True)]
            try:
                proc.kill()
                proc.wait()
            finally:
                stop_pids(family)  # its browser, if its driver left it
            with render_workers(redis_url, tmp_path / "render2"):
                s = wait_finished(redis_url, "killed", timeout=180)
    rows = {path_of(r["url"]): r for r in crawled(redis_url, "killed", tmp_path)}
    assert sorted(rows) == ["/", "/a", "/b"]
    assert rows["/"]["rendered"] and rows["/"]["attempts"] == 2
    assert s["recovered"] == 1 and s["in_flight"] == 0


# -- the browser's memory ------------------------------------------------------------------


@needs_chromium
def test_the_browser_is_recycled_so_memory_stays_flat():
    """After render_recycle_pages pages the browser starts anew: the memory of its processes
    after 3 rounds of pages is no higher than after the first (within slack)."""
    from rqcrawl.bench.jssite import serve
    from rqcrawl.fetch.http import fetch
    from rqcrawl.parse.extract import decode
    from rqcrawl.render.browser import PageBrowser

    site = JSSite(pages=12)
    server, base = serve(site)
    cfg = CrawlConfig.from_dict({"allow_private": True, "render_recycle_pages": 4})
    browser = PageBrowser()
    peaks = []
    try:
        for i in range(12):
            resp = fetch(f"{base}/p{i}", cfg, lambda _: None)
            text = decode(resp.body, resp.content_type)
            rendered = browser.render(resp, text, cfg, crawl="m", worker="w", allows=bool)
            assert f'href="/p{site.links[i][0]}"' in rendered.html
            if i % 4 == 2:  # the round's last page before the recycle
                peaks.append(browser.memory_mb())
        assert browser.launches == 3 and browser.memory_mb() < 50  # closed after page 12
        assert max(peaks) < 1.5 * peaks[0] + 100, peaks
        small = CrawlConfig.from_dict({"allow_private": True, "render_recycle_mb": 64})
        browser.render(resp, text, small, crawl="m", worker="w", allows=bool)
        assert browser.launches == 4 and browser._browser is None  # over 64 MB: recycled
    finally:
        browser.close()
        server.shutdown()


# -- the hand-off ------------------------------------------------------------------------------


def test_a_handed_off_url_waits_in_the_render_queue_longer_than_a_lease(conn):
    """A page that "auto" sent to the browser may wait in the render queue behind many others:
    the recovery pass must not take it for lost when a lease's time has passed."""
    from rqcrawl import api
    from rqcrawl.frontier import leases
    from rqcrawl.frontier.dispatch import Frontier
    from rqcrawl.frontier.messages import Slot

    url = "http://127.0.0.1:9/p0"
    cfg = CrawlConfig.from_dict({"render": "auto", "allow_private": True, "sitemaps": False})
    api.start(conn, [url], "handoff", cfg)
    frontier = Frontier(conn, "handoff", cfg.scoped_to([url]))
    job = Queue(keys.QUEUE_NAME, connection=conn).jobs[0]
    entry = frontier.claim(url, job.id).entry
    slot = Slot(frontier.key_of(url), seconds=0.01, answer="ok")  # its plain request's end
    assert entry is not None and frontier.hand_off(url, entry, slot)
    time.sleep(cfg.delay)  # the browser's request waits for its host's turn
    assert frontier.release_due() == 1
    render_jobs = Queue(keys.RENDER_QUEUE, connection=conn).jobs
    assert [j.func_name for j in render_jobs] == ["rqcrawl.render.render_url"]
    time.sleep(leases.LEASE + 1)
    assert frontier.reap() == 0
    assert frontier.claim(url, render_jobs[0].id).entry is not None  # still the render job's


@needs_chromium
def test_rqcrawl_crawl_runs_its_render_workers(tmp_path):
    """`rqcrawl crawl` with `render` set starts a render worker of its own (as many as
    --render-workers says) beside its plain ones, and the crawl ends complete."""
    site = JSSite(pages=6)
    conf = tmp_path / "spa.toml"
    conf.write_text('[crawl]\nrender = ["127.0.0.1"]\n')
    out = tmp_path / "out.jsonl"
    with HTTPSite(site.handle, max_requests=200) as http:
        proc = subprocess.run(
            [
                str(BIN / "rqcrawl"), "crawl", http.base + "/p0", "-o", str(out),
                "--data-dir", str(tmp_path / "data"), "--allow-private", "--delay", "0",
                "--max-depth", "5", "--workers", "1", "--config", str(conf),
            ],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "1 render worker(s)" in proc.stderr
    rows = read_jsonl(out)
    assert sorted(path_of(r["url"]) for r in rows) == sorted(site.expected(5))
    assert all(r["rendered"] for r in rows)


@needs_chromium
def test_bench_render_prints_rendered_beside_plain_rows():
    proc = subprocess.run(
        [str(BIN / "rqcrawl"), "bench", "--render", "--pages", "10", "--workers", "1"],
        capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = {
        line.split("  ")[0].strip(): line.split()[-6:]
        for line in proc.stdout.splitlines()
        if line.startswith(("server-side", "script-built"))
    }
    assert len(rows) == 4, proc.stdout
    for label, (pages, rendered, *_) in rows.items():
        assert pages == "10", (label, pages)
        assert rendered == ("10" if label.startswith("script-built") else "0"), label
    assert "reproduce: rqcrawl bench --render --pages 10" in proc.stdout
