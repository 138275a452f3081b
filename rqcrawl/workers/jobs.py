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

import logging
import os
import time
from collections.abc import Callable
from functools import partial

from rq import get_current_job
from rq.job import Job
from rq.timeouts import JobTimeoutException

from rqcrawl.fetch.http import FetchError
from rqcrawl.fetch.robots import site_of
from rqcrawl.frontier.dispatch import JOB_FUNC, RENDER_FUNC, SITEMAP_FUNC
from rqcrawl.frontier.leases import renewer
from rqcrawl.frontier.outage import TABLE_WAIT, TableUnavailable
from rqcrawl.frontier.state import InFlight
from rqcrawl.parse import sitemaps
from rqcrawl.parse.urls import host_of
from rqcrawl.workers import gate, settle
from rqcrawl.workers.crawls import Crawl, claim, crawl_of
from rqcrawl.workers.settle import Parked, Passed
from rqcrawl.workers.visit import Renderer, Visit, failed_visit, fetch_and_parse

log = logging.getLogger(__name__)

# A job's work once it holds its URL (job, crawl, url, depth, entry), and what ends the URL
# when that work ran over job_timeout (crawl, url, depth, entry, the timeout).
Step = Callable[[Job, Crawl, str, int, InFlight], str | dict]
TimedOut = Callable[[Crawl, str, int, InFlight, FetchError], str | dict]


def crawl_url(crawl: str, url: str, depth: int) -> str:
    """Visit `url` of `crawl` at `depth` (the RQ job function of a page)."""
    return run_job(crawl, url, depth)


def run_job(crawl: str, url: str, depth: int, render: Renderer | None = None) -> str:
    """A page's job, its page rendered by `render` when given (the render queue's job,
    rqcrawl.render.browser)."""
    return _job(crawl, url, depth, partial(_page, render=render), _page_timed_out)


def crawl_sitemap(crawl: str, url: str, depth: int) -> str:
    """Read the sitemap document of entry `url` and admit what it lists (the RQ job function
    of a sitemap entry, rqcrawl.parse.sitemaps): the same claim, lease, robots.txt and
    politeness as a page, then no visit."""
    return _job(crawl, url, depth, _sitemap, _sitemap_timed_out)


def _page(
    job: Job, c: Crawl, url: str, depth: int, entry: InFlight, render: Renderer | None
) -> str | dict:
    """gate → fetch and parse → settle, for a page."""
    go = gate.through(job, c, url, depth, entry)
    if isinstance(go, Visit):  # refused by robots.txt
        return settle.page(c, url, depth, entry, settle.counted(url, entry, go))
    if not isinstance(go, gate.Go):  # parked until its host (or robots.txt) is ready
        return go
    try:
        result = fetch_and_parse(job, c, url, depth, entry, go.robots, render)
    except BaseException:
        go.release()
        raise
    go.release(result, job)  # with the job's success, where the worker can
    if result.render:
        return settle.hand_off(c, url, entry, result.render)
    return settle.page(c, url, depth, entry, settle.counted(url, entry, result))


def _sitemap(job: Job, c: Crawl, url: str, depth: int, entry: InFlight) -> str:
    """gate → read the document → settle, for a sitemap entry. A site's first document (its
    /sitemap.xml) also reads the sitemaps its robots.txt names, and a 404 of it is quiet."""
    doc = sitemaps.document(url)
    go = gate.through(job, c, url, depth, entry)
    if isinstance(go, Visit):
        found = sitemaps.Found.failed("robots", f"{doc}: {go.record['error']}")
        return settle.sitemap(c, url, entry, found)
    if not isinstance(go, gate.Go):
        return go
    try:
        first = sitemaps.is_root(doc, site_of(doc))
        named = go.robots.sitemaps() if go.robots and first else []
        found = sitemaps.read(doc, c.cfg, named, quiet_404=first)
    finally:
        go.release()
    return settle.sitemap(c, url, entry, found)


def _page_timed_out(c: Crawl, url: str, depth: int, entry: InFlight, error: FetchError) -> dict:
    return settle.page(c, url, depth, entry, failed_visit(url, depth, error))


def _sitemap_timed_out(c: Crawl, url: str, depth: int, entry: InFlight, error: FetchError) -> str:
    found = sitemaps.Found.failed("timeout", f"{url}: {error}", error)
    return settle.sitemap(c, url, entry, found)


