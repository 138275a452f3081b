"""What was crawled: one record per URL in a Redis stream of the crawl, and its export.

The frontier's Lua script appends the record in the same atomic step that ends the URL, so a
URL is recorded exactly once, whatever happens to the worker.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Iterator
from typing import IO

from redis import Redis

from . import keys

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
    "attempts",
    "fetched_at",
    "error",
]


def page_record(**fields) -> dict:
    """A record with every field of FIELDS (missing ones None) and the time of recording."""
    record = dict.fromkeys(FIELDS)
    record["fetched_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record.update(fields)
    return record


def failure_record(url: str, depth: int, reason: str, message: str, attempts: int) -> dict:
    return page_record(url=url, outcome=reason, depth=depth, error=message, attempts=attempts)


def iter_records(redis: Redis, crawl: str, batch: int = 1000) -> Iterator[dict]:
    """Every record of the crawl, oldest first, read in batches, with every field of FIELDS
    (records of URLs refused at admission are written by Lua with only the fields they have)."""
    stream = keys.key(crawl, "items")
    start = "-"
    while True:
        entries = redis.xrange(stream, min=start, count=batch)
        for _, data in entries:
            yield dict.fromkeys(FIELDS) | json.loads(data[b"r"])
        if len(entries) < batch:
            return
        start = "(" + entries[-1][0].decode()


def export(redis: Redis, crawl: str, out: IO[str], fmt: str = "jsonl") -> int:
    """Write the crawl's records to `out` as JSON lines or CSV; returns the row count."""
    records = iter_records(redis, crawl)
    rows = 0
    if fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        for record in records:
            writer.writerow(record)
            rows += 1
    else:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            rows += 1
    return rows
