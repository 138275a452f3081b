"""The real web's shape at default settings: a host that pushes back (429), a robots.txt that
hangs and a page that hangs each hold their own host, never another host's requests, and the
depths stay exact (rqcrawl crawl, as a user types it, with no --delay)."""

from __future__ import annotations

import itertools
import subprocess
import threading
import time
from contextlib import ExitStack

from helpers import BIN, read_jsonl
from servers import HTTPSite, reply
from test_exact_depth import LinkSite

HANG = 6.0  # seconds the hanging robots.txt and the hanging page take to answer
CHAIN = 8  # pages of the fast host's chain: one per level, each level held by the others


class PushBack(LinkSite):
    """A site whose first two requests for pages answer 429 with Retry-After: 3."""

    def __init__(self, links: dict[str, list[str]]):
        super().__init__(links)
        self.pushed = 0
        self.lock = threading.Lock()

    def handle(self, req) -> None:
        if req.path != "/robots.txt":
            with self.lock:
                self.pushed += 1
                push = self.pushed <= 2
            if push:
                reply(req, 429, b"slow down", headers={"Retry-After": "3"})
                return
        super().handle(req)


class HangingRobots(LinkSite):
    def handle(self, req) -> None:
        if req.path == "/robots.txt":
            time.sleep(HANG)
        super().handle(req)


def test_a_pushing_back_host_a_hanging_robots_txt_and_a_hanging_page_hold_no_other_host(
    tmp_path,
):
    fan = {"/": [f"/f{i}" for i in range(4)]} | {f"/f{i}": [] for i in range(4)}
    chain = {f"/c{i}": [f"/c{i + 1}"] for i in range(CHAIN)} | {f"/c{CHAIN}": []}
    sites = {
        "push": PushBack(fan),
        "robots": HangingRobots(fan),
        "slow": LinkSite({"/": ["/hang", "/s1"], "/hang": [], "/s1": []}, slow={"/hang": HANG}),
        "chain": LinkSite(chain),
    }
    out = tmp_path / "out.jsonl"
    with ExitStack() as stack:
        http = {
            name: stack.enter_context(HTTPSite(site.handle, host=f"127.0.0.{i + 2}"))
            for i, (name, site) in enumerate(sites.items())
        }
        seeds = [http[n].base + "/" for n in ("push", "robots", "slow")]
        seeds.append(http["chain"].base + "/c0")
        proc = subprocess.run(
            [str(BIN / "rqcrawl"), "crawl", *seeds, "-o", str(out), "--allow-private",
             "--max-depth", str(CHAIN), "--data-dir", str(tmp_path / "data")],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    records = {r["url"]: r for r in read_jsonl(out)}

    # The chain went at its own pace (the default delay of 1 s) from its first page to its
    # last, while the others pushed back, hung or waited: no gap of 2 s between two of its
    # requests, although each of its pages is a level deeper than the one before; and it
    # ended within its pace and a hang of the crawl's first request to any host (timed from
    # there, not from the command's start: a loaded CI machine took 5.9 s to start it).
    assert sum(path.startswith("/c") for _, path in http["chain"].log) == CHAIN + 1
    starts = [t for t, path in http["chain"].log if path != "/robots.txt"]  # (and sitemaps)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert max(gaps) < 2.0, gaps
    first = min(t for site in http.values() for t, _ in site.log)
    assert starts[-1] - first < CHAIN * 1.0 + HANG, (starts[-1] - first, gaps)

    # Each slow host was slow for itself alone, and ended with all its pages.
    for name in ("push", "robots", "slow"):
        base = http[name].base
        fetched = {u for u, r in records.items() if u.startswith(base) and r["status"] == 200}
        assert len(fetched) == len(sites[name].links), (name, sorted(fetched))
    push_times = [t for t, p in http["push"].log if p == "/" or p.startswith("/f")]
    assert push_times[-1] - push_times[0] >= 3.0  # its Retry-After was kept

    # Exact depth: every page at its click distance from its seed.
    for url, r in records.items():
        path = url.split("/", 3)[3]
        want = int(path[1:]) if path.startswith("c") else (0 if path == "" else 1)
        assert r["depth"] == want, (url, r["depth"])