def _job(crawl: str, url: str, depth: int, step: Step, timed_out: TimedOut) -> str:
    """claim → `step` → describe: the frame every job of a URL shares."""
    job = get_current_job()
    c, entry, paused = claim(job.connection, crawl, url, job.id, getattr(job, "claimed", None))
    if c is None:
        job.result_ttl = 0
        return "crawl not found (purged?)"
    if entry is None:
        job.result_ttl = 0
        return "already ended"
    outcome = _held(job, c, url, depth, entry, paused, step, timed_out)
    if isinstance(outcome, Parked) and not getattr(job, "saves_meta", False):
        c.frontier.ensure_waker()  # no release thread in this worker (see Frontier)
    _describe(job, c, outcome)
    return str(outcome) if isinstance(outcome, str) else outcome["outcome"]


def _held(
    job: Job,
    c: Crawl,
    url: str,
    depth: int,
    entry: InFlight,
    paused: bool,
    step: Step,
    timed_out: TimedOut,
) -> str | dict:
    """`step`, run while the job holds its URL's lease and its host's: a message, or the
    record that ended the URL."""
    if paused and c.frontier.state.put_back(url, entry):
        return Passed("crawl halted: URL given back unfetched")
    try:  # the URL's lease, and the host's slot once the job takes one
        host = host_of(sitemaps.target(url))
        slot, slot_lease = c.politeness.lease(host, job.id)  # per-IP: maybe another shard's
        with (
            renewer.hold(c.frontier.redis, (c.frontier.state.keys.leased, url)),
            renewer.hold(slot, slot_lease),
        ):
            return step(job, c, url, depth, entry)
    except TableUnavailable as exc:  # a database outage: the URL waits, no attempt spent
        log.warning("crawl %s: %s put back for %ss: %s", c.frontier.crawl, url, TABLE_WAIT, exc)
        return settle.defer(c, url, entry, time.time() + TABLE_WAIT)
    except JobTimeoutException:  # RQ's job_timeout: a timeout of this URL, not a lost job
        message = f"job ran over job_timeout ({job.timeout}s)"
        return timed_out(c, url, depth, entry, FetchError("timeout", message, transient=True))


def abandon(job: Job) -> None:
    """After a crawl job was cut short (its worker lost Redis for longer than it retries):
    free the politeness lease it may hold, so that its host does not wait for the lease to
    expire. Its URL comes back through the recovery pass."""
    if job.func_name not in (JOB_FUNC, RENDER_FUNC, SITEMAP_FUNC):
        return
    crawl, url, _ = job.args
    c = crawl_of(job.connection, crawl)
    if c is not None:
        host = host_of(sitemaps.target(url))
        c.politeness.release(host, job.id, c.cfg.delay, time.time(), requested=False)


META_FIELDS = ("outcome", "reason", "status", "error", "attempts")


def _describe(job: Job, c: Crawl, outcome: str | dict) -> None:
    """Put the URL's outcome, status and error in the job's `meta`, where rq-dashboard shows
    it. The recommended worker saves it with the job's result in its success pipeline
    (worker.CrawlJob); a stock worker's job saves it itself, in one round trip that also
    notes for `status` that a forking worker ran it. A failed page's job is kept for
    `failed_job_ttl` rather than `job_ttl`, so the dashboard's links to it stay alive; a
    job that passed its URL on (Passed) is deleted as it ends."""
    if isinstance(outcome, dict):
        job.meta.update({k: outcome.get(k) for k in META_FIELDS if outcome.get(k) is not None})
        if outcome["outcome"] == "failed":
            job.result_ttl = c.cfg.failed_job_ttl
    else:
        job.meta["outcome"] = str(outcome)
    if isinstance(outcome, Passed):
        job.result_ttl = 0
    if getattr(job, "saves_meta", False):
        return
    with job.connection.pipeline(transaction=False) as pipe:
        if not isinstance(outcome, Passed):
            pipe.hset(job.key, "meta", job.serializer.dumps(job.meta))
        if os.environ.get("RQ_JOB_ID") == job.id:  # set by RQ in a forked work-horse only
            c.frontier.state.note_forked(pipe)
        pipe.execute()


def await_deferred(crawl: str) -> str:
    """The waker job of workers without a release thread (Frontier.ensure_waker)."""
    c = crawl_of(get_current_job().connection, crawl)
    if c is None:
        return "crawl not found (purged?)"
    return f"released {c.frontier.await_deferred()}"
