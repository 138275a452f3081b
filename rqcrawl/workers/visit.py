"""A page's visit: fetch (archiving the responses) and parse one URL into a Visit, the
record and the links that settling writes. Nothing here touches the crawl's state in Redis:
a visit is a pure step between the gate and settling (rqcrawl.workers.jobs), which is what
lets tests visit a page without a crawl.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from urllib.parse import urlsplit

from rq.job import Job

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch import hops, warc
from rqcrawl.fetch.cookies import Cookies
from rqcrawl.fetch.http import NOT_MODIFIED, Archive, FetchError, Response, fetch, no_archive
from rqcrawl.fetch.robots import Robots
from rqcrawl.frontier import keys, requisites
from rqcrawl.frontier.records import record
from rqcrawl.frontier.rules import SentLinks, judge_links, link_verdict
from rqcrawl.ops import stats
from rqcrawl.parse import directives, hooks, rendering
from rqcrawl.parse import requisites as found_in
from rqcrawl.parse.changes import Content, Prior, simhash, visible_text
from rqcrawl.parse.content import page_content
from rqcrawl.parse.extract import Page, decode, extract_fields, parse
from rqcrawl.parse.rendering import Rendered
from rqcrawl.parse.urls import canonicalize
from rqcrawl.workers import process_name
from rqcrawl.workers.crawls import Crawl

# Permanent fetch outcomes that mean "not for us" rather than "broken": counted as skips.
SKIP_REASONS = {"out_of_scope", "refused_address", "not_html"}


@dataclass
class Visit:
    """The result of visiting one URL, before it is written to Redis."""

    record: dict
    counts: dict[str, int]
    children: list[tuple[str | None, str]] = field(default_factory=list)
    error: FetchError | None = None  # set when the failure is transient
    fetch_s: float | None = None  # how long the fetch took (parsing and the hook left out)
    content: Content | None = None  # what a fetched visit saw (change detection of revisits)
    digest: bytes = b""  # a fetched page's body digest, when the crawl detects duplicates
    # A redirect or meta refresh (rqcrawl.fetch.hops): `children` is its target, admitted at the
    # same depth, led to by this chain of redirects (the URL's own `via` and the URL).
    via: list[str] | None = None
    retry_after: float | None = None  # the server's Retry-After, if it sent one
    render: str | None = None  # why the page needs the browser (render = "auto"): handed off
    # A page whose depth a shorter path may still lower (exact depth): all its links, and
    # those that max_depth cut (see messages.Ending)
    links: list[tuple[str | None, str]] | None = None
    cut: list[tuple[str | None, str]] = field(default_factory=list)
    # The entries of what a fetched page loads, to archive (rqcrawl.frontier.requisites)
    requisites: list[str] = field(default_factory=list)


# Told once a visit's request has ended, before its response is parsed: the request's
# seconds, its status (None: no answer) and the server's Retry-After (gate.Answered).
Answered = Callable[[float, int | None, float | None], None]


# The browser's step of a visit (rqcrawl.render.browser): the rendered page of a response fetched
# with HTTP, with the crawl, the worker and the robots.txt verdict of the page's site bound.
Renderer = Callable[..., Rendered]


@dataclass(frozen=True)
class Visiting:
    """How visit fetches and parses a page (its keyword arguments, see visit)."""

    archive: Archive = no_archive
    known: SentLinks = field(default_factory=SentLinks)
    cookies: Cookies | None = None
    prior: Prior | None = None
    via: Sequence[str] = ()
    render: Renderer | None = None
    speculative: bool = False
    answered: Answered | None = None  # told when the request ended, before any parsing


@dataclass(frozen=True)
class Parsed:
    """An HTML page as visit's parse step read it: its text (the browser's DOM when it
    rendered the page), the parsed page, its robots directives, and the rendering."""

    text: str
    page: Page
    said: directives.Directives
    rendered: Rendered | None


def fetch_and_parse(
    job: Job, c: Crawl, url: str, depth: int, robots: Robots | None, how: Visiting
) -> Visit:
    """The visit of `url`, claimed by `job`, once the gate let it through (`how`: its
    redirects, browser step and whether it is speculative): with the crawl's archive,
    cookies and admitted links, the prior visit's validators (revisits), and the browser
    step bound to this crawl, worker and robots.txt verdict."""
    prior = c.frontier.prior(url)
    archive = warc.archive(
        c.frontier.crawl, c.cfg, job.worker_name and process_name(job.worker_name), prior
    )
    render = how.render
    if render is not None:
        allows = partial(_robots_allow, robots, c.cfg.agent)
        render = partial(render, crawl=c.frontier.crawl, worker=job.worker_name, allows=allows)
    how = replace(
        how, archive=archive, known=c.frontier.known, cookies=c.cookies, prior=prior,
        render=render,
    )  # fmt: skip
    return visit(url, depth, c.cfg, how=how)


def _robots_allow(robots: Robots | None, ua: str, url: str) -> bool:
    """Whether robots.txt of the page's site lets the browser request `url` of that site."""
    return robots is None or robots.allows(url, ua)


