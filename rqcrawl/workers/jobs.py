"""The RQ jobs: one URL, fetched, parsed, recorded, its links admitted one level deeper.

A stock `rq worker crawl` runs them with nothing but the Redis URL: everything else comes from
the crawl's config in Redis, read once per process.

Before any request to a site the job asks, in this order: does robots.txt allow the URL (and
is robots.txt known at all), and may the host take a request now (politeness). When the
answer is "not yet", the URL is parked in the frontier until its slot and the job returns at
once, so a worker never sleeps on a busy host.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Container, Hashable, Sequence
from dataclasses import dataclass, field
from functools import partial

from redis import Redis
from rq import get_current_job
from rq.job import Job
from rq.timeouts import JobTimeoutException

from rqcrawl import config
from rqcrawl.config import CrawlConfig
from rqcrawl.fetch import hops, warc
from rqcrawl.fetch.cookies import Cookies
from rqcrawl.fetch.http import NOT_MODIFIED, Archive, FetchError, Response, fetch, no_archive
from rqcrawl.fetch.politeness import Politeness
from rqcrawl.fetch.robots import CLAIM_POLL, Robots, RobotsCache, site_of
from rqcrawl.frontier import keys
from rqcrawl.frontier.dispatch import JOB_FUNC, RENDER_FUNC, Frontier
from rqcrawl.frontier.leases import renewer
from rqcrawl.frontier.outage import TABLE_WAIT, TableUnavailable
from rqcrawl.frontier.redisurl import server_key
from rqcrawl.frontier.shards import connect as shard_connect
from rqcrawl.frontier.state import InFlight, StaleCrawl, outcome_counts
from rqcrawl.ops import stats
from rqcrawl.ops.sinks import record
from rqcrawl.parse import directives, hooks, sitemaps
from rqcrawl.parse.changes import Content, Prior, simhash, visible_text
from rqcrawl.parse.extract import decode, extract_fields, parse
from rqcrawl.parse.rules import link_verdict
from rqcrawl.parse.urls import host_of, param_filter
from rqcrawl.render import choice
from rqcrawl.render.choice import Rendered
from rqcrawl.workers.lru import LRU

log = logging.getLogger(__name__)

# Permanent fetch outcomes that mean "not for us" rather than "broken": counted as skips.
SKIP_REASONS = {"out_of_scope", "refused_address", "too_large", "not_html"}


@dataclass
class Crawl:
    """What a worker process keeps of one crawl between jobs."""

    cfg: CrawlConfig
    frontier: Frontier
    politeness: Politeness
    robots: RobotsCache
    cookies: Cookies


# Crawls whose state a process keeps (the most recently used): each may hold a few MB
# (Frontier.known, robots.txt verdicts). By server and name: a process may serve several
# shards of a crawl, each with its own state (redisurl.server_key).
CRAWLS_KEPT = 32
_crawls: LRU[tuple[Hashable, str], Crawl] = LRU(CRAWLS_KEPT)


def crawl_of(redis: Redis, name: str) -> Crawl | None:
    """The process's view of crawl `name` on this Redis, or None when it holds no such
    crawl."""
    key = (server_key(redis), name)
    c = _crawls.get(key)
    if c is None:
        cfg = config.load(redis, name)
        if cfg is None:
            return None
        frontier = Frontier(redis, name, cfg)
        c = _crawls.put(
            key,
            Crawl(
                cfg,
                frontier,
                Politeness(redis, frontier.state.keys, cfg, gate_home(redis, frontier)),
                RobotsCache(redis, frontier.state.keys, cfg),
                Cookies(cfg),
            ),
        )
    return c


def gate_home(redis: Redis, frontier: Frontier) -> Callable[[str], Redis]:
    """Where a politeness gate lives: a host's on its own shard (this one); with
    politeness_by = "ip" in a crawl over several shards, an address's on its home shard
    (placed like a host), so that hosts of one address on different shards share it."""
    state = frontier.state
    if state.shards is None or frontier.cfg.politeness_by != "ip":
        return lambda key: redis

    def home(key: str) -> Redis:
        index = state.shards.index_of(key)
        return redis if index == state.index else shard_connect(frontier.cfg.shards[index])

    return home


def forget(name: str) -> None:
    """Drop what the process keeps of crawl `name`: it was purged and its name now belongs
    to another crawl, with other settings and other URLs."""
    _crawls.pop_where(lambda key: key[1] == name)
    config.forget(name)
    warc.forget(name)


def check_identity(redis: Redis, name: str, identity: bytes | None) -> None:
    """Forget crawl `name` if what the process keeps of it on this Redis belongs to an
    earlier crawl of the same name (see Frontier.same_crawl)."""
    c = _crawls.get((server_key(redis), name))
    if c is not None and not c.frontier.state.same_crawl(identity):
        forget(name)


def claim(
    redis: Redis, name: str, url: str, job_id: str
) -> tuple[Crawl | None, InFlight | None, bool]:
    """The crawl (None: no such crawl) and Frontier.claim's answer for the job. A crawl
    that is not the one the process knew by that name is read again (a fresh Frontier takes
    the identity it sees, so this recurses once at most)."""
    c = crawl_of(redis, name)
    if c is None:
        return None, None, False
    try:
        return c, *c.frontier.claim(url, job_id)
    except StaleCrawl:
        forget(name)
        return claim(redis, name, url, job_id)


@dataclass
class Visit:
    """The result of visiting one URL, before it is written to Redis."""

    record: dict
    counts: dict[str, int]
    children: list[tuple[str | None, str]] = field(default_factory=list)
    error: FetchError | None = None  # set when the failure is transient
    fetch_s: float | None = None  # how long the fetch took (parsing and the hook left out)
    content: Content | None = None  # what a fetched visit saw (change detection of revisits)
    # A redirect or meta refresh (rqcrawl.fetch.hops): `children` is its target, admitted at the
    # same depth, led to by this chain of redirects (the URL's own `via` and the URL).
    via: list[str] | None = None
    retry_after: float | None = None  # the server's Retry-After, if it sent one
    render: str | None = None  # why the page needs the browser (render = "auto"): handed off


# The browser's step of a visit (rqcrawl.render.browser): the rendered page of a response fetched
# with HTTP, with the crawl, the worker and the robots.txt verdict of the page's site bound.
Renderer = Callable[..., Rendered]


class Passed(str):
    """The message of a job that did not end its URL (stale, or the crawl halted): its RQ
    job is deleted when it ends, so that rq-dashboard's lists hold one job per page, the
    one that ended it (and the next job of a parked URL, as `deferred`)."""


class Parked(Passed):
    """The message of a job that parked its URL for later (a deferral, a retry)."""


def crawl_url(crawl: str, url: str, depth: int) -> str:
    """Visit `url` of `crawl` at `depth` (the RQ job function)."""
    return run_job(crawl, url, depth)


def run_job(crawl: str, url: str, depth: int, render: Renderer | None = None) -> str:
    """A job of `url`: claimed, passed through robots.txt and politeness, visited (rendered
    by `render` when given: the render queue's job, rqcrawl.render.browser) and ended."""
    job = get_current_job()
    c, entry, paused = claim(job.connection, crawl, url, job.id)
    if c is None:
        job.result_ttl = 0
        return "crawl not found (purged?)"
    if entry is None:
        job.result_ttl = 0
        return "already ended"
    outcome = _run_claimed(job, c, url, depth, entry, paused, render)
    if isinstance(outcome, Parked) and not getattr(job, "saves_meta", False):
        c.frontier.ensure_waker()  # no release thread in this worker (see Frontier)
    _describe(job, c, outcome)
    return str(outcome) if isinstance(outcome, str) else outcome["outcome"]


def _run_claimed(
    job: Job,
    c: Crawl,
    url: str,
    depth: int,
    entry: InFlight,
    paused: bool,
    render: Renderer | None = None,
) -> str | dict:
    """crawl_url's work once the job holds its URL: a message, or the record that ended it."""
    if paused and c.frontier.state.put_back(url, entry):
        return Passed("crawl halted: URL given back unfetched")
    try:  # the URL's lease, and the host's slot once the job takes one
        host = host_of(sitemaps.target(url))
        gate, gate_lease = c.politeness.lease(host, job.id)  # per-IP: maybe another shard's
        with (
            renewer.hold(c.frontier.redis, (c.frontier.state.keys.leased, url)),
            renewer.hold(gate, gate_lease),
        ):
            return _crawl_claimed(job, c, url, depth, entry, render)
    except TableUnavailable as exc:  # a database outage: the URL waits, no attempt spent
        log.warning("crawl %s: %s put back for %ss: %s", c.frontier.crawl, url, TABLE_WAIT, exc)
        return _defer(c, url, entry, time.time() + TABLE_WAIT)
    except JobTimeoutException:  # RQ's job_timeout: a timeout of this URL, not a lost job
        message = f"job ran over job_timeout ({job.timeout}s)"
        error = FetchError("timeout", message, transient=True)
        if sitemaps.document(url):
            found = sitemaps.Found.failed("timeout", f"{url}: {message}", error)
            return _settle_sitemap(c, url, entry, found)
        return _settle(c, url, depth, entry, failed_visit(url, depth, error))


def _crawl_claimed(
    job: Job, c: Crawl, url: str, depth: int, entry: InFlight, render: Renderer | None = None
) -> str | dict:
    """Visit `url`, claimed by `job` as `entry`: fetch and end it, or park it until its
    host is ready. A sitemap entry (rqcrawl.parse.sitemaps) passes the same gates for its
    document."""
    doc, target = sitemaps.document(url), sitemaps.target(url)
    site, host, ua = site_of(target), host_of(target), c.cfg.user_agent
    while True:
        robots = c.robots.get(site) if c.cfg.obey_robots else None
        must_fetch_robots = c.cfg.obey_robots and (robots is None or robots.due(time.time()))
        if not must_fetch_robots:
            if robots and robots.kind == "unavailable":
                return _defer(c, url, entry, robots.retry_at)
            refusal = _robots_refusal(robots, target, depth, entry, ua)
            if refusal and doc:
                problem = f"{doc}: {refusal.record['error']}"
                return _settle_sitemap(c, url, entry, sitemaps.Found.failed("robots", problem))
            if refusal:
                refusal.counts.update(outcome_counts(host, refusal.counts, refusal.record, None))
                return _settle(c, url, depth, entry, refusal)
        delay = c.politeness.delay_for(robots.crawl_delay(ua) if robots else None)
        slot = c.politeness.acquire(host, job.id, delay, booked=entry.booked)
        if slot is not None:
            return _defer(c, url, entry, slot)
        started = time.time()
        if not must_fetch_robots:
            break
        fresh = c.robots.get(site)  # another job may have fetched it while we waited
        known = fresh is not None and not fresh.due(started)
        if known or not c.robots.claim(site, job.id):  # or be fetching it now
            c.politeness.release(host, job.id, 0.0, started, requested=False)
            if known:
                continue
            return _defer(c, url, entry, started + CLAIM_POLL)
        try:
            robots = c.robots.fetch(site, robots)
        finally:  # the Crawl-delay just learnt already applies to the next request
            learnt = c.politeness.delay_for(robots.crawl_delay(ua) if robots else None)
            c.politeness.release(host, job.id, learnt, started)
    if doc:
        try:
            first = sitemaps.is_root(doc, site)  # the site's /sitemap.xml: robots.txt's too
            named = robots.sitemaps() if robots and first else []
            found = sitemaps.read(doc, c.cfg, named, quiet_404=first)
        finally:
            c.politeness.release(host, job.id, delay, started)
        return _settle_sitemap(c, url, entry, found)
    result = None
    try:
        prior = c.frontier.prior(url)
        archive = warc.archive(c.frontier.crawl, c.cfg, job.worker_name, prior)
        if render is not None:
            allows = partial(_robots_allow, robots, ua)
            render = partial(render, crawl=c.frontier.crawl, worker=job.worker_name, allows=allows)
        result = visit(
            url, depth, c.cfg, archive, c.frontier.state.known, c.cookies, prior, entry.via,
            render,
        )  # fmt: skip
    finally:  # the answer feeds the host's adaptive throttle
        status = result.record.get("status") if result else None
        wait = result.retry_after if result else None
        c.politeness.release(host, job.id, delay, started, status, wait)
    if result.render:
        return _hand_off(c, url, entry, result.render)
    counts = outcome_counts(host, result.counts, result.record, result.fetch_s, entry.attempt + 1)
    result.counts.update(counts)
    return _settle(c, url, depth, entry, result)


def _robots_allow(robots: Robots | None, ua: str, url: str) -> bool:
    """Whether robots.txt of the page's site lets the browser request `url` of that site."""
    return robots is None or robots.allows(url, ua)


def _hand_off(c: Crawl, url: str, entry: InFlight, why: str) -> str:
    if not c.frontier.hand_off(url, entry):
        return "already ended"
    return f"to the browser ({why})"


def abandon(job: Job) -> None:
    """After a crawl job was cut short (its worker lost Redis for longer than it retries):
    free the politeness lease it may hold, so that its host does not wait for the lease to
    expire. Its URL comes back through the recovery pass."""
    if job.func_name not in (JOB_FUNC, RENDER_FUNC):
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


def _defer(c: Crawl, url: str, entry: InFlight, until: float) -> Passed:
    if not c.frontier.defer(url, entry, until):
        return Passed("already ended")
    return Parked(f"deferred {max(0.0, until - time.time()):.2f}s")


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


def _settle(c: Crawl, url: str, depth: int, entry: InFlight, result: Visit) -> str | dict:
    """Retry a transient failure later, or end the URL for good."""
    retried = _retry(c, url, entry, result.error)
    if retried:
        return retried
    result.record["attempts"] = entry.attempt + 1
    if entry.source:
        result.record["source"] = entry.source
    if entry.via:
        result.record["via"] = list(entry.via)
    c.frontier.finish(
        url, result.counts, result.record, result.children,
        depth + 1 if result.via is None else depth, result.content, entry.priority,
        via=json.dumps(result.via, separators=(",", ":")) if result.via else "",
    )  # fmt: skip
    return result.record


def _retry(c: Crawl, url: str, entry: InFlight, error: FetchError | None) -> str | None:
    """Park the next attempt of a transient failure while attempts are left (the job's
    message); None when the URL must end now."""
    if error is None or entry.attempt + 1 > c.cfg.retries:
        return None
    backoff = c.cfg.retry_base * 2**entry.attempt
    wait = min(error.retry_after or 0.0, c.cfg.max_retry_after)  # capped (hops.retry_after)
    delay = max(wait, backoff)
    why = f"Retry-After {wait:g}s" if delay > backoff else f"back-off {backoff:g}s"
    if not c.frontier.retry_later(url, entry, delay, f"{why} after: {error}"):
        return Passed("already ended")
    return Parked(f"retry in {delay:.1f}s: {error}")


def _settle_sitemap(c: Crawl, url: str, entry: InFlight, found: sitemaps.Found) -> str:
    """Retry a sitemap whose fetch failed for now, or end its entry (one log line if the
    document could not be read in full)."""
    retried = _retry(c, url, entry, found.error)
    if retried:
        return retried
    if found.problem:
        log.warning("crawl %s: sitemap %s", c.frontier.crawl, found.problem)
    c.frontier.finish_sitemap(url, entry, found)
    return f"sitemap: {len(found.pages)} URLs, {len(found.sitemaps)} sitemaps" + (
        f"; {found.problem}" if found.problem else ""
    )


def await_deferred(crawl: str) -> str:
    """The waker job of workers without a release thread (Frontier.ensure_waker)."""
    c = crawl_of(get_current_job().connection, crawl)
    if c is None:
        return "crawl not found (purged?)"
    return f"released {c.frontier.await_deferred()}"


def failed_visit(url: str, depth: int, exc: FetchError) -> Visit:
    """The visit of a URL whose fetch failed with `exc` (retried later when transient)."""
    outcome = exc.reason if exc.reason in SKIP_REASONS else "failed"
    failed = record(url, outcome, depth, status=exc.status, error=str(exc))
    if outcome == "failed":
        failed["reason"] = stats.failure_reason(exc.reason, exc.status)
    counter = keys.skipped(exc.reason) if outcome != "failed" else keys.FAILED
    error = exc if exc.transient else None
    return Visit(failed, {counter: 1}, error=error, retry_after=exc.retry_after)


def visit(
    url: str,
    depth: int,
    cfg: CrawlConfig,
    archive: Archive = no_archive,
    known: Container[str] = frozenset(),
    cookies: Cookies | None = None,
    prior: Prior | None = None,
    via: Sequence[str] = (),
    render: Renderer | None = None,
) -> Visit:
    """Fetch (archiving the responses) and parse `url`, extract its fields, run the hook;
    never raises for anything a web server can do. Links in `known` were already admitted
    or refused by this process: they are not judged again (the frontier drops them).
    Cookies are sent and kept in `cookies`, if given. With the `prior` visit's validators
    the GET is conditional, and a 304 is a visit of the page as it was. A redirect or a
    meta refresh ends the visit, its target a URL of its own (rqcrawl.fetch.hops); `via`: the
    redirects that led to `url`. With `render`, the page is what the browser made of the
    response; without, a crawl with render = "auto" hands a page that needs the browser off
    (Visit.render)."""

    started = time.monotonic()
    try:
        conditional = prior.conditional_headers() if prior else None
        resp = fetch(  # a redirect ends the fetch: its target passes admission (hops)
            url, cfg, lambda hop: None, archive=archive, cookies=cookies,
            conditional=conditional, follow=False,
        )  # fmt: skip
    except FetchError as exc:
        failed = failed_visit(url, depth, exc)
        failed.fetch_s = time.monotonic() - started
        return failed
    fetch_s = time.monotonic() - started
    page_record = record(
        url,
        None,
        depth,
        final_url=resp.final_url,
        status=resp.status,
        content_type=resp.content_type,
    )
    obey, token = cfg.obey_page_directives, directives.product_token(cfg.user_agent)
    said = directives.from_headers(resp.headers, token) if obey else directives.Directives()
    page_record["noindex"] = said.noindex or None  # a header speaks for any type of body
    if resp.status == NOT_MODIFIED and prior:
        return _not_modified(page_record, resp, prior, fetch_s)
    if resp.redirect_to is not None:
        return _redirected(page_record, resp.redirect_to, via, cfg, fetch_s)
    if resp.body is None:
        page_record["outcome"] = "not_html"
        return Visit(page_record, {keys.skipped("not_html"): 1}, fetch_s=fetch_s)
    digest = hashlib.sha1(resp.body).hexdigest()
    text = decode(resp.body, resp.content_type)
    refresh = hops.meta_refresh(text, resp.final_url, cfg)
    if refresh is not None:
        page_record["bytes"] = len(resp.body)
        return _redirected(page_record, refresh, via, cfg, fetch_s)
    if render is not None:
        try:
            rendered = render(resp, text, cfg)
        except FetchError as exc:
            return failed_visit(url, depth, exc)
        text = rendered.html
        page_record.update(rendered=True, render_ms=rendered.ms)
        if rendered.timed_out:  # the DOM as it stood after render_timeout
            page_record["render_timed_out"] = True
    strip = param_filter(cfg.strip_params)
    page = parse(text, resp.final_url, strip, skip_nofollow=obey)
    if obey:
        said |= directives.from_meta(page.selector, token)
        page_record["noindex"] = said.noindex or None
    if render is None and choice.auto(cfg):
        why = choice.needs_rendering(page.selector, len(page.links))
        if why:
            return Visit(page_record, {}, fetch_s=fetch_s, render=why)
    page_record.update(outcome="fetched", title=page.title, bytes=len(resp.body))
    page_record["fields"] = extract_fields(page.selector, cfg.fields)
    counts = Counter({keys.FETCHED: 1, keys.links_dropped("bad"): page.bad_links})
    links = page.links
    if cfg.hook:
        hooked = hooks.run(
            cfg.hook,
            hooks.HookPage(
                url, resp.final_url, resp.status, resp.headers, text, page.selector, depth
            ),
        )
        page_record["fields"].update(hooked.fields)
        page_record["hook_error"] = hooked.error
        counts[keys.HOOK_ERRORS] += hooked.error is not None
        counts[keys.links_dropped("bad")] += hooked.bad_links
        links = list(dict.fromkeys(links + [strip(link) for link in hooked.links]))
    page_record["outlinks"] = len(links)
    links = _capped(links, cfg.max_links_per_page, page_record, counts)
    counts[keys.links_dropped("rel_nofollow")] += page.nofollow_links
    canonical = directives.canonical_from_headers(resp.headers, resp.final_url, strip)
    page_record["canonical"] = canonical = canonical or page.canonical
    if canonical not in (None, url, resp.final_url, *links):
        links = [*links, canonical]  # a link like the others: scope, rules, Bloom filter
    if said.nofollow:
        page_record["nofollow"] = True
        counts[keys.links_dropped("nofollow")] += len(links)
        links = []
    children = []
    if depth < cfg.max_depth:
        for link in links:
            if link in known:
                continue
            verdict = link_verdict(link, cfg)
            if verdict is not None and verdict.startswith("drop:"):
                counts[keys.links_dropped(verdict.removeprefix("drop:"))] += 1
            else:
                children.append((verdict, link))
    content = None
    if cfg.revisit:  # the simhash costs a few ms a page: only crawls that compare visits
        content = Content(
            digest, simhash(visible_text(page.selector)), resp.headers.get("etag"),
            resp.headers.get("last-modified"),
        )  # fmt: skip
    return Visit(page_record, counts, children, fetch_s=fetch_s, content=content)


def _redirected(
    page_record: dict, target: str, via: Sequence[str], cfg: CrawlConfig, fetch_s: float
) -> Visit:
    """A redirect (or meta refresh) of the page of `page_record` to `target`: recorded
    `redirected`, its target admitted as a URL of its own at the same depth (rqcrawl.fetch.hops).
    A target the scope or the link rules refuse makes that the page's outcome; a loop or
    a chain over `max_redirects` fails it."""
    url, status = page_record["url"], page_record["status"]
    page_record["redirect_to"] = target
    problem = hops.chain_problem(url, target, via, cfg)
    if problem:
        error = FetchError(problem, f"{problem.replace('_', ' ')} at {target}", status=status)
        failed = failed_visit(url, page_record["depth"], error)
        failed.record["redirect_to"], failed.fetch_s = target, fetch_s
        return failed
    verdict = link_verdict(target, cfg)
    if verdict is not None and verdict.startswith("drop:"):
        rule = verdict.removeprefix("drop:")
        page_record.update(outcome=rule, error=f"redirect to {target}: {rule}")
        return Visit(page_record, {keys.skipped(rule): 1}, fetch_s=fetch_s)
    page_record["outcome"] = "redirected"
    counts = {keys.skipped("redirected"): 1}
    return Visit(page_record, counts, [(verdict, target)], fetch_s=fetch_s, via=[*via, url])


def _not_modified(page_record: dict, resp: Response, prior: Prior, fetch_s: float) -> Visit:
    """A 304: the page as the last visit saw it (its digest; its links were admitted then,
    none is admitted again), the validators the server sent anew or the old ones."""
    page_record.update(outcome="fetched", not_modified=True)
    content = Content(
        prior.digest, None, resp.headers.get("etag") or prior.etag,
        resp.headers.get("last-modified") or prior.last_modified, not_modified=True,
    )  # fmt: skip
    return Visit(page_record, {keys.FETCHED: 1}, fetch_s=fetch_s, content=content)


def _capped(links: list[str], cap: int, record: dict, counts: Counter) -> list[str]:
    """The first `cap` links (0: all): a page of 100,000 links (a generated index, a trap)
    would cost its crawl that many URLs. The cut is recorded and counted, never silent."""
    if not cap or len(links) <= cap:
        return links
    cut = len(links) - cap
    record["links_cut"] = cut
    counts[keys.links_dropped("max_links_per_page")] += cut
    return links[:cap]
