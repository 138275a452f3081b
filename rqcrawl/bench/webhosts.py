"""The hosts of `rqcrawl bench --web N`: a small web as a site owner's audit meets it, each
host deterministic from one seed (so two runs, or two crawlers, meet the same web).

Every host has 5-20 pages (`/` and `/pK.html`, page k linking to pages 4k+1..4k+4, so every
page is within depth 2 of `/`), two more links to its own pages and one or two to other
hosts' pages, and a link to one of its pages under a session or tracking variant
(`?utm_source=...`, `;jsessionid=...`, `?sid=...`: the same logical page). Its `/` also links
to `/private/linked.html` (Disallowed by its robots.txt unless that file gives no rules) and,
with rel=nofollow only, to `/nf.html`. Each answer waits 50-300 ms (drawn per path and per
request from the seed).

On top of that, host i misbehaves in the i-th way of `robots_roles` (its robots.txt) and of
`page_roles` (its pages), as ROBOTS_ROLES and PAGE_ROLES describe; the default lists are the
issue's audit (issue 34), in that order, then a robots.txt down for a restart and one that
takes 30 s to answer (issue 46), so that `--web N` with N below their length keeps the
first ones.
"""

from __future__ import annotations

import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

OUTAGE = 20.0  # seconds robots.txt answers 503 on a "503-20s" host (a restart)
SLOW_ROBOTS = 30.0  # seconds robots.txt takes to answer on a "slow-30s" host
ROBOTS_ROLES = {
    "plain": "robots.txt: User-agent: * / Disallow: /private/",
    "404": "robots.txt answers 404 (no rules: everything allowed)",
    "503-then-ok": "robots.txt answers 503 twice, then the plain file",
    "500": "robots.txt always answers 500 (RFC 9309: the site is off limits)",
    "hang-then-ok": "robots.txt's first request never gets an answer; then the plain file",
    "redirect-3": "robots.txt redirects 3 times before the plain file",
    "redirect-5": "robots.txt redirects 5 times before the plain file",
    "600k": "robots.txt is 600 KiB (the plain rules, then comment lines)",
    "agent-group": "robots.txt has a group for rqcrawl (Disallow: /private/), * may not crawl",
    "crawl-delay": "robots.txt asks Crawl-delay: 2",
    "503-20s": f"robots.txt answers 503 for {OUTAGE:g} s from its first ask, then the plain file",
    "slow-30s": f"robots.txt takes {SLOW_ROBOTS:g} s to answer (the plain file)",
}
PAGE_ROLES = {
    "plain": "no misbehaviour beyond every host's",
    "429": "pages p2 and p4 answer 429 with Retry-After: 5 the first time",
    "503-burst": "the host's 3rd to 5th page requests answer 503",
    "slow": "every answer takes 1 s more",
    "redirect-private": "/ links to /go.html, a 302 to /private/redirected.html",
    "refresh-private": "/ links to /refresh.html, a meta refresh to /private/refreshed.html",
    "nofollow-meta": "p1 has <meta name=robots content=nofollow> and links to /nf-meta.html",
    "noindex": "p1 has <meta name=robots content=noindex> (its links are still followed)",
}
DEFAULT_ROBOTS = (
    "404", "503-then-ok", "500", "hang-then-ok", "redirect-3", "redirect-5", "600k",
    "agent-group", "crawl-delay", "503-20s", "slow-30s",
)  # fmt: skip
DEFAULT_PAGES = (
    "429", "503-burst", "plain", "redirect-private", "refresh-private", "nofollow-meta",
    "429", "noindex", "503-burst", "slow",
)  # fmt: skip

PLAIN_RULES = "User-agent: *\nDisallow: /private/\n"
AGENT_RULES = "User-agent: rqcrawl\nDisallow: /private/\n\nUser-agent: *\nDisallow: /\n"
DELAY_RULES = "User-agent: *\nCrawl-delay: 2\nDisallow: /private/\n"
RETRY_AFTER = 5
SLOW_EXTRA = 1.0
VARIANTS = (
    "?utm_source=feed&utm_medium=rss", ";jsessionid=A1B2C3D4", "?sid=77", "?PHPSESSID=f00d",
    "?gclid=xyz", "?fbclid=abc",
)  # fmt: skip
SESSION_PARAMS = ("utm_source", "utm_medium", "sid", "phpsessid", "gclid", "fbclid")
NOFOLLOWED = ("/nf.html", "/nf-meta.html")  # linked only through nofollow


