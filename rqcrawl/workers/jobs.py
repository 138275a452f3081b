"""The RQ job functions: a page's (crawl_url), a sitemap entry's (crawl_sitemap) and the
waker's of workers without a release thread (await_deferred).

A job reads as the way of its URL through the crawler, one named step each, whose helpers
live one level down: claim (rqcrawl.workers.crawls) → gate (robots.txt and politeness,
rqcrawl.workers.gate) → fetch and parse (rqcrawl.workers.visit; a sitemap entry reads its
document instead) → settle (retry later or end the URL, rqcrawl.workers.settle).

A stock `rq worker crawl` runs them with nothing but the Redis URL: everything else comes from
the crawl's config in Redis, read once per process.
"""

from __future__ import annotations

import functools
import logging
import os
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from rq import get_current_job
from rq.job import Job
from rq.timeouts import JobTimeoutException

from rqcrawl.defaults import FORK_LEAD, TABLE_WAIT
from rqcrawl.fetch import warc
from rqcrawl.fetch.http import FetchError
from rqcrawl.fetch.robots import site_of
from rqcrawl.frontier import jobmeta, keys, requisites, sitemaps
from rqcrawl.frontier.dispatch import JOB_FUNC, RENDER_FUNC, REQUISITE_FUNC, SITEMAP_FUNC
from rqcrawl.frontier.leases import renewer
from rqcrawl.frontier.messages import Claim, Slot
from rqcrawl.frontier.outage import TableUnavailable
from rqcrawl.frontier.state import InFlight
from rqcrawl.untrusted import inert, printable_lines
from rqcrawl.workers import gate, process_name, settle
from rqcrawl.workers.crawls import Crawl, claim, crawl_of
from rqcrawl.workers.settle import Passed
from rqcrawl.workers.visit import Renderer, Visit, Visiting, failed_visit, fetch_and_parse

log = logging.getLogger(__name__)

# A job's work once it holds its URL (job, crawl, url, depth, its claim), and what ends the
# URL when that work ran over job_timeout (crawl, url, depth, entry, the timeout).
Step = Callable[[Job, Crawl, str, int, Claim], str | dict]
TimedOut = Callable[[Crawl, str, int, InFlight, FetchError], str | dict]


@dataclass(frozen=True)
class Kind:
    """What a job of one kind of URL (a page, a sitemap entry, a requisite) does once it
    holds its URL (`step`), and when RQ's job_timeout cuts it short (`timed_out`)."""

    step: Step
    timed_out: TimedOut


T = TypeVar("T")


class JobFailed(Exception):
    """What RQ stores in a crawl job's exc_info when the job raised: the error's type and
    message made inert (rq-dashboard shows exc_info unescaped, and a message may quote a
    URL or a header a server chose); the full traceback goes to the worker's log."""


def inert_failures(function: Callable[..., str]) -> Callable[..., str]:
    """A crawl job function whose unexpected errors reach RQ as JobFailed."""

    @functools.wraps(function)
    def job_function(*args, **kwargs) -> str:
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            log.error("%s", printable_lines(traceback.format_exc()))
            raise JobFailed(inert(f"{type(exc).__name__}: {exc}")) from None

    return job_function


@inert_failures
def crawl_url(crawl: str, url: str, depth: int) -> str:
    """Visit `url` of `crawl` at `depth` (the RQ job function of a page)."""
    return run_job(crawl, url, depth)


def run_job(crawl: str, url: str, depth: int, render: Renderer | None = None) -> str:
    """A page's job, its page rendered by `render` when given (the render queue's job,
    rqcrawl.render.browser)."""
    return _job(crawl, url, depth, Kind(partial(_page, render=render), _page_timed_out))


@inert_failures
def crawl_sitemap(crawl: str, url: str, depth: int) -> str:
    """Read the sitemap document of entry `url` and admit what it lists (the RQ job function
    of a sitemap entry, rqcrawl.frontier.sitemaps): the same claim, lease, robots.txt and
    politeness as a page, then no visit."""
    return _job(crawl, url, depth, Kind(_sitemap, _sitemap_timed_out))


@inert_failures
def crawl_requisite(crawl: str, url: str, depth: int) -> str:
    """Fetch the requisite of entry `url` into the crawl's WARC files and hold what it
    loads in turn (the RQ job function of a requisite, rqcrawl.frontier.requisites): the same
    claim, lease, robots.txt and politeness as a page, then no record."""
    return _job(crawl, url, depth, Kind(_requisite, _requisite_timed_out))