def failed_visit(url: str, depth: int, exc: FetchError) -> Visit:
    """The visit of a URL whose fetch failed with `exc` (retried later when transient)."""
    outcome = exc.reason if exc.reason in SKIP_REASONS else "failed"
    failed = record(url, outcome, depth, status=exc.status, error=str(exc))
    if outcome == "failed":
        failed["reason"] = stats.failure_reason(exc.reason, exc.status)
    counter = keys.skipped(exc.reason) if outcome != "failed" else keys.FAILED
    error = exc if exc.transient else None
    return Visit(failed, {counter: 1}, error=error, retry_after=exc.retry_after)


def visit(url: str, depth: int, cfg: CrawlConfig, how: Visiting | None = None) -> Visit:
    """Fetch (archiving the responses) and parse `url`, extract its fields, run the hook;
    never raises for anything a web server can do. A page over max_body_bytes is parsed up
    to it (recorded `truncated`): a generated index may be the only page linking some.
    `how` (Visiting) holds the rest. Links in `how.known` were already admitted or refused
    by this process at their depth or less: they are not judged again (the frontier drops
    them); a `speculative` page keeps them all (see Visit).
    Cookies are sent and kept in `cookies`, if given. With the `prior` visit's validators
    the GET is conditional, and a 304 is a visit of the page as it was. A redirect or a
    meta refresh ends the visit, its target a URL of its own (rqcrawl.fetch.hops); `via`: the
    redirects that led to `url`. With `render`, the page is what the browser made of the
    response; without, a crawl with render = "auto" hands a page that needs the browser off
    (Visit.render). `how.answered` is told as soon as the request ended (its response read
    or its fetch failed), before any parsing: the job's host may take its next request."""
    how = how or Visiting()
    started = time.monotonic()
    try:
        conditional = how.prior.conditional_headers() if how.prior else None
        resp = fetch(  # a redirect ends the fetch: its target passes admission (hops)
            url, cfg, lambda hop: None, truncate_at=cfg.max_body_bytes, archive=how.archive,
            cookies=how.cookies, conditional=conditional, follow=False,
        )  # fmt: skip
    except FetchError as exc:
        failed = failed_visit(url, depth, exc)
        failed.fetch_s = time.monotonic() - started
        if how.answered is not None:
            how.answered(failed.fetch_s, exc.status, exc.retry_after)
        return failed
    fetch_s = time.monotonic() - started
    if how.answered is not None:
        how.answered(fetch_s, resp.status, None)
    return _parsed(url, depth, cfg, resp, fetch_s, how)


