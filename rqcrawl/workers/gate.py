"""The gate before any request to a site, in this order: did the job get a slot of its
host (the frontier released the URL with one, at its host's turn or a moment before it; a
job that came too late, or a recovered URL, takes a free one at its claim, or parks until
its host has one), is robots.txt known (the job that claims its fetch does it, taking no
turn of the host's pace; the others park until it is known; while it is unavailable all park
until its next ask, and the first ask that fails robots_patience seconds after the first
failed one fails them, or any moment past robots_patience_idle when they are all the crawl
has left), and does it allow the URL. "Not yet" parks the URL in the frontier, so a worker
never sleeps on a busy host; "no" is the URL's outcome (robots.txt refused it).
A sitemap entry (rqcrawl.frontier.sitemaps) passes the same gate for its document."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rq.job import Job

from rqcrawl.fetch.http import FetchError
from rqcrawl.fetch.politeness import answer, delay_for
from rqcrawl.fetch.robots import CLAIM_POLL, Robots, patience, site_of
from rqcrawl.frontier import keys, sitemaps
from rqcrawl.frontier.messages import Slot
from rqcrawl.frontier.records import record
from rqcrawl.frontier.state import InFlight
from rqcrawl.workers import settle
from rqcrawl.workers.crawls import Crawl
from rqcrawl.workers.settle import Passed
from rqcrawl.workers.visit import Visit

IDLE_POLL = 5.0  # seconds between two looks of a page of an unavailable robots.txt at the crawl


@dataclass(frozen=True)
class Go:
    """The gate's yes: the job holds a slot of its host's politeness `key` and may make its
    request; `robots` is the site's robots.txt (None when the crawl does not obey it), `base`
    the host's base delay as now known (the setting, or its Crawl-delay)."""

    key: str
    robots: Robots | None
    base: float

    def slot(self, result: Visit | None = None) -> Slot:
        """How the job's hold of the slot ended: with the visit's request (its duration, and
        its answer for the adaptive throttle), or with none made (`result` None, or a visit
        that made no request)."""
        if result is None or result.fetch_s is None:
            return Slot(self.key, base=self.base)
        return self.request(result.fetch_s, result.record.get("status"), result.retry_after)

    def request(self, seconds: float, status: int | None, wait: float | None) -> Slot:
        """The end of a request of `seconds` answered `status` (None: no answer), with the
        server's Retry-After `wait`."""
        return Slot(self.key, seconds, answer(status, wait), wait or 0.0, base=self.base)


class Answered:
    """A page job's hold of its host's slot, freed as soon as its request ended (issue 45:
    a host's slot covers its request, not its job): the host's delay runs from the end of
    the request, and its next URL is released then (at its turn), while this job parses the
    page and ends its URL. Called by the visit (visit.Answered); `slot` is then what ends
    the URL (a `freed` one), else the visit's own."""

    def __init__(self, c: Crawl, url: str, go: Go):
        self.c, self.url, self.go = c, url, go
        self.freed = False

    def __call__(self, seconds: float, status: int | None, wait: float | None) -> None:
        self.c.frontier.free_slot(self.url, self.go.request(seconds, status, wait))
        self.freed = True

    def slot(self, result: Visit | None = None) -> Slot:
        """How the job's hold of the slot ends, given its visit's `result`."""
        return Slot(self.go.key, freed=True) if self.freed else self.go.slot(result)


def through(
    job: Job, c: Crawl, url: str, depth: int, entry: InFlight, wait_until: float | None
) -> Go | Visit | Passed:
    """Pass `url`, claimed by `job` as `entry`, through its host's slot (`wait_until`: the
    claim found none free until then) and robots.txt: Go, the refusal of robots.txt (a Visit
    to settle, with the slot freed unused), or the message of a URL parked for later."""
    target = sitemaps.target(url)
    site, key, ua = site_of(target), c.frontier.key_of(url), c.cfg.agent
    if wait_until is not None:
        return settle.defer(c, url, entry, wait_until, Slot(key))
    early = entry.released_at - time.time()
    if early > 0:  # released ahead of its host's turn, for a forking worker (jobs.FORK_LEAD)
        time.sleep(early)
    robots = None
    if c.cfg.obey_robots:
        robots = c.robots.get(site)
        if robots is None or robots.due(time.time()):
            taken, robots = c.robots.take_fetch(site, job.id)
            if taken:
                pacer = HopPacer(c, key, job.id)
                try:
                    robots = c.robots.fetch(site, robots, pacer)
                finally:
                    pacer.ended()
                if c.cfg.sitemaps and robots.kind != "unavailable":
                    c.frontier.sitemaps_named(site, robots)
            elif robots is None or robots.due(time.time()):  # another job is fetching it
                return settle.defer(c, url, entry, time.time() + CLAIM_POLL, Slot(key))
        gave_up = _given_up(c, robots) if robots.kind == "unavailable" else ""
        if gave_up is None:  # complete disallow until the next ask
            until = _wake_at(c, robots, time.time())
            return settle.defer(c, url, entry, until, Slot(key, not_before=until))
        refusal = _robots_refusal(robots, target, depth, entry, ua, gave_up)
        if refusal:
            return refusal
    return Go(key, robots, delay_for(c.cfg, robots.crawl_delay(ua) if robots else None))


