"""Sitemaps as a discovery source: the URLs a seed site lists in its sitemaps join the crawl
at depth 1, as if a seed linked to them.

Each sitemap document is a crawl entry of its own, `sitemap:<document URL>`, held at depth 0
like a seed (past the Bloom filter and the budgets: it is not a page of the crawl) and run by
the same job as a page. So it gets what a page gets: robots.txt (a document it disallows is
never requested), the politeness gate, the address guard, leases, retries, pause and cancel;
and it takes part in the exact finish and the level barrier: while a document is in flight,
level 1 is not released, so every URL of the seed sites' sitemaps is admitted at depth 1 and
the crawl is not `finished`.

A seed site's first sitemaps are those the `Sitemap:` lines of its robots.txt name, held by
the job that fetches robots.txt for the site (Frontier.sitemaps_named): no request and no turn
of the host's pace of their own. With `sitemap_probe` the site's `/sitemap.xml` is read as well
(a 404 of it costs that one request and nothing else), and sitemaps given in `sitemap_urls`
are entries of their own. A sitemap index holds its sitemaps as more entries, each once per
crawl, at most `max_sitemaps_per_host` per site (an index naming itself or 10,000 sitemaps
stops there).
Gzip (every member) and plain-text sitemaps are read; a body over `max_sitemap_bytes` after
gunzip is not.
XML goes through defusedxml with DTDs forbidden (no entity expansion, no external entities).
A site's sitemaps give at most `max_sitemap_urls` admitted page URLs; each goes through the
scope, the link rules, the trap rules, the Bloom filter and the budgets like a link, and its
record says `source: "sitemap"`. In a crawl with revisits, documents are read again on their
own schedule and a listed URL's `<lastmod>` after its last visit makes it due at once
(Frontier.finish_sitemap, TaskTable.pull_forward). A sitemap's `<priority>` p (0.0 to
1.0, 0.5 when absent) adds round((p - 0.5) * 10) (-5 to +5) to the priority the seed's links
get (`priority_share`).
A document that cannot be read is counted by reason (`sitemap_problems:`) and logged in one
line; it never fails the crawl.
"""

from __future__ import annotations

import hashlib
import math
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import NamedTuple
from xml.etree.ElementTree import Element, ParseError

from rqcrawl.config import CrawlConfig
from rqcrawl.fetch.http import FetchError, fetch
from rqcrawl.frontier import keys, requisites
from rqcrawl.frontier.rules import link_verdict
from rqcrawl.parse.urls import InvalidURL, canonicalize, in_scope

PREFIX = "sitemap:"
PATH = "/sitemap.xml"  # where a seed site's sitemap is looked for with `sitemap_probe`
GZIP_MAGIC = b"\x1f\x8b"
PRIORITY_STEPS = 10  # sitemap priority 0.0..1.0 -> -5..+5 around the links' priority
DAY = 86_400.0


def entry(document: str) -> str:
    """The crawl entry of a sitemap document."""
    return PREFIX + document


def document(url: str) -> str | None:
    """The sitemap document of a crawl entry, or None for a page URL (a page URL is http(s):
    none starts with PREFIX)."""
    return url[len(PREFIX) :] if url.startswith(PREFIX) else None


def target(url: str) -> str:
    """What a crawl entry requests: the document of a sitemap entry, the resource of a
    requisite's (rqcrawl.frontier.requisites), else the URL itself."""
    return document(url) or requisites.resource(url) or url


def root(site: str) -> str:
    """A seed site's /sitemap.xml (`sitemap_probe`)."""
    return site + PATH


def is_root(doc: str, site: str) -> bool:
    return doc == root(site)


def named_in(robots_url: str, named: list[str], cfg: CrawlConfig) -> Found:
    """The sitemaps a site's robots.txt names (`robots_url`'s `Sitemap:` lines), those in the
    crawl's scope, with the problems of the others counted."""
    found = Found()
    _add_sitemaps(found, named, robots_url, cfg)
    return found


class Listed(NamedTuple):
    """A page URL a sitemap lists: its link verdict, the URL, its priority offset and its
    `<lastmod>` (epoch seconds, None when absent or unusable)."""

    verdict: str | None
    url: str
    offset: int
    lastmod: float | None


@dataclass
class Found:
    """What one sitemap document gave: page URLs, sitemaps it names, counters; `problem`
    ("reason: message") when it could not be read in full, `error` when trying again later
    may help; `digest` (SHA-1 of the body) when it was downloaded, else the failed answer's
    `status` (for the task table of a crawl with revisits)."""

    pages: list[Listed] = field(default_factory=list)
    sitemaps: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    problem: str = ""
    error: FetchError | None = None
    digest: str | None = None
    status: int | None = None

    @classmethod
    def failed(cls, reason: str, message: str, error: FetchError | None = None) -> Found:
        return cls(counts=Counter({keys.sitemap_problem(reason): 1}), problem=message, error=error)


def read(doc: str, cfg: CrawlConfig, named: list[str], quiet_404: bool) -> Found:
    """Fetch and parse the sitemap `doc`, plus the sitemaps `named` by robots.txt (for a
    site's first document). A 404 is quiet when `quiet_404` (the site's `/sitemap.xml`,
    which most sites do not have). Never raises for anything a server can send."""
    found = Found()
    _add_sitemaps(found, named, doc, cfg)
    try:
        body = _download(doc, cfg)
    except FetchError as exc:
        if quiet_404 and exc.status == 404:
            found.status = exc.status
            return found
        failed = Found.failed(exc.reason, f"{doc}: {exc}", exc if exc.transient else None)
        failed.sitemaps, failed.status = found.sitemaps, exc.status
        failed.counts.update(found.counts)
        return failed
    found.digest = hashlib.sha1(body).hexdigest()
    from defusedxml import DefusedXmlException  # only sitemap documents are XML

    try:
        _parse(body, doc, cfg, found)
    except DefusedXmlException:
        found.counts[keys.sitemap_problem("malformed")] += 1
        found.problem = f"{doc}: not read: a DTD (entity declarations) is not allowed"
        return found
    except (ParseError, ValueError) as exc:
        found.counts[keys.sitemap_problem("malformed")] += 1
        found.problem = f"{doc}: not a readable sitemap: {_one_line(exc)}"
        return found
    found.counts[keys.SITEMAPS] += 1
    found.counts[keys.SITEMAP_URLS] += len(found.pages)
    return found