def _parsed(
    url: str, depth: int, cfg: CrawlConfig, resp: Response, fetch_s: float, how: Visiting
) -> Visit:
    """The visit that the response `resp` of `url` makes (visit's parse step): a 304, a
    redirect, a type we do not parse, a page handed to the browser, or the page's record,
    fields and links (_fetched)."""
    prior, via, render, speculative = how.prior, how.via, how.render, how.speculative
    page_record = record(
        url,
        None,
        depth,
        final_url=resp.final_url,
        status=resp.status,
        content_type=resp.content_type,
    )
    obey, token = cfg.obey_page_directives, directives.product_token(cfg.agent)
    said = directives.from_headers(resp.headers, token) if obey else directives.Directives()
    page_record["noindex"] = said.noindex or None  # a header speaks for any type of body
    if resp.status == NOT_MODIFIED and prior:
        return _not_modified(page_record, resp, prior, fetch_s)
    if resp.redirect_to is not None:
        return _redirected(page_record, resp.redirect_to, via, cfg, fetch_s, speculative)
    if resp.body is None:
        page_record["outcome"] = "not_html"
        if cfg.content:
            page_record["content_skipped"] = "not html"
        return Visit(page_record, {keys.skipped("not_html"): 1}, fetch_s=fetch_s)
    text = decode(resp.body, resp.content_type)
    refresh = hops.meta_refresh(text, resp.final_url, cfg)
    if refresh is not None:
        page_record["bytes"] = len(resp.body)
        return _redirected(page_record, refresh, via, cfg, fetch_s, speculative)
    rendered = None
    if render is not None:
        try:
            rendered = render(resp, text, cfg)
        except FetchError as exc:
            return failed_visit(url, depth, exc)
        text = rendered.html
        page_record.update(rendered=True, render_ms=rendered.ms)
        if rendered.timed_out:  # the DOM as it stood after render_timeout
            page_record["render_timed_out"] = True
    strip = cfg.url_filter
    page = parse(text, resp.final_url, strip, skip_nofollow=obey)
    if obey:
        said |= directives.from_meta(page.selector, token)
        page_record["noindex"] = said.noindex or None
    if render is None and rendering.auto(cfg.render):
        why = rendering.needs_rendering(page.selector, len(page.links))
        if why:
            return Visit(page_record, {}, fetch_s=fetch_s, render=why)
    return _fetched(page_record, resp, Parsed(text, page, said, rendered), cfg, fetch_s, how)


def _fetched(
    page_record: dict, resp: Response, parsed: Parsed, cfg: CrawlConfig, fetch_s: float,
    how: Visiting,
) -> Visit:  # fmt: skip
    """The visit of an HTML page `parsed` from `resp`: its record, fields and content, its
    links (the hook's among them) judged for admission, its digests and requisites."""
    url, depth, page = page_record["url"], page_record["depth"], parsed.page
    page_record.update(outcome="fetched", title=page.title, bytes=len(resp.body))
    page_record["truncated"] = resp.truncated or None  # its links: those of the part read
    page_record["fields"] = extract_fields(page.selector, cfg.fields)
    if cfg.content:  # the rendered DOM's content when the browser made the page
        page_record["content"], skipped = page_content(
            parsed.text, page, resp.final_url, cfg.content, cfg.content_max_bytes,
            cfg.content_timeout,
        )  # fmt: skip
        if skipped:
            page_record["content_skipped"] = skipped
    counts = Counter({keys.FETCHED: 1, keys.links_dropped("bad"): page.bad_links})
    links = _hooked(page_record, resp, parsed, cfg, counts) if cfg.hook else page.links
    page_record["outlinks"] = len(links)
    links = _capped(links, cfg.max_links_per_page, page_record, counts)
    counts[keys.links_dropped("rel_nofollow")] += page.nofollow_links
    canonical = directives.canonical_from_headers(resp.headers, resp.final_url, cfg.url_filter)
    page_record["canonical"] = canonical = canonical or page.canonical
    if canonical not in (None, url, resp.final_url, *links):
        links = [*links, canonical]  # a link like the others: scope, rules, Bloom filter
    if parsed.said.nofollow:
        page_record["nofollow"] = True
        counts[keys.links_dropped("nofollow")] += len(links)
        links = []
    children, judged = judge_links(links, depth, cfg, how.known, counts, how.speculative)
    content = None
    if cfg.revisit:  # the simhash costs a few ms a page: only crawls that compare visits
        content = Content(
            hashlib.sha1(resp.body).hexdigest(), simhash(visible_text(page.selector)),
            resp.headers.get("etag"), resp.headers.get("last-modified"),
        )  # fmt: skip
    # (a crawl with revisits has the task table find duplicates, at every visit)
    duplicates = cfg.detect_duplicates and not cfg.revisit
    visited = Visit(
        page_record, counts, children, fetch_s=fetch_s, content=content,
        digest=site_digest(resp.final_url, resp.body) if duplicates else b"",
    )  # fmt: skip
    if how.speculative:
        visited.links = judged
        visited.cut = [] if depth < cfg.max_depth else judged
    if requisites.fetched(cfg):  # (the page's elements walked only for an archive)
        visited.requisites, cut = requisites.wanted(_loads(page, parsed.rendered), cfg)
        counts.update(cut)
    return visited


