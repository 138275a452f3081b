"""Which discovered links become crawl URLs, the Python half of link admission: scope, the
user's link rules and URL-shape (trap) rules, as a verdict per link (link_verdict), and
which of a page's links are sent to the frontier at all (judge_links, with the links this
process already sent: SentLinks).

A verdict is None (admit) or a short reason. Reasons starting with `drop:` are links that are
not part of the crawl at all (other sites, or links the user's link rules exclude): they are
only counted. The other reasons are crawl URLs refused by a trap rule: they are recorded once
in the export with that reason, so an operator sees what was left out and why.

The other half runs in Redis, in the finish step that ends the page (scripts.FINISH, run by
rqcrawl.frontier.admission): a refused link is recorded once; an admitted one passes the
Bloom filter's check-and-add (lua/bloom.lua: new to the crawl?), the budgets (max_pages,
max_pages_per_host, max_host_share) and, when known already, exact depth (lua/depth.lua:
lowered when found shorter). It stays in Lua because it must be atomic with the page's end
and shared by every worker; what a worker can decide alone (the rules, and what it sent
already) is decided here, before any Redis work.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from rqcrawl.config import CrawlConfig
from rqcrawl.defaults import KNOWN_MAX
from rqcrawl.frontier import keys
from rqcrawl.parse.urls import in_scope


def link_verdict(link: str, cfg: CrawlConfig) -> str | None:
    """None when `link` should be admitted, else why not."""
    if not in_scope(link, cfg.scope_hosts):
        return "drop:out_of_scope"
    return user_link_verdict(link, cfg) or trap_verdict(link, cfg)


def trap_verdict(url: str, cfg: CrawlConfig) -> str | None:
    """URL shapes that crawler traps generate: very long URLs, paths that repeat a segment
    (`/a/b/a/b/a/b/...`, relative-link loops) and queries with very many parameters."""
    if len(url) > cfg.max_url_length:
        return "too_long"
    parts = urlsplit(url)
    segments = Counter(s for s in parts.path.split("/") if s)
    if segments and max(segments.values()) > cfg.max_segment_repeats:
        return "repeated_segments"
    if parts.query and parts.query.count("&") + 1 > cfg.max_query_params:
        return "too_many_params"
    return None


@dataclass(frozen=True)
class LinkRules:
    """The user's link rules of a crawl, compiled once per process."""

    allow: tuple[re.Pattern, ...]
    deny: tuple[re.Pattern, ...]
    allow_domains: tuple[str, ...]
    deny_domains: tuple[str, ...]
    deny_suffixes: tuple[str, ...]  # ".pdf", ".tar.gz": compared with the lowercased path


@lru_cache(maxsize=64)
def _compiled(
    allow: tuple[str, ...],
    deny: tuple[str, ...],
    allow_domains: tuple[str, ...],
    deny_domains: tuple[str, ...],
    extensions: tuple[str, ...],
) -> LinkRules:
    return LinkRules(
        allow=tuple(re.compile(p) for p in allow),
        deny=tuple(re.compile(p) for p in deny),
        allow_domains=tuple(d.lower().strip(".") for d in allow_domains),
        deny_domains=tuple(d.lower().strip(".") for d in deny_domains),
        deny_suffixes=tuple("." + e.lower().lstrip(".") for e in extensions),
    )


def link_rules(cfg: CrawlConfig) -> LinkRules:
    """The compiled rules of `cfg` (a crawl's config never changes, so they are cached)."""
    return _compiled(
        tuple(cfg.link_allow),
        tuple(cfg.link_deny),
        tuple(cfg.link_allow_domains),
        tuple(cfg.link_deny_domains),
        tuple(cfg.link_deny_extensions),
    )


def user_link_verdict(link: str, cfg: CrawlConfig) -> str | None:
    """The user's link rules, Scrapy LinkExtractor style: denied domains, allowed domains
    (a domain covers its subdomains), denied file extensions of the path (by default
    Scrapy's IGNORED_EXTENSIONS: archives, images, audio, video, office files...), then the
    `link_deny` and `link_allow` regular expressions, searched anywhere in the URL."""
    rules = link_rules(cfg)
    parts = urlsplit(link)
    host = (parts.hostname or "").lower()
    if rules.deny_domains and _in_domains(host, rules.deny_domains):
        return "drop:denied_domain"
    if rules.allow_domains and not _in_domains(host, rules.allow_domains):
        return "drop:domain_not_allowed"
    if parts.path.lower().endswith(rules.deny_suffixes):
        return "drop:denied_extension"
    if any(p.search(link) for p in rules.deny):
        return "drop:denied_url"
    if rules.allow and not any(p.search(link) for p in rules.allow):
        return "drop:url_not_allowed"
    return None


def _in_domains(host: str, domains: tuple[str, ...]) -> bool:
    return any(host == d or host.endswith("." + d) for d in domains)


class SentLinks:
    """The links this process sent to the finish step, each at the least depth it was sent
    (at most KNOWN_MAX, then forgotten at once): one known at a depth or less is neither
    judged nor sent again, its Bloom check would be a no-op. A process forgets what a
    failover may have lost (see CrawlState.remembers)."""

    def __init__(self) -> None:
        self._depths: dict[str, int] = {}

    def sent_at(self, url: str, depth: int) -> bool:
        """Whether `url` was sent at `depth` or less."""
        return self._depths.get(url, depth + 1) <= depth

    def note(self, urls: Iterable[str], depth: int) -> None:
        """`urls` were sent at `depth`."""
        if len(self._depths) > KNOWN_MAX:
            self._depths.clear()
        for url in urls:
            self._depths[url] = min(self._depths.get(url, depth), depth)

    def clear(self) -> None:
        self._depths.clear()


def judge_links(
    links: list[str], depth: int, cfg: CrawlConfig, known: SentLinks, counts: Counter,
    speculative: bool,
) -> tuple[list[tuple[str | None, str]], list[tuple[str | None, str]]]:  # fmt: skip
    """The links of a page of `depth` to admit one deeper (within max_depth, not sent at
    that depth or less), each with its verdict, and every link judged (a speculative page's:
    all but the dropped ones, also past max_depth). A dropped link is counted when it would
    have been followed."""
    follow = depth < cfg.max_depth
    if not (follow or speculative):
        return [], []
    children, judged, deeper = [], [], depth + 1
    for link in links:
        if not speculative and known.sent_at(link, deeper):
            continue
        verdict = link_verdict(link, cfg)
        if verdict is not None and verdict.startswith("drop:"):
            counts[keys.links_dropped(verdict.removeprefix("drop:"))] += follow
            continue
        judged.append((verdict, link))
        if follow and not known.sent_at(link, deeper):
            children.append((verdict, link))
    return children, judged
