"""What was crawled: one record per URL, appended to a Redis stream of the crawl.

The frontier's Lua script appends the record in the same atomic step that ends the URL, so a
URL is recorded exactly once, whatever happens to the worker. Reading and exporting the
records is rqcrawl.ops.sinks'; delivering them to followers, rqcrawl.frontier.delivery's.
"""

from __future__ import annotations

import json
import time

FIELDS = [
    "url",
    "final_url",
    "outcome",
    "status",
    "depth",
    "content_type",
    "title",
    "bytes",
    "truncated",  # true when the body was over max_body_bytes: `bytes` are its first ones
    "outlinks",
    "links_cut",
    "attempts",
    "fetched_at",
    "error",
    "reason",
    "hook_error",
    "visit",  # crawls with revisits: the visit's number (1, 2...)
    "change",  # and its change: new, changed, unchanged, gone (rqcrawl.frontier.tasks)
    "not_modified",  # true when the server answered 304 to a conditional GET
    "duplicate_of",  # the crawl's first URL with the same body (detect_duplicates)
    "similarity",  # a changed visit: how alike its text is to the last one, 0 to 1
    "source",  # "sitemap" for a URL found in a sitemap (rqcrawl.frontier.sitemaps); else None:
    # a link (depth > 0) or a seed (depth 0)
    "canonical",  # the page's canonical URL (<link rel="canonical">, the Link header)
    "noindex",  # true when the page asks not to be indexed (meta robots, X-Robots-Tag)
    "nofollow",  # true when the page asks that its links not be followed: none were
    "redirect_to",  # a redirect's (or meta refresh's) target, admitted as a URL of its own
    "via",  # the redirects that led to this URL, first one first (rqcrawl.fetch.hops)
]


FAILED_OUTCOMES = ("failed", "lost")  # a record's outcome when its URL failed for good


def record(url: str, outcome: str | None, depth: int, **fields) -> dict:
    """The record of one URL: every field of FIELDS (missing ones None), the user's fields,
    and the time of recording. Every record comes from here, the finish script's records of
    refused links too (skip_template)."""
    built = dict.fromkeys(FIELDS)
    built["fields"] = {}
    built["fetched_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    built.update(fields, url=url, outcome=outcome, depth=depth)
    return built


def skip_template(depth: int, source: str = "") -> str:
    """The JSON of the record of a link refused at admission (a budget), for the finish
    script, which adds its url and outcome: only the fields it has (readers fill the rest).
    `source`: where the refused URLs came from ("sitemap"), if not a page's links."""
    template = record("", None, depth, attempts=0, source=source or None)
    kept = {k: v for k, v in template.items() if v is not None and k not in ("url", "outcome")}
    return json.dumps(kept, separators=(",", ":"))


def from_entry(data: dict) -> dict:
    """The record of a stream entry, with every field of FIELDS (the finish script writes
    refused links' records with only the fields they have)."""
    return dict.fromkeys(FIELDS) | {"fields": {}} | json.loads(data[b"r"])