@dataclass(frozen=True)
class WebSpec:
    """The web's shape: hosts, pages per host, latency range, the seed, the misbehaviours."""

    hosts: int = 50
    min_pages: int = 5
    max_pages: int = 20
    min_latency: float = 0.05
    max_latency: float = 0.3
    seed: int = 1
    robots_roles: tuple[str, ...] = DEFAULT_ROBOTS
    page_roles: tuple[str, ...] = DEFAULT_PAGES


@dataclass
class Reply:
    """What a host answers to one request; `hang`: nothing, until the client gives up."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    latency: float = 0.0
    hang: bool = False


def logical_page(target: str) -> str:
    """A request target without its session and tracking parameters: the page it names."""
    path, _, query = target.partition("?")
    path = path.split(";", 1)[0]
    kept = [(k, v) for k, v in parse_qsl(query) if k.lower() not in SESSION_PARAMS]
    return path + ("?" + urlencode(kept) if kept else "")


ROBOTS_PATH = re.compile(r"^(?:/r(\d+))?/robots\.txt$")


def is_robots(path: str) -> bool:
    """robots.txt or one of its redirect hops (`/rN/robots.txt`)."""
    return ROBOTS_PATH.match(path) is not None


class Host:
    """One host of the web: its pages and robots.txt, and how it answers (it counts requests,
    for the answers that change: a first 429, a 503 burst, a robots.txt that recovers)."""

    def __init__(self, spec: WebSpec, index: int, origins: list[str]):
        self.spec = spec
        self.index = index
        self.origin = origins[index]
        self.robots_role = role(spec.robots_roles, index)
        self.page_role = role(spec.page_roles, index)
        rng = random.Random(f"{spec.seed}:host:{index}")
        self.page_count = rng.randint(spec.min_pages, spec.max_pages)
        others = [o for i, o in enumerate(origins) if i != index] or [self.origin]
        self.pages = {path: self._page(k, rng, others) for k, path in enumerate(self._paths())}
        self.requests: Counter[str] = Counter()  # per logical page (robots.txt: its hop)
        self.first_robots: float | None = None  # when robots.txt was first asked for
        self.page_requests = 0

    def _paths(self) -> list[str]:
        return ["/"] + [f"/p{k}.html" for k in range(1, self.page_count)]

    def _page(self, k: int, rng: random.Random, others: list[str]) -> bytes:
        paths = self._paths()
        links = [paths[c] for c in range(4 * k + 1, 4 * k + 5) if c < len(paths)]
        links += [rng.choice(paths) for _ in range(2)]
        links += [f"{o}{rng.choice(['/', '/p1.html', '/p2.html'])}" for o in rng.sample(
            others, min(len(others), rng.randint(1, 2)))]  # fmt: skip
        links.append(rng.choice(paths) + rng.choice(VARIANTS))
        head, extra = "", []
        if k == 0:
            extra.append('<a href="/private/linked.html">private</a>')
            extra.append('<a rel="nofollow" href="/nf.html">nofollow</a>')
            if self.page_role == "redirect-private":
                links.append("/go.html")
            if self.page_role == "refresh-private":
                links.append("/refresh.html")
        if k == 1 and self.page_role == "nofollow-meta":
            head = '<meta name="robots" content="nofollow">'
            links.append("/nf-meta.html")
        if k == 1 and self.page_role == "noindex":
            head = '<meta name="robots" content="noindex">'
        return html(f"host {self.index} page {k}", links, head, extra)

    def robots_body(self) -> str | None:
        """The robots.txt the host serves once it answers (None: no rules, a 404, or never a
        usable answer: a 500)."""
        if self.robots_role in ("404", "500"):
            return None
        if self.robots_role == "agent-group":
            return AGENT_RULES
        if self.robots_role == "crawl-delay":
            return DELAY_RULES
        if self.robots_role == "600k":
            padding = "".join(f"# line {i:06d} of padding, as some sites have\n" for i in range(
                600 * 1024 // 40))  # fmt: skip
            return PLAIN_RULES + padding
        return PLAIN_RULES

    def robots_usable(self) -> bool:
        """Whether robots.txt ever answers something a crawler may crawl by (not a 5xx)."""
        return self.robots_role != "500"

    def crawl_delay(self) -> float:
        return 2.0 if self.robots_role == "crawl-delay" else 0.0

    def latency(self, target: str) -> float:
        """Seconds before the answer: from the seed, the path and how often it was asked."""
        rng = random.Random(f"{self.spec.seed}:{self.index}:{target}:{self.requests[target]}")
        extra = SLOW_EXTRA if self.page_role == "slow" else 0.0
        return rng.uniform(self.spec.min_latency, self.spec.max_latency) + extra

    def respond(self, target: str) -> Reply:
        """The answer to a GET of `target` (path and query), counted."""
        page = logical_page(target)
        self.requests[page] += 1
        reply = self._robots(page) if is_robots(page) else self._answer(page)
        reply.latency += self.latency(target)
        return reply

    def _robots(self, path: str) -> Reply:
        role, seen = self.robots_role, self.requests[path]
        hops = {"redirect-3": 3, "redirect-5": 5}.get(role, 0)
        hop = int(ROBOTS_PATH.match(path)[1] or 0)
        if hop < hops:
            return Reply(301, headers={"Location": f"/r{hop + 1}/robots.txt"})
        if role in ("404", "500"):
            return Reply(int(role), b"no robots.txt here")
        if role == "503-then-ok" and seen <= 2:
            return Reply(503, b"busy")
        if role == "hang-then-ok" and seen == 1:
            return Reply(0, hang=True)
        if self.first_robots is None:
            self.first_robots = time.monotonic()
        if role == "503-20s" and time.monotonic() < self.first_robots + OUTAGE:
            return Reply(503, b"restarting")
        if role == "slow-30s":
            body = (self.robots_body() or "").encode()
            return Reply(200, body, {"Content-Type": "text/plain"}, latency=SLOW_ROBOTS)
        return Reply(200, (self.robots_body() or "").encode(), {"Content-Type": "text/plain"})

    def _answer(self, path: str) -> Reply:
        self.page_requests += 1
        first = self.requests[path] == 1
        if self.page_role == "429" and path in ("/p2.html", "/p4.html") and first:
            return Reply(429, b"slow down", {"Retry-After": str(RETRY_AFTER)})
        if self.page_role == "503-burst" and 3 <= self.page_requests <= 5:
            return Reply(503, b"overloaded")
        if path == "/go.html":
            return Reply(302, headers={"Location": "/private/redirected.html"})
        if path == "/refresh.html":
            meta = '<meta http-equiv="refresh" content="0; url=/private/refreshed.html">'
            return Reply(200, html("refresh", [], meta), {"Content-Type": "text/html"})
        body = self.pages.get(path)
        if body is None and (path.startswith("/private/") or path in NOFOLLOWED):
            body = html(path, [])
        if body is None:
            return Reply(404, b"not found")
        return Reply(200, body, {"Content-Type": "text/html; charset=utf-8"})


def role(roles: tuple[str, ...], index: int) -> str:
    return roles[index] if index < len(roles) else "plain"


def html(title: str, links: list[str], head: str = "", extra: list[str] | None = None) -> bytes:
    anchors = "".join(f'<li><a href="{href}">link {i}</a></li>' for i, href in enumerate(links))
    more = "".join(extra or [])
    return (
        f"<!doctype html><html><head><title>{title}</title>{head}</head><body>"
        f"<h1>{title}</h1><p>{more}</p><ul>{anchors}</ul></body></html>"
    ).encode()


def build(spec: WebSpec, origins: list[str]) -> list[Host]:
    """The web's hosts at their origins (one per host, in order)."""
    return [Host(spec, i, origins) for i in range(len(origins))]
