"""A page's requisites (rqcrawl.parse.requisites: the stylesheets, scripts, images and fonts
it loads) as crawl entries, so that an archive replays the page as it looked: fetched and
archived in the WARC files, never recorded as pages.

Only crawls with `warc_dir` (and `requisites` on) fetch them. Each requisite is a crawl entry
of its own, `requisite:<URL>`, like a sitemap document (rqcrawl.frontier.sitemaps): held at
its page's depth, run by the same frame of job as a page (claim, lease, robots.txt, its
host's pace and slot, the address guard, retries, pause and cancel), and part of the exact
finish (a crawl is not finished while one is in flight). Unlike a page it is admitted past
the budgets (not counted in `max_pages`), leaves no record and no links, and its body may
be of any type. Each is admitted once per crawl through the Bloom filter (as its entry, so
that a URL both linked and loaded is fetched as a page and as a requisite: the page's record
and the archive each get theirs). A page gives at most `max_requisites_per_page`, those of
the crawl's hosts (`scope_hosts`) and of `requisite_hosts` ("*": any); a stylesheet's own
url() and @import are requisites of the same depth. A body over `max_requisite_bytes` is
not archived (counted as a problem `too_large`). A redirect is archived and its target held
as another requisite, through the same gate.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.http import Archive, FetchError, fetch
from rqcrawl.frontier import keys
from rqcrawl.parse import requisites as found_in
from rqcrawl.parse.extract import decode
from rqcrawl.parse.urls import InvalidURL, canonicalize, host_of

PREFIX = "requisite:"
ANY_HOST = "*"


def entry(url: str) -> str:
    """The crawl entry of a requisite."""
    return PREFIX + url


def resource(url: str) -> str | None:
    """The requisite of a crawl entry, or None for another URL (a page URL is http(s))."""
    return url[len(PREFIX) :] if url.startswith(PREFIX) else None


def fetched(cfg: CrawlConfig) -> bool:
    """Whether the crawl fetches its pages' requisites (it archives, and did not opt out)."""
    return bool(cfg.warc_dir and cfg.requisites)


def wanted(urls: list[str], cfg: CrawlConfig) -> tuple[list[str], Counter]:
    """The entries of the requisites `urls` (of one page or stylesheet) that the crawl
    fetches: on its hosts or `requisite_hosts`, the first `max_requisites_per_page`; with
    the count of those cut."""
    if not fetched(cfg):
        return [], Counter()
    hosts = set(cfg.scope_hosts) | set(cfg.requisite_hosts)
    kept = [u for u in urls if ANY_HOST in hosts or host_of(u) in hosts]
    cap = cfg.max_requisites_per_page
    counts = Counter({keys.REQUISITES_CUT: max(0, len(kept) - cap)})
    return [entry(u) for u in kept[:cap]], counts


@dataclass
class Got:
    """What fetching one requisite gave: the entries it loads in turn (a stylesheet's, a
    redirect's target), counters, and `error` when trying again later may help."""

    more: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    error: FetchError | None = None


def read(url: str, cfg: CrawlConfig, archive: Archive) -> Got:
    """Fetch the requisite `url` into `archive` (the fetch archives every response) and
    find what it loads in turn. Never raises for anything a server can send."""
    capped = replace(cfg, max_body_bytes=cfg.max_requisite_bytes)
    try:
        resp = fetch(url, capped, lambda hop: None, any_type=True, archive=archive, follow=False)
    except FetchError as exc:
        got = Got(error=exc if exc.transient else None)
        got.counts[keys.requisite_problem(exc.reason)] += 1
        return got
    got = Got(counts=Counter({keys.REQUISITES_ARCHIVED: 1}))
    if resp.redirect_to is not None:
        try:
            more = [canonicalize(resp.redirect_to, url)]
        except InvalidURL:
            more = []
    else:
        got.counts[keys.REQUISITE_BYTES] += len(resp.body or b"")
        css = "css" in resp.content_type or url.split("?")[0].endswith(".css")
        more = found_in.of_css(decode(resp.body, resp.content_type), url) if css else []
    got.more, cut = wanted(more, cfg)
    got.counts.update(cut)
    return got