class HopPacer:
    """The pace of robots.txt's redirect hops for a job holding a slot of `key`: robots.txt
    itself takes no turn of its host's pace, but each hop waits its host's turn like any
    request (a delay after the request before it ended, and a free slot of another host),
    within the fetch's download_timeout. Called before each hop; `ended` after the fetch."""

    def __init__(self, c: Crawl, key: str, job_id: str):
        self.c, self.key = c, key
        self.deadline = time.time() + c.cfg.download_timeout
        self.last = key  # the key of the request that ends when the next hop is asked for
        self.holder = f"robots.txt hop of {job_id}"

    def __call__(self, hop: str) -> None:
        frontier = self.c.frontier
        hop_key, ended = frontier.key_of(hop), self.last
        while at := frontier.hop_turn(hop_key, ended, hop_key == self.key, self.holder):
            if at > self.deadline:
                message = f"robots.txt's redirect to {hop} waited for its host's turn past"
                raise FetchError("download_timeout", f"{message} download_timeout", True)
            time.sleep(max(0.0, at - time.time()))
            ended = ""
        self.last = hop_key

    def ended(self) -> None:
        """The fetch's last request ended: if it was a hop to another host, that host's next
        request waits its delay from now (robots.txt's final answer on its own host takes no
        turn: the page may follow at once)."""
        if self.last != self.key:
            self.c.frontier.hop_ended(self.last)


def _given_up(c: Crawl, robots: Robots) -> str | None:
    """None while the pages of a site whose robots.txt is unavailable wait for it, else why
    they stop (a note for their records): robots_patience is over, or robots_patience_idle
    is and they are all the crawl has left (nothing else would keep it running)."""
    now = time.time()
    if robots.given_up(now, c.cfg):
        return ""
    if robots.given_up(now, c.cfg, idle=True) and c.frontier.only_robots_waits():
        return " (the crawl had nothing else left: robots_patience_idle)"
    return None


def _wake_at(c: Crawl, robots: Robots, now: float) -> float:
    """When a page parked for its site's unavailable robots.txt comes back: at the next ask,
    or sooner to see whether it is all the crawl has left (at robots_patience_idle, then every
    IDLE_POLL seconds), so that the crawl's last other page does not leave it waiting alone
    until that ask (up to max_backoff_delay)."""
    idle_at = robots.since + patience(c.cfg, idle=True)
    return min(robots.retry_at, max(idle_at, now + IDLE_POLL))


def _robots_refusal(
    robots: Robots, url: str, depth: int, entry: InFlight, ua: str, gave_up: str = ""
) -> Visit | None:
    """A final outcome decided by robots.txt alone, or None when the URL may be fetched;
    `gave_up` notes why the pages of an unavailable one stopped waiting."""
    if robots.kind == "unavailable":  # given up: the pages waited enough
        waited = time.time() - robots.since
        message = (
            f"robots.txt unavailable for {waited:.0f} s ({robots.attempts} asks{gave_up}): "
            f"{robots.error}"
        )
        failed = record(
            url, "failed", depth, error=message, attempts=entry.attempt + 1, reason="robots"
        )
        return Visit(failed, {keys.FAILED: 1})
    if not robots.allows(url, ua):
        message = "disallowed by robots.txt"
        refused = record(url, "robots_disallowed", depth, error=message, attempts=entry.attempt + 1)
        return Visit(refused, {keys.skipped("robots_disallowed"): 1})
    return None
