"""Which discovered links become crawl URLs: scope and URL-shape rules, as a verdict per link.

A verdict is None (admit) or a short reason. Reasons starting with `drop:` are links that are
not part of the crawl at all (other sites): they are only counted. The other reasons are crawl
URLs refused by a trap rule: they are recorded once in the export with that reason, so an
operator sees what was left out and why.
"""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlsplit

from .config import CrawlConfig
from .urls import in_scope


def link_verdict(link: str, cfg: CrawlConfig) -> str | None:
    """None when `link` should be admitted, else why not."""
    if not in_scope(link, cfg.scope_hosts):
        return "drop:out_of_scope"
    return trap_verdict(link, cfg)


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
