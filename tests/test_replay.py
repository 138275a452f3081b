"""An archive replays as the page looked: a site whose pages use a stylesheet (with an
@import, a font and a background image by url()), a script and images is crawled with
`rqcrawl crawl --wacz`, its live server stopped, the package added to pywb by the steps
docs/howto/export.md gives, and a replayed page opened in headless Chromium: the
stylesheets' rules apply, every image decoded, every requisite came from the archive and no
request left for the live site.

pywb 2.10 pins redis==2.10.6, which rq (redis>=5) cannot share a virtualenv with: it lives
in a virtualenv of its own, `.venv-pywb` at the repository's root (made by .ci/run:
`python3 -m venv .venv-pywb && .venv-pywb/bin/pip install pywb==2.10.0`), or the directory
of its commands in RQCRAWL_TEST_PYWB."""

from __future__ import annotations

import os
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest
from helpers import ROOT, wait_until
from replaysite import IMPORTED_COLOR, MARKER_COLOR, REQUISITES, handler
from servers import HTTPSite, free_port
from test_render import CHROMIUM, needs_chromium
from test_wacz import embedded_crawl, pages_of

PYWB = Path(os.environ.get("RQCRAWL_TEST_PYWB") or ROOT / ".venv-pywb" / "bin")
needs_pywb = pytest.mark.skipif(
    not (PYWB / "wayback").exists(),
    reason=f"needs pywb 2.10 in {PYWB} (python3 -m venv .venv-pywb && "
    ".venv-pywb/bin/pip install pywb==2.10.0), or RQCRAWL_TEST_PYWB",
)


FRAME = "replay_iframe"  # pywb's frame of the replayed page
REPLAYED = re.compile(r"http://127\.0\.0\.1:\d+/docs/[a-z]{2}_/(.+)")  # (the archived URL)


def wb(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        [str(PYWB / "wb-manager"), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def answers(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.status == 200


@needs_pywb
@needs_chromium
@pytest.mark.timeout(300)
def test_a_crawled_page_replays_in_pywb_as_it_looked(tmp_path):
    with HTTPSite(handler(), max_requests=100) as live:
        crawl = embedded_crawl(tmp_path, live.base, "--max-depth", "1")
        _, err = crawl.communicate(timeout=180)
        assert crawl.returncode == 0, err
    live_base = live.base  # stopped from here on: a request that leaks gets no answer
    wacz = tmp_path / "crawl.wacz"
    assert sorted(pages_of(wacz)) == [live_base + "/", live_base + "/two.html"]

    # docs/howto/export.md: wb-manager init, add --unpack-wacz, wayback
    assert "does not contain any indices" not in wb(tmp_path, "init", "docs")
    assert "does not contain any indices" not in wb(
        tmp_path, "add", "--unpack-wacz", "docs", str(wacz)
    )
    port = free_port()
    wayback = subprocess.Popen(
        [str(PYWB / "wayback"), "-b", "127.0.0.1", "-p", str(port)],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        replay = f"http://127.0.0.1:{port}/docs/"
        wait_until(lambda: answers(replay), 60, "wayback", ignoring=(OSError,))
        seen = replayed(replay + live_base + "/")  # the URL the docs say to open
    finally:
        wayback.terminate()
        wayback.wait(30)
    assert seen["body_color"] == MARKER_COLOR  # the stylesheet applies
    assert seen["h1_color"] == IMPORTED_COLOR  # ... and the one it @imports
    assert seen["js"] == "ran"  # app.js ran
    assert seen["images"] and all(w > 0 for w in seen["images"].values()), seen["images"]
    assert [u for u in seen["requests"] if u.startswith(live_base)] == []
    archived = {m.group(1) for u in seen["ok"] if (m := REPLAYED.match(u))}
    home_loads = set(REQUISITES) - {"/img/other.png"}  # (page two's own image)
    for path in home_loads:  # the font and the background images too, from the archive
        assert live_base + path in archived, (path, sorted(archived))


def replayed(url: str) -> dict:
    """What headless Chromium shows of `url` (pywb's frame around the replayed page): the
    page's computed colours, `data-js`, each image's naturalWidth, every request made and
    the URLs answered 200."""
    from playwright.sync_api import sync_playwright

    requests_made: list[str] = []
    ok: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM))
        try:
            page = browser.new_page()
            page.on("request", lambda r: requests_made.append(r.url))
            page.on("response", lambda r: ok.append(r.url) if r.status == 200 else None)
            page.goto(url, wait_until="load")
            replay = wait_until(lambda: page.frame(name=FRAME), 60, "the replay frame")
            replay.wait_for_load_state("load")
            replay.wait_for_function("document.fonts.status === 'loaded'")
            seen = replay.evaluate(
                """() => ({
                  body_color: getComputedStyle(document.body).color,
                  h1_color: getComputedStyle(document.querySelector('h1')).color,
                  js: document.documentElement.dataset.js,
                  images: Object.fromEntries([...document.images].map(
                      i => [i.id, i.complete ? i.naturalWidth : 0])),
                })"""
            )
        finally:
            browser.close()
    return seen | {"requests": requests_made, "ok": ok}
