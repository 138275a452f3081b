"""The render workers: `rq worker crawl-render -w rqcrawl.render.RenderWorker`.

A render job is a page job (rqcrawl.workers.jobs.run_job: the same claim, lease, robots.txt,
politeness, budgets and finish) whose visit has one more step: the HTML fetched with HTTP
(archived as the server sent it) is loaded in a headless Chromium (the system's, driven by
Playwright), and the links and fields are extracted from the DOM the scripts built.

The address guard holds inside the browser: every request of the page (the document itself,
subresources, XHR and fetch, frames, redirects) is intercepted and made by us, through the
crawl's guarded client (rqcrawl.fetch.http.send), then fulfilled into the page; the browser
itself connects to nothing. WebSockets are refused, service workers blocked, and the browser
is pointed at a proxy that does not exist, so that whatever might slip past interception
(a preconnect, WebRTC) has nowhere to go.

One browser per worker process, one page at a time, in a fresh context per page (no cookies
or storage carried over); the browser is restarted after `render_recycle_pages` pages or
once its processes use `render_recycle_mb` MB.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import logging
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from urllib.parse import urljoin

import psutil
from playwright.sync_api import Browser, Playwright, Route, sync_playwright
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Request as BrowserRequest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch import warc
from rqcrawl.fetch.clients.base import HttpResponse, TransportError
from rqcrawl.fetch.deadline import Watch
from rqcrawl.fetch.http import Archive, FetchError, Response, no_archive, send
from rqcrawl.parse.rendering import Rendered
from rqcrawl.parse.urls import host_of
from rqcrawl.workers import jobs
from rqcrawl.workers.worker import CrawlWorker

log = logging.getLogger(__name__)

CHROMIUM = "/usr/bin/chromium"  # Debian's package `chromium`; no browser is downloaded
# A proxy that does not exist: a connection the browser would make itself (none should: every
# request is intercepted) is refused on the spot, before any byte leaves for a real address.
DEAD_PROXY = "http://127.0.0.1:9"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    f"--proxy-server={DEAD_PROXY}",
    "--proxy-bypass-list=<-loopback>",  # loopback goes to the dead proxy too
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--dns-prefetch-disable",
]
# WebRTC's peer connections send UDP (STUN, TURN) past the proxy and the route, on Chromium
# 156 whatever --force-webrtc-ip-handling-policy says: a page has none (the second line of
# defence; the first is a browser with no network at all, `offline`).
NO_WEBRTC = """
for (const name of ["RTCPeerConnection", "webkitRTCPeerConnection", "RTCDataChannel",
                    "RTCIceCandidate", "RTCSessionDescription"]) {
  try { Object.defineProperty(window, name, {value: undefined, configurable: false}); }
  catch (e) {}
}
"""
MEDIA = frozenset({"image", "font", "media"})
QUIET_S = 0.5  # what "the page went quiet" waits for (Playwright's networkidle: 500 ms)
# Headers of a response that describe how it travelled, not its content: the body handed to
# the page is already decoded and whole.
_HOP = frozenset({"content-encoding", "content-length", "transfer-encoding", "connection"})
_NOT_FORWARDED = frozenset({"host", "content-length", "connection", "cookie", "user-agent"})
_CHUNK = 64 * 1024


class PageBrowser:
    """The process's browser, launched on first use and recycled (see the module docstring)."""

    def __init__(self, executable: str = CHROMIUM):
        self.executable = executable
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self.pages = 0  # pages rendered by the current browser
        self.launches = 0
        self._driver: list[psutil.Process] = []  # Playwright's driver: Chromium runs under it

    def _ensure(self) -> Browser:
        if self._browser is None or not self._browser.is_connected():
            self.close()
            before = {p.pid for p in psutil.Process().children()}
            self._playwright = sync_playwright().start()
            self._driver = [p for p in psutil.Process().children() if p.pid not in before]
            self._browser = self._playwright.chromium.launch(
                executable_path=offline(self.executable), args=CHROMIUM_ARGS, headless=True
            )
            self.pages = 0
            self.launches += 1
        return self._browser

    def close(self) -> None:
        """Stop the browser and its driver (errors of a browser already gone are ignored)."""
        for part in (self._browser, self._playwright):
            if part is None:
                continue
            try:
                part.close() if part is self._browser else part.stop()
            except Exception as exc:  # noqa: BLE001 - a crashed browser closes with an error
                log.debug("closing the browser: %s", exc)
        self._browser = self._playwright = None
        self._driver = []

    def memory_mb(self) -> float:
        """Memory of the browser's processes (the driver and Chromium's, under it), in MB:
        proportional set size, so that pages shared between Chromium's processes count once
        (summed RSS counts them once per process, about twice the truth, and recycled an
        idle browser near the default limit); USS where the system has no PSS."""
        total = 0
        for driver in self._driver:
            try:
                family = [driver, *driver.children(recursive=True)]
            except psutil.Error:  # the driver is gone
                continue
            for process in family:
                try:
                    info = process.memory_full_info()
                except psutil.Error:
                    continue
                total += getattr(info, "pss", info.uss)
        return total / 1e6

    def render(
        self,
        resp: Response,
        text: str,
        cfg: CrawlConfig,
        *,
        crawl: str,
        worker: str | None,
        allows: Callable[[str], bool],
    ) -> Rendered:
        """The page of `resp` (its body decoded as `text`) as the browser leaves it after
        its scripts ran, what it loaded archived in the crawl's WARC files (`warc_dir`);
        FetchError (transient) if the browser failed."""
        try:
            rendered = self._render(resp, text, cfg, allows, warc.archive(crawl, cfg, worker))
        except PlaywrightError as exc:
            self.close()  # a browser that failed once is not trusted with the next page
            message = f"browser: {_first_line(exc)}"
            raise FetchError("render_failed", message, transient=True) from None
        except BaseException:  # the job's timeout, a stop: the browser may be mid-call
            self.close()
            raise
        self._after_page(cfg)
        if cfg.warc_dir and cfg.render_dom_warc:
            warc.conversion(crawl, cfg, worker)(resp.final_url, rendered.html)
        return rendered

    def _render(
        self,
        resp: Response,
        text: str,
        cfg: CrawlConfig,
        allows: Callable[[str], bool],
        archive: Archive,
    ) -> Rendered:
        context = self._ensure().new_context(
            user_agent=cfg.agent, service_workers="block", accept_downloads=False
        )
        context.add_init_script(NO_WEBRTC)
        started = time.monotonic()
        try:
            pages = Interceptor(resp, text, cfg, allows, archive)
            context.route("**/*", pages.route)
            context.route_web_socket("**/*", lambda ws: ws.close(code=1008, reason="refused"))
            page = context.new_page()
            deadline = cfg.render_timeout * 1000
            timed_out = False
            try:
                page.goto(resp.final_url, wait_until="load", timeout=deadline)
                left = deadline - (time.monotonic() - started) * 1000
                page.wait_for_load_state("networkidle", timeout=max(1.0, left))
            except PlaywrightTimeout:
                timed_out = True  # the DOM as it stands: many applications never go quiet
            html = page.content()
            if cfg.render_screenshot_dir:
                page.screenshot(path=_screenshot_path(cfg.render_screenshot_dir, resp.final_url))
        finally:
            context.close()
        ms = int((time.monotonic() - started) * 1000)
        return Rendered(html, ms, timed_out, frozenset(pages.loaded))

    def _after_page(self, cfg: CrawlConfig) -> None:
        """Recycle the browser after render_recycle_pages pages or past render_recycle_mb."""
        self.pages += 1
        if self.pages >= cfg.render_recycle_pages or self.memory_mb() > cfg.render_recycle_mb:
            self.close()