def _hooked(
    page_record: dict, resp: Response, parsed: Parsed, cfg: CrawlConfig, counts: Counter
) -> list[str]:
    """Run the crawl's hook on the page: its fields go in the record, its error is recorded
    and counted; returns the page's links with the hook's."""
    hooked = hooks.run(
        cfg.hook,
        hooks.HookPage(
            page_record["url"],
            resp.final_url,
            resp.status,
            resp.headers,
            parsed.text,
            parsed.page.selector,
            page_record["depth"],
            # a copy: what the hook does to it must not rewrite the record's content
            dict(page_record["content"]) if cfg.content else None,
        ),
    )
    page_record["fields"].update(hooked.fields)
    page_record["hook_error"] = hooked.error
    counts[keys.HOOK_ERRORS] += hooked.error is not None
    counts[keys.links_dropped("bad")] += hooked.bad_links
    extra = [cfg.url_filter(link) for link in hooked.links]
    return list(dict.fromkeys(parsed.page.links + extra))


def _loads(page: Page, rendered: Rendered | None) -> list[str]:
    """What the page loads to show itself, but what the browser that rendered it loaded
    (archived already, rqcrawl.render.browser)."""
    loads = found_in.of_html(page.selector, page.base)
    if rendered is None:
        return loads
    loaded = set(found_in.resolved(rendered.loaded, page.base))
    return [u for u in loads if u not in loaded]


def site_digest(url: str, body: bytes) -> bytes:
    """The digest that finds a page's exact duplicates within its host: a site serving one
    page under many URLs (`//` paths, session ids) is crawled once, while mirrors and hosts
    serving the same default page are each crawled as the sites they are."""
    return hashlib.sha1(urlsplit(url).netloc.encode() + b"\0" + body).digest()


def _redirected(
    page_record: dict,
    target: str,
    via: Sequence[str],
    cfg: CrawlConfig,
    fetch_s: float,
    speculative: bool = False,
) -> Visit:
    """A redirect (or meta refresh) of the page of `page_record` to `target`: recorded
    `redirected`, its target admitted as a URL of its own at the same depth (rqcrawl.fetch.hops).
    A target the scope or the link rules refuse makes that the page's outcome; a loop or
    a chain over `max_redirects` fails it. The target loses strip_params as a link does, or
    a tracking parameter in a Location would fetch a page twice."""
    url, status = page_record["url"], page_record["status"]
    target = canonicalize(target, strip=cfg.url_filter)
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
    children = [(verdict, target)]
    return Visit(
        page_record, counts, children, fetch_s=fetch_s, via=[*via, url],
        links=children if speculative else None,
    )  # fmt: skip


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
