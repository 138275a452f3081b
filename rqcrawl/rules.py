"""Which discovered links become crawl URLs: scope and URL-shape rules, as a verdict per link.

A verdict is None (admit) or a short reason. The reasons starting with `drop:` are links that
are not part of the crawl at all (other sites): they are only counted. The other reasons are
crawl URLs refused by a rule: they are recorded once in the export with that reason.
"""

from __future__ import annotations

from .config import CrawlConfig
from .urls import in_scope


def link_verdict(link: str, cfg: CrawlConfig) -> str | None:
    """None when `link` should be admitted, else why not."""
    if not in_scope(link, cfg.scope_hosts):
        return "drop:out_of_scope"
    if len(link) > cfg.max_url_length:
        return "drop:too_long"
    return None
