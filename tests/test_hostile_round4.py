"""Hostile input, round 4, against a real hostile site: what a server writes reaches
rq-dashboard's job pages as inert text (opened in headless Chromium: no payload runs), pages
with charsets that are no text encoding or with malformed refreshes end with an outcome, and
an IPvFuture redirect puts no control byte on the terminal."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time

import pytest
from helpers import BIN, env_with, rqcrawl, seed_local, wait_finished
from servers import HTTPSite, reply
from test_dashboard import dashboard, dashboard_jobs  # noqa: F401 (a fixture)
from test_render import CHROMIUM, needs_chromium

from rqcrawl import api
from rqcrawl.workers.runner import LocalWorkers

IPFUTURE = "http://[v1.:\x1bc\x1b[31m\x07]/"
PAGES = {
    "/redirect-xss": (302, {"Location": "http://[<img src=x onerror=alert('meta')>"}, b""),
    "/refresh-xss": (
        200,
        {},
        b"<meta http-equiv=refresh content=\"0; url=http://[<img src=x onerror=alert('exc')>]/\">",
    ),
    "/refresh-bracket": (200, {}, b'<meta http-equiv=refresh content="0; url=http://[">'),
    "/refresh-port": (200, {}, b'<meta http-equiv=refresh content="0; url=http://a:99999/">'),
    "/idna": (200, {"Content-Type": "text/html; charset=idna"}, b"<title>idna</title>"),
    "/idna-meta": (200, {}, b"<meta charset=idna><title>idna in meta</title>"),
    "/rot13": (200, {"Content-Type": "text/html; charset=rot13"}, b"<title>rot13</title>"),
    "/escape": (
        200,
        {"Content-Type": "text/html; charset=unicode_escape"},
        b"<title>\\ud800 surrogate</title>",
    ),
    "/ipfuture": (302, {"Location": IPFUTURE}, b""),
    "/quote'&amp": (200, {}, b"<title>a page whose URL has a quote and an ampersand</title>"),
}


def hostile(req) -> None:
    if req.path == "/":
        links = "".join(f'<a href="{p}">x</a>' for p in PAGES)
        reply(req, 200, f"<html><body>{links}</body></html>".encode())
    elif req.path in PAGES:
        status, headers, body = PAGES[req.path]
        ctype = headers.pop("Content-Type", "text/html") if "Content-Type" in headers else None
        reply(req, status, body, ctype or "text/html", headers=dict(headers))
    else:
        reply(req, 404, b"no")


@needs_chromium
def test_hostile_pages_end_with_an_outcome_and_reach_the_dashboard_inert(
    redis_url,
    conn,
    dashboard,  # noqa: F811
    tmp_path,
):
    from playwright.sync_api import sync_playwright

    with HTTPSite(hostile, max_requests=200, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/", "evil", 1, "--delay", "0", "--no-sitemaps")
        with LocalWorkers(redis_url, 1, log_dir=tmp_path):
            wait_finished(redis_url, "evil")
    logs = "".join(p.read_text() for p in tmp_path.glob("*.log"))
    records = {r["url"].removeprefix(http.base): r for r in api.records(conn, "evil")}

    # Every page ended with a recorded outcome, none lost, no traceback in the worker's log.
    assert "Traceback" not in logs, logs
    assert all(r["outcome"] != "lost" for r in records.values()), records
    for path in ("/idna", "/idna-meta", "/rot13", "/escape"):
        assert records[path]["outcome"] == "fetched", records[path]
    for path in ("/refresh-xss", "/refresh-bracket", "/refresh-port"):
        assert records[path]["outcome"] == "fetched", records[path]  # the refresh not taken
    assert records["/ipfuture"]["outcome"] == "failed"  # a redirect to no URL at all
    assert "\x1b" not in logs and "\x07" not in logs

    # rq-dashboard's job page of every job: no payload runs in a real browser.
    base = dashboard.removesuffix("/0/data")
    jobs = dashboard_jobs(dashboard, "finished") + dashboard_jobs(dashboard, "failed")
    assert len(jobs) >= len(PAGES)
    alerts: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            page = browser.new_page()
            page.on("dialog", lambda d: (alerts.append(d.message), d.dismiss()))
            for job in jobs:
                page.goto(f"{base}/0/view/job/{job['id']}")
                page.wait_for_load_state("networkidle")
                html = page.content()
                assert "<img src=x" not in html, job["id"]
        finally:
            browser.close()
    assert alerts == []


@pytest.mark.parametrize("command", ["inspect", "crawl"])
def test_an_ipfuture_redirect_puts_no_control_byte_on_the_terminal(redis_url, tmp_path, command):
    def handle(req) -> None:
        if req.path == "/":
            reply(req, 302, b"", headers={"Location": IPFUTURE})
        else:
            reply(req, 404, b"no")

    with HTTPSite(handle, max_requests=20, max_seconds=60) as http:
        if command == "inspect":
            seed_local(redis_url, http.base + "/", "ipf", 1, "--delay", "0", "--no-sitemaps")
            with LocalWorkers(redis_url, 1):
                wait_finished(redis_url, "ipf")
            out = rqcrawl(redis_url, "inspect", "ipf", http.base + "/")
            shown = out.stdout + out.stderr
        else:
            proc = subprocess.run(
                [str(BIN / "rqcrawl"), "crawl", http.base + "/", "-o", str(tmp_path / "o.jsonl"),
                 "--allow-private", "--data-dir", str(tmp_path / "data")],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            shown = proc.stdout + proc.stderr
    assert "Traceback" not in shown
    assert "\x1b" not in shown and "\x07" not in shown, shown
    assert "v1." in shown or "bad host" in shown or "invalid" in shown, shown  # said, escaped


@pytest.mark.parametrize(
    "args, toml, env, said",
    [
        (
            ["--max-depth", "9" * 400],
            None,
            {},
            "'max_depth' must be >= 0, not a number of 400 digits",
        ),
        ([], "[crawl]\nmax_pages = " + "9" * 400 + "\n", {}, "'max_pages' must be >= 0"),
        ([], '[crawl]\nuser_agent = "rqcrawl\u20ac-bot"\n', {}, "'user_agent' must be ASCII"),
        (["--config", "/dev/zero"], None, {}, "/dev/zero: larger than 1024 KiB"),
    ],
)
def test_bad_settings_are_one_line_errors(redis_url, tmp_path, args, toml, env, said):
    if toml is not None:
        (tmp_path / "c.toml").write_text(toml, encoding="utf-8")
        args = [*args, "--config", str(tmp_path / "c.toml")]
    out = rqcrawl(redis_url, "seed", "http://a.test/", *args, check=False)
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and said in lines[0], lines


def test_a_bad_metrics_port_stops_the_worker_in_one_line(redis_url):
    proc = subprocess.run(
        [str(BIN / "rq"), "worker", "crawl", "-w", "rqcrawl.workers.CrawlWorker", "--url",
         redis_url, "--burst"],
        capture_output=True, text=True, timeout=60, env={**env_with(redis_url),
                                                         "RQCRAWL_METRICS_PORT": "99999"},
    )  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "RQCRAWL_METRICS_PORT must be a port number from 1 to 65535, not '99999'" in proc.stderr


class Canary:
    """UDP and TCP listeners on one port of 127.0.0.9 that note every datagram and
    connection (a STUN or TURN server a page points WebRTC at)."""

    def __init__(self) -> None:
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.9", 0))
        self.port = self.udp.getsockname()[1]
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(("127.0.0.9", self.port))
        self.tcp.listen()
        for s in (self.udp, self.tcp):
            s.settimeout(0)
        self.seen: list[str] = []

    def look(self) -> list[str]:
        for s, what in ((self.udp, "udp"), (self.tcp, "tcp")):
            with contextlib.suppress(BlockingIOError):
                while True:
                    if what == "udp":
                        self.seen.append(f"udp {s.recv(2048)[:8]!r}")
                    else:
                        s.accept()[0].close()
                        self.seen.append("tcp connection")
        return self.seen

    def close(self) -> None:
        self.udp.close()
        self.tcp.close()


@needs_chromium
def test_a_rendered_page_sends_nothing_by_webrtc(redis_url, tmp_path):
    from test_render import render_workers

    canary = Canary()
    at = f"127.0.0.9:{canary.port}"
    script = f"""<html><title>rtc</title><script>
      const servers = [{{urls: "stun:{at}"}},
        {{urls: "turn:{at}?transport=udp", username: "u", credential: "p"}},
        {{urls: "turn:{at}?transport=tcp", username: "u", credential: "p"}},
        {{urls: "turns:{at}?transport=tcp", username: "u", credential: "p"}}];
      try {{
        const pc = new RTCPeerConnection({{iceServers: servers}});
        pc.createDataChannel("x");
        pc.createOffer().then(o => pc.setLocalDescription(o));
      }} catch (e) {{ document.title = "no webrtc: " + e.name; }}
    </script></html>""".encode()

    def handle(req) -> None:
        reply(req, 200, script) if req.path == "/" else reply(req, 404, b"no")

    conf = tmp_path / "render.toml"
    conf.write_text('[crawl]\nrender = ["127.0.0.1"]\n')
    try:
        with HTTPSite(handle, max_requests=20, max_seconds=120) as http:
            seed_local(redis_url, http.base + "/", "rtc", 0, "--config", str(conf))
            with (
                LocalWorkers(redis_url, 1, log_dir=tmp_path / "plain"),
                render_workers(redis_url, tmp_path / "render"),
            ):
                wait_finished(redis_url, "rtc", timeout=120)
                time.sleep(3)  # ICE gathering would have sent its first packets by now
        assert canary.look() == []
    finally:
        canary.close()
