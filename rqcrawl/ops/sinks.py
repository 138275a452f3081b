"""What was crawled, read back: the records of a crawl's Redis streams (rqcrawl.frontier.records
makes them), merged over shards, and their export through a format's exporter
(rqcrawl.ops.exporters).

A record has the columns of FIELDS and `fields`, the user's extracted fields (selectors and
hook) as one object, so that they can never clash with a fixed column.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import json
import os
from collections.abc import Collection, Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import IO, Any

from redis import Redis

from rqcrawl.frontier.keys import CrawlKeys
from rqcrawl.frontier.records import checked, from_entry
from rqcrawl.ops.exporters.base import Exporter


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


def read_jsonl_records(path: str | os.PathLike) -> Iterator[dict]:
    """The records of a JSON lines export (`crawl -o`, `export --follow`), in its order: one
    file, or a follower's directory of numbered files (every `*.jsonl` in name order). A line
    that is not a record (records.checked) is a ValueError naming it (and its file, in a
    directory)."""
    if not os.path.isdir(path):
        yield from _jsonl_file(path)
        return
    files = sorted(Path(path).glob("*.jsonl"))
    if not files:
        raise ValueError("no .jsonl file in this directory")
    for file in files:
        try:
            yield from _jsonl_file(file)
        except ValueError as exc:
            raise ValueError(f"{file.name}: {exc}") from None


def _jsonl_file(path: str | os.PathLike) -> Iterator[dict]:
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = checked(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"line {number} is not JSON ({exc.msg})") from None
            except RecursionError:  # json's parser recurses per level of [ or {
                raise ValueError(f"line {number} is not a record (nested too deeply)") from None
            except ValueError as exc:  # not a record, or a field of the wrong type
                raise ValueError(f"line {number} {exc}") from None
            yield record


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
                from_entry(data),
            )
        if len(entries) < batch:
            return
        start = "(" + entries[-1][0].decode()


def export(
    shards: Redis | Sequence[Redis],
    crawl: str,
    out: IO,
    exporter: type[Exporter],
    raw_csv: bool = False,
    **filters: Any,
) -> int:
    """Write the crawl's records (those of iter_records' `filters`: `since`, `changes` and
    `skip_noindex`, of one Redis or every shard) to `out` with `exporter`; returns the row
    count. An exporter that wants the user fields' names (CSV) reads the records twice."""
    selected = functools.partial(iter_records, shards, crawl, **filters)
    names = None
    if exporter.wants_field_names:
        names = sorted({name for r in selected() for name in r.get("fields", {})})
    writer = exporter(out, field_names=names, raw_csv=raw_csv)
    records, rows = selected(), 0
    while batch := list(itertools.islice(records, EXPORT_BATCH)):
        rows += writer.write(batch)
    if not rows:
        writer.write([])  # a CSV file's header all the same
    writer.close()
    return rows


EXPORT_BATCH = 1000  # records handed to the exporter at once