class Interceptor:
    """Every request of one page, made by us under the address guard and fulfilled into it:
    the document from the response already fetched, the rest through the crawl's guarded
    session, each GET's responses into `archive` (its URLs in `loaded`). Requests to the
    page's own host obey its robots.txt; media may be skipped."""

    def __init__(
        self,
        resp: Response,
        text: str,
        cfg: CrawlConfig,
        allows: Callable[[str], bool],
        archive: Archive = no_archive,
    ) -> None:
        self.resp, self.text, self.cfg, self.allows = resp, text, cfg, allows
        self.archive = archive if archive is not no_archive else None
        self.loaded: set[str] = set()
        self.host = host_of(resp.final_url)
        self.document_served = False

    def route(self, route: Route, request: BrowserRequest) -> None:
        try:
            self._route(route, request)
        except PlaywrightError as exc:  # the page went away meanwhile
            log.debug("route of %s: %s", request.url, exc)

    def _route(self, route: Route, request: BrowserRequest) -> None:
        if request.is_navigation_request() and request.frame.parent_frame is None:
            if self.document_served:  # the page stays the page fetched (links, record)
                route.abort("aborted")
                return
            self.document_served = True
            headers = _content_headers(self.resp.headers)
            route.fulfill(status=self.resp.status, headers=headers, body=self.resp.body)
            return
        url = request.url
        if not url.startswith(("http://", "https://")):
            route.abort("blockedbyclient")
        elif self.cfg.render_block_media and request.resource_type in MEDIA:
            route.abort("blockedbyclient")
        elif host_of(url) == self.host and not self.allows(url):
            route.abort("blockedbyclient")  # the site owner's robots.txt holds for the page too
        else:
            self._forward(route, request)

    def _forward(self, route: Route, request: BrowserRequest) -> None:
        archive = self.archive if self.archive and request.method == "GET" else None
        try:
            status, headers, body = guarded_request(
                self.cfg, request.method, request.url, request.headers, request.post_data_buffer,
                archive and self._archived,
            )  # fmt: skip
        except TransportError as exc:
            log.debug("page request %s: %s", request.url, exc)
            route.abort("addressunreachable" if exc.refused else "failed")
            return
        except FetchError:
            route.abort("failed")
            return
        route.fulfill(status=status, headers=headers, body=body)

    def _archived(self, resp: HttpResponse, body: bytes | None) -> None:
        self.archive(resp, body)
        self.loaded.add(resp.url)


