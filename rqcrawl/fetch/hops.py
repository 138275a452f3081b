"""Redirects and meta refreshes: every hop is a request like any other.

A page's redirect (3xx with a Location) or meta refresh (`<meta http-equiv="refresh">` of at
most `max_meta_refresh_delay` seconds) ends its fetch. Its record says `redirected` and
`redirect_to`; the target is admitted as a URL of its own, at the SAME depth (a redirect is
not a click), through the normal admission: Bloom filter, scope, link and trap rules,
budgets. So it gets its host's robots.txt (fetched if needed), its host's politeness gate,
its lease, its retries and its record like any URL: a Disallowed target is recorded
`robots_disallowed` and the server never sees a request for it. Its record carries the
chain of redirects that led to it (`via`, first one first), kept in Redis until it ends.

The chain is bounded by `max_redirects` (its length is the hop count); a target already in
the chain is a loop (`redirect_loop`). A target admitted before (linked from a page, or
reached by another chain) is not fetched twice: the Bloom filter says so.

Exact depth: the target joins the level in progress, at the head of its list, in the same
atomic step that ends the redirecting URL, so the level cannot end before it and it is
released before the next level's URLs (scripts.FINISH).
"""

from __future__ import annotations

from collections.abc import Sequence

from w3lib.html import get_meta_refresh

from rqcrawl.config import CrawlConfig
from rqcrawl.parse.urls import InvalidURL, canonicalize

# A refresh page's <meta> is in its <head>: scanning its first characters only keeps a huge
# page cheap.
REFRESH_SCAN = 64 * 1024


def meta_refresh(text: str, base: str, cfg: CrawlConfig) -> str | None:
    """The canonical target of the page's meta refresh when it is followed (a delay of at
    most `max_meta_refresh_delay` seconds, a valid URL other than the page's own), else
    None."""
    if not cfg.follow_meta_refresh:
        return None
    try:
        delay, target = get_meta_refresh(text[:REFRESH_SCAN], base)
    except ValueError:  # w3lib joins the target itself: `http://[`, a port of 99999
        return None
    if target is None or delay is None or delay > cfg.max_meta_refresh_delay:
        return None
    try:
        url = canonicalize(target, base)
    except InvalidURL:
        return None
    return None if url == canonicalize(base) else url


def chain_problem(url: str, target: str, via: Sequence[str], cfg: CrawlConfig) -> str | None:
    """Why the hop from `url` (led to by `via`) to `target` is not taken: `redirect_loop`,
    `too_many_redirects`, or None."""
    chain = [*via, url]
    if target in chain:
        return "redirect_loop"
    if len(chain) > cfg.max_redirects:
        return "too_many_redirects"
    return None