def _page(
    job: Job, c: Crawl, url: str, depth: int, claimed: Claim, render: Renderer | None
) -> str | dict:
    """gate → fetch and parse → settle, for a page."""
    entry = claimed.entry
    go = gate.through(job, c, url, depth, entry, claimed.wait_until)
    if isinstance(go, Visit):  # refused by robots.txt: no request made
        slot = Slot(c.frontier.key_of(url))
        return settle.page(c, url, depth, entry, settle.counted(url, entry, go), slot)
    if not isinstance(go, gate.Go):  # parked until its site (or host) is ready
        return go
    speculative = c.cfg.exact_depth and depth > claimed.level + 1
    held = gate.Answered(c, url, go) if render is None and _frees_early(job, c) else None
    slot = held.slot if held else go.slot
    result = None
    try:
        how = Visiting(via=entry.via, render=render, speculative=speculative, answered=held)
        result = fetch_and_parse(job, c, url, depth, go.robots, how)
        if result.render:
            return settle.hand_off(c, url, entry, result.render, slot(result))
        counted = settle.counted(url, entry, result)
        return settle.page(c, url, depth, entry, counted, slot(result))
    except BaseException:  # the slot is freed now, not when its lease runs out
        if not (held and held.freed):
            c.frontier.free_slot(url, go.slot(result))
        raise


def _frees_early(job: Job, c: Crawl) -> bool:
    """Whether a page's job frees its host's slot when its request ended (gate.Answered)
    instead of at its end: where the rest of the job is long, a work-horse forked for it
    (the host's next job pays a fork and the crawler's imports before its request) or a
    page whose content is extracted or handed to a hook. The early free is a script call of
    its own (about 9 Redis commands a page), which a plain page in the recommended worker,
    whose end follows its response within milliseconds, does not pay. A browser's
    rendering makes requests of its own: its page holds the slot to its end."""
    return forked(job) or bool(c.cfg.content) or bool(c.cfg.hook)


def _sitemap(job: Job, c: Crawl, url: str, depth: int, claimed: Claim) -> str:
    """gate → read the document → settle, for a sitemap entry. A site's /sitemap.xml
    (`sitemap_probe`) also reads the sitemaps its robots.txt names, and a 404 of it is
    quiet."""
    doc, entry = sitemaps.document(url), claimed.entry
    go = gate.through(job, c, url, depth, entry, claimed.wait_until)
    key = c.frontier.key_of(url)
    if isinstance(go, Visit):
        found = sitemaps.Found.failed("robots", f"{doc}: {go.record['error']}")
        return settle.sitemap(c, url, entry, found, Slot(key))
    if not isinstance(go, gate.Go):
        return go

    def read() -> sitemaps.Found:
        first = sitemaps.is_root(doc, site_of(doc))
        named = go.robots.sitemaps() if go.robots and first else []
        return sitemaps.read(doc, c.cfg, named, quiet_404=first)

    found, slot = _requested(c, url, go, read)
    return settle.sitemap(c, url, entry, found, slot)


def _requisite(job: Job, c: Crawl, url: str, depth: int, claimed: Claim) -> str:
    """gate → fetch into the archive → settle, for a requisite."""
    entry = claimed.entry
    go = gate.through(job, c, url, depth, entry, claimed.wait_until)
    key = c.frontier.key_of(url)
    if isinstance(go, Visit):  # refused by robots.txt
        got = requisites.Got(counts=Counter({keys.requisite_problem("robots"): 1}))
        return settle.requisite(c, url, entry, got, Slot(key))
    if not isinstance(go, gate.Go):
        return go

    def read() -> requisites.Got:
        worker = job.worker_name and process_name(job.worker_name)
        archive = warc.archive(c.frontier.crawl, c.cfg, worker)
        return requisites.read(requisites.resource(url), c.cfg, archive)

    got, slot = _requested(c, url, go, read)
    return settle.requisite(c, url, entry, got, slot)


def _requested(c: Crawl, url: str, go: gate.Go, request: Callable[[], T]) -> tuple[T, Slot]:
    """What `request()` returns (the request of an entry that is not a page: a sitemap
    document, a requisite) and how it held its host's slot; the slot is freed at once if
    it raises, not when the lease runs out."""
    started = time.monotonic()
    try:
        found = request()
    except BaseException:
        c.frontier.free_slot(url, go.slot())
        raise
    return found, Slot(go.key, time.monotonic() - started, base=go.base)


def _requisite_timed_out(c: Crawl, url: str, depth: int, entry: InFlight, error: FetchError) -> str:
    got = requisites.Got(counts=Counter({keys.requisite_problem("timeout"): 1}), error=error)
    slot = Slot(c.frontier.key_of(url), c.cfg.job_timeout)
    return settle.requisite(c, url, entry, got, slot)


def _page_timed_out(c: Crawl, url: str, depth: int, entry: InFlight, error: FetchError) -> dict:
    """End (or retry) a page whose job ran over job_timeout: counted like any failure, its
    reason among the failures by reason."""
    slot = Slot(c.frontier.key_of(url), c.cfg.job_timeout)
    failed = settle.counted(url, entry, failed_visit(url, depth, error))
    return settle.page(c, url, depth, entry, failed, slot)


def _sitemap_timed_out(c: Crawl, url: str, depth: int, entry: InFlight, error: FetchError) -> str:
    found = sitemaps.Found.failed("timeout", f"{url}: {error}", error)
    slot = Slot(c.frontier.key_of(url), c.cfg.job_timeout)
    return settle.sitemap(c, url, entry, found, slot)