def guarded_request(
    cfg: CrawlConfig,
    method: str,
    url: str,
    headers: Mapping[str, str],
    data: bytes | None,
    archive: Archive | None = None,
) -> tuple[int, dict[str, str], bytes]:
    """A request of a page, made as a fetch is (rqcrawl.fetch.http: the guarded client, its
    timeouts and deadline, max_body_bytes), redirects followed by hand so that every hop
    connects through the guard; each response into `archive` (a redirect's without its
    body). Raises TransportError and FetchError."""
    sent = {k: v for k, v in headers.items() if k.lower() not in _NOT_FORWARDED}
    sent["User-Agent"] = cfg.agent
    with Watch(cfg.download_timeout) as watch:
        for _ in range(cfg.max_redirects + 1):
            resp = send(cfg, method, url, sent, data=data)
            with resp:
                if not resp.is_redirect:
                    body = _body(resp, cfg)
                    if archive:
                        archive(resp, body)
                    return resp.status, _content_headers(resp.headers), body
                if archive:
                    archive(resp, None)
                url = urljoin(url, resp.headers["location"])
                if resp.status in (301, 302, 303) and method != "HEAD":
                    method, data = "GET", None
        if watch.fired:
            raise FetchError("download_timeout", "page request over download_timeout")
    raise FetchError("too_many_redirects", f"more than {cfg.max_redirects} redirects")


def _body(resp: HttpResponse, cfg: CrawlConfig) -> bytes:
    chunks, size = [], 0
    for chunk in resp.iter_bytes(_CHUNK):
        size += len(chunk)
        if size > cfg.max_body_bytes:
            raise FetchError("too_large", f"body over {cfg.max_body_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _content_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _HOP}


def _screenshot_path(directory: str, url: str) -> str:
    Path(directory).mkdir(parents=True, exist_ok=True)
    return str(Path(directory) / f"{hashlib.sha1(url.encode()).hexdigest()[:20]}.png")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


@functools.cache
def offline(executable: str) -> str:
    """What to launch for `executable`: the browser in a network namespace of its own, with
    no interface up (`unshare --net`, as root or with a user namespace), when this machine
    allows one: every request of a page goes through our route and the address guard
    anyway (Playwright talks to Chromium over a pipe), so the browser needs no network, and
    nothing a page does (WebRTC's UDP, a socket Chromium opens itself) can leave it. Where
    no namespace can be made, the browser itself, with NO_WEBRTC and the dead proxy."""
    unshare = shutil.which("unshare")
    for flags in (["--net"], ["--net", "--map-root-user"]):
        if (
            unshare
            and subprocess.run([unshare, *flags, "true"], capture_output=True).returncode == 0
        ):
            directory = tempfile.mkdtemp(prefix="rqcrawl-browser-")
            atexit.register(shutil.rmtree, directory, ignore_errors=True)  # not left in /tmp
            wrapper = Path(directory) / "chromium-offline"
            wrapper.write_text(
                f'#!/bin/sh\nexec {unshare} {" ".join(flags)} -- {executable} "$@"\n'
            )
            wrapper.chmod(0o700)
            return str(wrapper)
    log.warning(
        "render: no network namespace on this machine; the browser keeps its network "
        "(WebRTC is removed from pages, other requests go through the guard)"
    )
    return executable


browser = PageBrowser()  # the process's one browser


@jobs.inert_failures
def render_url(crawl: str, url: str, depth: int) -> str:
    """Visit `url` of `crawl` at `depth` in the browser (the render queue's job function)."""
    return jobs.run_job(crawl, url, depth, browser.render)


class RenderWorker(CrawlWorker):
    """The crawl worker of the render queue: `rq worker crawl-render -w
    rqcrawl.render.RenderWorker`; its browser is closed when it stops. One page at a time:
    the browser, not the network, is what a render worker waits for."""

    runs_slots = False

    def work(self, *args, **kwargs) -> bool:
        try:
            return super().work(*args, **kwargs)
        finally:
            browser.close()
