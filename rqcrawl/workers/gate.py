"""The gate before any request to a site, in this order: does robots.txt allow the URL (and
is robots.txt known at all: the job that claims it fetches it, the others wait), and may the
host take a request now (politeness). "Not yet" parks the URL in the frontier until its slot,
so a worker never sleeps on a busy host; "no" is the URL's outcome (robots.txt refused it).
A sitemap entry (rqcrawl.parse.sitemaps) passes the same gate for its document."""

from __future__ import annotations

import time
from dataclasses import dataclass

from rq.job import Job

from rqcrawl.fetch.politeness import Politeness
from rqcrawl.fetch.robots import CLAIM_POLL, Robots, site_of
from rqcrawl.frontier import keys
from rqcrawl.frontier.state import InFlight
from rqcrawl.ops.sinks import record
from rqcrawl.parse import sitemaps
from rqcrawl.parse.urls import host_of
from rqcrawl.workers import settle
from rqcrawl.workers.crawls import Crawl
from rqcrawl.workers.settle import Passed
from rqcrawl.workers.visit import Visit


@dataclass
class Go:
    """The gate's yes: the job holds its host's slot from `started` and may make its request;
    `robots` is the site's robots.txt (None when the crawl does not obey it)."""

    politeness: Politeness
    host: str
    lease: str
    robots: Robots | None
    delay: float
    started: float

    def release(self, result: Visit | None = None, job: Job | None = None) -> None:
        """Free the host's slot once the request ended: the visit's answer (status,
        Retry-After) feeds the host's adaptive throttle. With the `job` of a worker that
        sends writes with the job's success (worker.CrawlJob), the release goes there."""
        status = result.record.get("status") if result else None
        wait = result.retry_after if result else None
        later = getattr(job, "on_success", None)
        self.politeness.release(
            self.host, self.lease, self.delay, self.started, status, wait, later=later
        )


def through(job: Job, c: Crawl, url: str, depth: int, entry: InFlight) -> Go | Visit | Passed:
    """Pass `url`, claimed by `job` as `entry`, through robots.txt and the host's pace: Go,
    the refusal of robots.txt (a Visit to settle), or the message of a URL parked for later."""
    target = sitemaps.target(url)
    site, host, ua = site_of(target), host_of(target), c.cfg.user_agent
    while True:
        robots = c.robots.get(site) if c.cfg.obey_robots else None
        must_fetch_robots = c.cfg.obey_robots and (robots is None or robots.due(time.time()))
        if not must_fetch_robots:
            if robots and robots.kind == "unavailable":
                return settle.defer(c, url, entry, robots.retry_at)
            refusal = _robots_refusal(robots, target, depth, entry, ua)
            if refusal:
                return refusal
        delay = c.politeness.delay_for(robots.crawl_delay(ua) if robots else None)
        slot = c.politeness.acquire(host, job.id, delay, booked=entry.booked)
        if slot is not None:
            return settle.defer(c, url, entry, slot)
        started = time.time()
        if not must_fetch_robots:
            return Go(c.politeness, host, job.id, robots, delay, started)
        fresh = c.robots.get(site)  # another job may have fetched it while we waited
        known = fresh is not None and not fresh.due(started)
        if known or not c.robots.claim(site, job.id):  # or be fetching it now
            c.politeness.release(host, job.id, 0.0, started, requested=False)
            if known:
                continue
            return settle.defer(c, url, entry, started + CLAIM_POLL)
        try:
            robots = c.robots.fetch(site, robots)
        finally:  # the Crawl-delay just learnt already applies to the next request
            learnt = c.politeness.delay_for(robots.crawl_delay(ua) if robots else None)
            c.politeness.release(host, job.id, learnt, started)


def _robots_refusal(
    robots: Robots | None, url: str, depth: int, entry: InFlight, ua: str
) -> Visit | None:
    """A final outcome decided by robots.txt alone, or None when the URL may be fetched."""
    if robots is None:
        return None
    if robots.kind == "failed":
        message = f"robots.txt unavailable after {robots.attempts} attempts: {robots.error}"
        failed = record(
            url, "failed", depth, error=message, attempts=entry.attempt + 1, reason="robots"
        )
        return Visit(failed, {keys.FAILED: 1})
    if not robots.allows(url, ua):
        message = "disallowed by robots.txt"
        refused = record(url, "robots_disallowed", depth, error=message, attempts=entry.attempt + 1)
        return Visit(refused, {keys.skipped("robots_disallowed"): 1})
    return None