def _job(crawl: str, url: str, depth: int, kind: Kind) -> str:
    """claim → the kind's step → describe: the frame every job of a URL shares."""
    job = get_current_job()
    c, claimed = claim(job.connection, crawl, url, job.id, getattr(job, "claimed", None))
    if c is not None and forked(job):
        c.frontier.lead = FORK_LEAD
    if c is None:
        job.result_ttl = 0
        return "crawl not found (purged?)"
    if claimed.entry is None:
        job.result_ttl = 0
        return "already ended"
    if claimed.lowered is not None:  # found shorter since it was released
        depth = min(depth, claimed.lowered)
    outcome = _held(job, c, url, depth, claimed, kind)
    if not getattr(job, "saves_meta", False) and c.frontier.next_due() is not None:
        c.frontier.ensure_waker()  # no release thread in this worker (see Frontier)
    _describe(job, c, outcome)
    return inert(str(outcome)) if isinstance(outcome, str) else outcome["outcome"]


def _held(job: Job, c: Crawl, url: str, depth: int, claimed: Claim, kind: Kind) -> str | dict:
    """The kind's step, run while the job holds its URL's lease and its slot's: a message, or the
    record that ended the URL."""
    entry = claimed.entry
    if claimed.paused and c.frontier.put_back(url, entry):
        return Passed("crawl halted: URL given back unfetched")
    slot = (c.frontier.keys.host_leases(c.frontier.key_of(url)), url)
    try:
        with renewer.hold(c.frontier.redis, (c.frontier.keys.leased, url), slot):
            return kind.step(job, c, url, depth, claimed)
    except TableUnavailable as exc:  # a database outage: the URL waits, no attempt spent
        log.warning("crawl %s: %s put back for %ss: %s", c.frontier.crawl, url, TABLE_WAIT, exc)
        until = time.time() + TABLE_WAIT
        return settle.defer(c, url, entry, until, Slot(c.frontier.key_of(url)))
    except JobTimeoutException:  # RQ's job_timeout: a timeout of this URL, not a lost job
        message = f"job ran over job_timeout ({job.timeout}s)"
        error = FetchError("job_timeout", message, transient=True)
        return kind.timed_out(c, url, depth, entry, error)


def abandon(job: Job) -> None:
    """After a crawl job was cut short (its worker lost Redis for longer than it retries):
    free the slot it may hold, so that its host does not wait for the lease to expire. Its
    URL comes back through the recovery pass."""
    if job.func_name not in (JOB_FUNC, RENDER_FUNC, SITEMAP_FUNC, REQUISITE_FUNC):
        return
    crawl, url, _ = job.args
    c = crawl_of(job.connection, crawl)
    if c is not None:
        c.frontier.free_slot(url, Slot(c.frontier.key_of(url)))


META_FIELDS = ("outcome", "reason", "status", "error", "attempts")


def _describe(job: Job, c: Crawl, outcome: str | dict) -> None:
    """Put the URL's outcome, status and error in the job's `meta`, where rq-dashboard shows
    it. The recommended worker saves it with the job's result in its success pipeline
    (worker.CrawlJob); a stock worker's job saves it itself, in one round trip that also
    notes for `status` that a forking worker ran it. A failed page's job is kept for
    `failed_job_ttl` rather than `job_ttl`, so the dashboard's links to it stay alive; a
    job that passed its URL on (Passed) is deleted as it ends. The preload marker
    (frontier.jobmeta) has done its work once the job runs: an ended job's hash, kept for
    `job_ttl`, does not carry it."""
    job.meta.pop(jobmeta.META_KEY, None)
    if isinstance(outcome, dict):  # (inert: rq-dashboard shows meta unescaped)
        shown = {k: outcome.get(k) for k in META_FIELDS if outcome.get(k) is not None}
        job.meta.update({k: inert(v) if isinstance(v, str) else v for k, v in shown.items()})
        if outcome["outcome"] == "failed":
            job.result_ttl = c.cfg.failed_job_ttl
    else:
        job.meta["outcome"] = inert(str(outcome))
    if getattr(job, "saves_meta", False):
        return
    with job.connection.pipeline(transaction=False) as pipe:
        if not isinstance(outcome, Passed):
            pipe.hset(job.key, "meta", job.serializer.dumps(job.meta))
        if forked(job):
            c.frontier.note_forked(pipe)
        pipe.execute()


def forked(job: Job) -> bool:
    """Whether `job` runs in a work-horse RQ forked for it (a stock `rq worker`)."""
    return os.environ.get("RQ_JOB_ID") == job.id  # set by RQ in a forked work-horse only


def await_deferred(crawl: str) -> str:
    """The waker job of workers without a release thread (Frontier.ensure_waker)."""
    job = get_current_job()
    c = crawl_of(job.connection, crawl)
    if c is None:
        return "crawl not found (purged?)"
    if forked(job):
        c.frontier.lead = FORK_LEAD
    return f"released {c.frontier.await_deferred()}"