def _download(doc: str, cfg: CrawlConfig) -> bytes:
    """The document's bytes, gunzipped, at most `max_sitemap_bytes` (also a decompression
    bomb's cap: a gzip file is inflated only that far)."""
    cap = cfg.max_sitemap_bytes
    capped = replace(cfg, max_body_bytes=cap)

    def check_hop(hop: str) -> str | None:
        return None if in_scope(hop, cfg.scope_hosts) else "out_of_scope"

    resp = fetch(doc, capped, check_hop, any_type=True)
    body = resp.body or b""
    if not body.startswith(GZIP_MAGIC):
        return body
    return _gunzip(body, cap)


def _gunzip(body: bytes, cap: int) -> bytes:
    """Every member of a gzip file (a sitemap appended to is several, one after the other),
    inflated together at most `cap` bytes far. What follows the last member and is not one
    (zero padding) is ignored, as gzip does."""
    out = bytearray()
    rest = body
    while rest.startswith(GZIP_MAGIC):
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += inflate.decompress(rest, cap + 1 - len(out))
        except zlib.error as exc:
            raise FetchError("bad_gzip", f"bad gzip: {exc}") from None
        if len(out) > cap:
            raise FetchError("too_large", f"over {cap} bytes after gunzip")
        if not inflate.eof:  # cut short: what it held so far
            break
        rest = inflate.unused_data
    return bytes(out)


def _parse(body: bytes, doc: str, cfg: CrawlConfig, found: Found) -> None:
    """An XML sitemap or index (sitemaps.org), or a plain-text one (one URL a line)."""
    if not body.lstrip()[:1] == b"<":
        for line in body.decode("utf-8", "replace").splitlines():
            if line.strip():
                _add_page(found, line.strip(), None, doc, cfg)
        return
    import defusedxml.ElementTree as SafeET  # noqa: N813 (defusedxml's documented name)

    tree = SafeET.fromstring(body, forbid_dtd=True)
    kind = _local(tree)
    if kind == "urlset":
        for item in tree:
            if _local(item) == "url":
                priority, lastmod = _text(item, "priority"), _text(item, "lastmod")
                _add_page(found, _text(item, "loc"), priority, doc, cfg, lastmod)
    elif kind == "sitemapindex":
        names = [_text(item, "loc") for item in tree if _local(item) == "sitemap"]
        _add_sitemaps(found, [n for n in names if n], doc, cfg)
    else:
        raise ValueError(f"root element <{kind}> is neither <urlset> nor <sitemapindex>")


def _add_page(
    found: Found, loc: str, priority: str | None, doc: str, cfg: CrawlConfig, lastmod: str = ""
) -> None:
    try:
        if not loc:
            raise InvalidURL("empty <loc>")
        url = canonicalize(loc, doc, cfg.url_filter)
    except InvalidURL:
        found.counts[keys.links_dropped("bad")] += 1
        return
    verdict = link_verdict(url, cfg)
    if verdict is not None and verdict.startswith("drop:"):
        found.counts[keys.links_dropped(verdict.removeprefix("drop:"))] += 1
    else:
        found.pages.append(Listed(verdict, url, priority_offset(priority), lastmod_time(lastmod)))


def _add_sitemaps(found: Found, locs: list[str], doc: str, cfg: CrawlConfig) -> None:
    """Keep the sitemaps within the crawl's scope (others are never requested)."""
    for loc in locs:
        try:
            url = canonicalize(loc, doc)
        except InvalidURL:
            found.counts[keys.sitemap_problem("bad_url")] += 1
            continue
        if in_scope(url, cfg.scope_hosts):
            found.sitemaps.append(url)
        else:
            found.counts[keys.sitemap_problem("out_of_scope")] += 1


def priority_offset(text: str | None) -> int:
    """A sitemap `<priority>` as an offset of our integer priority: round((p - 0.5) * 10);
    0 when absent or not a number in [0, 1]."""
    try:
        p = float(text) if text is not None else 0.5
    except ValueError:
        return 0
    if not math.isfinite(p) or not 0.0 <= p <= 1.0:
        return 0
    return round((p - 0.5) * PRIORITY_STEPS)


def lastmod_time(text: str, now: float | None = None) -> float | None:
    """A `<lastmod>` (W3C Datetime: `2026-11-23`, `2026-11-23T18:00:00+01:00`, ... , or a
    year or month alone) in epoch seconds, UTC when it has no zone; None when absent, not a
    date, or more than a day ahead of `now` (a clock or a page claiming a future change)."""
    if not text:
        return None
    padded = text + "-01-01"[len(text) - 4 :] if len(text) in (4, 7) else text
    try:
        when = datetime.fromisoformat(padded.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    stamp = when.timestamp()
    return stamp if stamp <= (now or time.time()) + DAY else None


def _local(element: Element) -> str:
    """An element's name without its namespace."""
    return str(element.tag).rpartition("}")[2]


def _text(parent: Element, name: str) -> str:
    """The text of `parent`'s first child called `name` (any namespace), or ''."""
    for child in parent:
        if _local(child) == name:
            return (child.text or "").strip()
    return ""


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__
