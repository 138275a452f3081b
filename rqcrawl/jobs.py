"""The RQ job: one URL, fetched, parsed, recorded, its links admitted one level deeper.

A stock `rq worker crawl` runs it with nothing but the Redis URL: everything else comes from
the crawl's config in Redis, read once per process.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rq import get_current_job

from . import config, hooks, warc
from .config import CrawlConfig
from .extract import decode, extract_fields, parse
from .fetch import Archive, FetchError, fetch, no_archive
from .frontier import Frontier
from .rules import link_verdict
from .sinks import page_record
from .urls import in_scope

# Permanent fetch outcomes that mean "not for us" rather than "broken": counted as skips.
SKIP_REASONS = {"out_of_scope", "refused_address", "too_large", "not_html"}

_frontiers: dict[str, Frontier] = {}


@dataclass
class Visit:
    """The result of visiting one URL, before it is written to Redis."""

    record: dict
    counts: dict[str, int]
    children: list[str] = field(default_factory=list)
    error: FetchError | None = None  # set when the failure is transient


def crawl_url(crawl: str, url: str, depth: int) -> str:
    """Visit `url` of `crawl` at `depth` (the RQ job function)."""
    job = get_current_job()
    redis = job.connection
    cfg = config.load(redis, crawl)
    if cfg is None:
        return "crawl not found (purged?)"
    if crawl not in _frontiers:
        _frontiers[crawl] = Frontier(redis, crawl, cfg)
    frontier = _frontiers[crawl]
    entry = frontier.claim(url, job.id)
    if entry is None:
        return "already ended"
    result = visit(url, depth, cfg, warc.archive(crawl, cfg, job.worker_name))
    attempts = entry.attempt + 1
    if result.error is not None and attempts <= cfg.retries:
        delay = max(result.error.retry_after or 0.0, cfg.retry_base * 2**entry.attempt)
        frontier.retry_later(url, entry, delay)
        return f"retry in {delay:.1f}s: {result.error}"
    result.record["attempts"] = attempts
    frontier.finish(url, result.counts, result.record, result.children, depth + 1)
    return result.record["outcome"]


def visit(url: str, depth: int, cfg: CrawlConfig, archive: Archive = no_archive) -> Visit:
    """Fetch (archiving the responses) and parse `url`, extract its fields, run the hook;
    never raises for anything a web server can do."""

    def check_hop(hop: str) -> str | None:
        return None if in_scope(hop, cfg.scope_hosts) else "out_of_scope"

    try:
        resp = fetch(url, cfg, check_hop, archive)
    except FetchError as exc:
        outcome = exc.reason if exc.reason in SKIP_REASONS else "failed"
        record = page_record(
            url=url, outcome=outcome, status=exc.status, depth=depth, error=str(exc)
        )
        counter = f"skipped:{exc.reason}" if outcome != "failed" else "failed"
        return Visit(record, {counter: 1}, error=exc if exc.transient else None)
    record = page_record(
        url=url,
        final_url=resp.final_url,
        status=resp.status,
        depth=depth,
        content_type=resp.content_type,
    )
    if resp.body is None:
        record["outcome"] = "not_html"
        return Visit(record, {"skipped:not_html": 1})
    text = decode(resp.body, resp.content_type)
    page = parse(text, resp.final_url)
    record.update(outcome="fetched", title=page.title, bytes=len(resp.body))
    record["fields"] = extract_fields(page.selector, cfg.fields)
    counts = Counter({"fetched": 1, "links:bad": page.bad_links})
    links = page.links
    if cfg.hook:
        hooked = hooks.run(
            cfg.hook,
            hooks.HookPage(
                url, resp.final_url, resp.status, resp.headers, text, page.selector, depth
            ),
        )
        record["fields"].update(hooked.fields)
        record["hook_error"] = hooked.error
        counts["hook_errors"] += hooked.error is not None
        counts["links:bad"] += hooked.bad_links
        links = list(dict.fromkeys(links + hooked.links))
    record["outlinks"] = len(links)
    children = []
    if depth < cfg.max_depth:
        for link in links:
            verdict = link_verdict(link, cfg)
            if verdict is None:
                children.append(link)
            else:
                counts["links:" + verdict.removeprefix("drop:")] += 1
    return Visit(record, counts, children)
