"""Prometheus metrics: `rqcrawl metrics --port N` and the recommended worker's opt-in endpoint,
scraped over HTTP while a real crawl runs and after it ends."""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import urllib.request
from http.server import BaseHTTPRequestHandler

from helpers import BIN, env_with, rqcrawl, seed_local, wait_finished, wait_until
from prometheus_client.parser import text_string_to_metric_families
from servers import HTTPSite, free_port, reply

from rqcrawl.workers.runner import LocalWorkers

NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get(url: str) -> str:
    with NO_PROXY.open(url, timeout=10) as resp:
        return resp.read().decode()


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """Every sample of the endpoint as {(name, sorted labels): value}, once it answers."""
    text = wait_until(lambda: get(url), 30, f"{url} to answer", ignoring=(OSError,), every=0.2)
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def site(pages: int):
    def handle(req: BaseHTTPRequestHandler) -> None:
        if req.path == "/gone":
            reply(req, 404, b"gone")
            return
        i = int(req.path.strip("/") or 0)
        links = "".join(f'<a href="/{k}">{k}</a>' for k in range(1, pages)) if i == 0 else ""
        reply(req, 200, f"<title>{i}</title>{links}<a href='/gone'>x</a>".encode())

    return handle


def test_metrics_are_scraped_while_a_crawl_runs_and_after(redis_url):
    port, worker_port = free_port(), free_port()
    exporter = subprocess.Popen(
        [str(BIN / "rqcrawl"), "metrics", "--port", str(port)],
        env=env_with(redis_url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    crawl = (("crawl", "m"),)
    try:
        with HTTPSite(site(12), max_requests=100, max_seconds=120) as http:
            seed_local(
                redis_url, http.base + "/", "m", 1, "--delay", "0.3", "--no-robots",
                "--retries", "0",
            )  # fmt: skip
            env = {"RQCRAWL_METRICS_PORT": str(worker_port)}
            with LocalWorkers(redis_url, 1, env=env):
                during = wait_until(  # 13 URLs 0.3 s apart: scrape mid-crawl
                    lambda: scrape(f"http://127.0.0.1:{port}/metrics"),
                    60,
                    "2 pages fetched",
                    accept=lambda m: m.get(("rqcrawl_pages_fetched_total", crawl), 0) >= 2,
                    every=0.1,
                )
                assert during[("rqcrawl_pages_fetched_total", crawl)] < 12
                waiting = ("rqcrawl_urls_in_flight", crawl), ("rqcrawl_urls_held", crawl)
                assert sum(during[w] for w in waiting) >= 1
                assert during[("rqcrawl_urls_admitted_total", crawl)] == 13
                from_worker = scrape(f"http://127.0.0.1:{worker_port}/metrics")
                assert from_worker[("rqcrawl_urls_admitted_total", crawl)] == 13
                wait_finished(redis_url, "m", timeout=60)
        after = scrape(f"http://127.0.0.1:{port}/metrics")
    finally:
        exporter.terminate()
        exporter.wait(10)
    assert after[("rqcrawl_pages_fetched_total", crawl)] == 12
    assert after[("rqcrawl_pages_failed_total", (("crawl", "m"), ("reason", "http_404")))] == 1
    assert after[("rqcrawl_urls_in_flight", crawl)] == 0
    assert after[("rqcrawl_fetch_duration_seconds_count", crawl)] == 13
    inf = after[("rqcrawl_fetch_duration_seconds_bucket", (("crawl", "m"), ("le", "+Inf")))]
    assert inf == 13 and after[("rqcrawl_fetch_duration_seconds_sum", crawl)] > 0
    assert after[("rqcrawl_downloaded_bytes_total", crawl)] > 0
    assert 0 < after[("rqcrawl_bloom_fill_ratio", crawl)] < 1
    assert after[("rqcrawl_crawl_state", (("crawl", "m"), ("state", "finished")))] == 1


def test_a_taken_port_is_a_one_line_error(redis_url):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = rqcrawl(redis_url, "metrics", "--port", str(port), check=False)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"Error: cannot serve on 127.0.0.1:{port}: {os.strerror(errno.EADDRINUSE)}"
    ]
