"""Which discovered links become crawl URLs: scope, the user's link rules and URL-shape (trap)
rules, as a verdict per link.

A verdict is None (admit) or a short reason. Reasons starting with `drop:` are links that are
not part of the crawl at all (other sites, or links the user's link rules exclude): they are
only counted. The other reasons are crawl URLs refused by a trap rule: they are recorded once
in the export with that reason, so an operator sees what was left out and why.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from rqcrawl.config import CrawlConfig
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
