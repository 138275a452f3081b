"""The last step of a job: retry its URL later (a transient failure while attempts are
left), park it until its site is ready, hand it to the browser, or end it for good in the
frontier (its record, counters and links in one atomic step). Each frees the job's slot of
its host in the same step (a Slot says how its request ended). A job's message says which:
`Passed` and `Parked` mark the jobs that did not end their URL."""

from __future__ import annotations

import json
import logging
import time

from rqcrawl.fetch.http import FetchError
from rqcrawl.frontier import keys, requisites, sitemaps
from rqcrawl.frontier.messages import Ending, Slot
from rqcrawl.frontier.state import InFlight, outcome_counts
from rqcrawl.parse.urls import host_of
from rqcrawl.workers.crawls import Crawl
from rqcrawl.workers.visit import Visit

log = logging.getLogger(__name__)


class Passed(str):
    """The message of a job that did not end its URL (stale, or the crawl halted)."""


class Parked(Passed):
    """The message of a job that parked its URL for later (a deferral, a retry)."""


def counted(url: str, entry: InFlight, result: Visit) -> Visit:
    """`result` with the counters its outcome adds beside its own (its host's, the latency
    of its request...), written by the same atomic finish as the rest."""
    counts = outcome_counts(
        host_of(url), result.counts, result.record, result.fetch_s, entry.attempt + 1
    )
    result.counts.update(counts)
    return result


def page(c: Crawl, url: str, depth: int, entry: InFlight, result: Visit, slot: Slot) -> str | dict:
    """Retry a transient failure later, or end the URL for good."""
    retried = retry(c, url, entry, result.error, slot)
    if retried:
        return retried
    if result.requisites:  # held before the page ends: a worker dying between loses none
        elsewhere = c.frontier.hold_requisites(result.requisites, depth, entry.priority)
        result.counts[keys.REQUISITES_CUT] = result.counts.get(keys.REQUISITES_CUT, 0) + elsewhere
    result.record["attempts"] = entry.attempt + 1
    if entry.source:
        result.record["source"] = entry.source
    if entry.via:
        result.record["via"] = list(entry.via)
    via = json.dumps(result.via, separators=(",", ":")) if result.via else ""
    ending = Ending(
        result.counts, result.record, result.children, depth + 1 if not via else depth,
        c.frontier.child_priority(entry.priority, via), via, slot, result.links, result.cut,
        result.digest, entry,
    )  # fmt: skip
    c.frontier.finish(url, ending, entry.priority, result.content)
    return result.record


def retry(c: Crawl, url: str, entry: InFlight, error: FetchError | None, slot: Slot) -> str | None:
    """Park the next attempt of a transient failure while attempts are left (the job's
    message); None when the URL must end now."""
    if error is None or entry.attempt + 1 > c.cfg.retries:
        return None
    backoff = c.cfg.retry_base * 2**entry.attempt
    wait = min(error.retry_after or 0.0, c.cfg.max_retry_after)  # capped (http.retry_after)
    delay = max(wait, backoff)
    why = f"Retry-After {wait:g}s" if delay > backoff else f"back-off {backoff:g}s"
    if not c.frontier.retry_later(url, entry, delay, slot, f"{why} after: {error}"):
        return Passed("already ended")
    return Parked(f"retry in {delay:.1f}s: {error}")


def sitemap(c: Crawl, url: str, entry: InFlight, found: sitemaps.Found, slot: Slot) -> str:
    """Retry a sitemap whose fetch failed for now, or end its entry (one log line if the
    document could not be read in full)."""
    retried = retry(c, url, entry, found.error, slot)
    if retried:
        return retried
    if found.problem:
        log.warning("crawl %s: sitemap %s", c.frontier.crawl, found.problem)
    c.frontier.finish_sitemap(url, entry, found, slot)
    return f"sitemap: {len(found.pages)} URLs, {len(found.sitemaps)} sitemaps" + (
        f"; {found.problem}" if found.problem else ""
    )


def requisite(c: Crawl, url: str, entry: InFlight, got: requisites.Got, slot: Slot) -> str:
    """Retry a requisite whose fetch failed for now, or end its entry: hold what it loads
    in turn (a stylesheet's fonts and images, a redirect's target) first."""
    retried = retry(c, url, entry, got.error, slot)
    if retried:
        return retried
    if got.more:
        got.counts[keys.REQUISITES_CUT] += c.frontier.hold_requisites(
            got.more, entry.depth, entry.priority
        )
    c.frontier.finish_requisite(url, entry, got.counts, slot)
    problems = [k.removeprefix(keys.REQUISITE_PROBLEMS) for k in got.counts
                if k.startswith(keys.REQUISITE_PROBLEMS)]  # fmt: skip
    return f"requisite: {', '.join(problems) or 'archived'}, {len(got.more)} more"


def defer(c: Crawl, url: str, entry: InFlight, until: float, slot: Slot) -> Passed:
    """Park `url` until `until` (its host's slot, robots.txt's retry) without a worker."""
    if not c.frontier.defer(url, entry, until, slot):
        return Passed("already ended")
    return Parked(f"deferred {max(0.0, until - time.time()):.2f}s")


def hand_off(c: Crawl, url: str, entry: InFlight, why: str, slot: Slot) -> str:
    """Give a page that needs the browser to the render queue (render = "auto")."""
    if not c.frontier.hand_off(url, entry, slot):
        return "already ended"
    return f"to the browser ({why})"
