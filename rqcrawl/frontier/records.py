"""What was crawled: one record per URL, appended to a Redis stream of the crawl.

The frontier's Lua script appends the record in the same atomic step that ends the URL, so a
URL is recorded exactly once, whatever happens to the worker. Reading and exporting the
records is rqcrawl.ops.sinks'; delivering them to followers, rqcrawl.frontier.delivery's.
"""

from __future__ import annotations

import json
import time

from rqcrawl.frontier import keys

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

# The JSON type of each field (None aside, which any field may be): integers, numbers, flags,
# lists and objects; every other field of FIELDS is text. The Parquet exporter types its
# columns by them, readers of an exported file check them (checked).
INTEGERS = {"status", "depth", "bytes", "outlinks", "links_cut", "attempts", "visit"}
FLOATS = {"similarity"}
FLAGS = {"not_modified", "noindex", "nofollow", "truncated"}
LISTS = {"via"}
OBJECTS = {"fields", "content"}  # the user's fields; the page's content (`content` setting)

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


# Each field's JSON type, as json.loads gives it (bool apart from int).
_TYPES: dict[str, type] = {
    **dict.fromkeys(FIELDS, str),
    **dict.fromkeys(INTEGERS, int),
    **dict.fromkeys(FLOATS, float),
    **dict.fromkeys(FLAGS, bool),
    **dict.fromkeys(LISTS, list),
    **dict.fromkeys(OBJECTS, dict),
}
_JSON_NAMES = {str: "text", int: "an integer", float: "a number", bool: "true or false",
               list: "a list", dict: "an object"}  # fmt: skip


def checked(data: object) -> dict:
    """A record read back from an exported file (`--records FILE`): a JSON object whose
    `url` and `outcome` are text and whose other fields are of their type or None, given
    every field of FIELDS (missing ones None), so that its readers never meet a value they
    cannot use. Raises ValueError saying what is wrong, in one line."""
    if not isinstance(data, dict):
        raise ValueError("is not a record (a JSON object)")
    for name in ("url", "outcome"):
        if not isinstance(data.get(name), str):
            raise ValueError(f"has no {name!r} (text)")
    for name, value in data.items():
        wanted, kind = _TYPES.get(name), type(value)
        if value is not None and wanted and kind is not wanted and (wanted, kind) != (float, int):
            raise ValueError(f"field {name!r} is {_JSON_NAMES[kind]}, not {_JSON_NAMES[wanted]}")
    content = data.get("content") or {}
    if any(v is not None and not isinstance(v, str) for v in content.values()):
        raise ValueError("field 'content' holds a value that is not text")
    return dict.fromkeys(FIELDS) | {"fields": {}} | data


class Records:
    """The crawl's records in Redis as the frontier reads them (CrawlState's part):
    undelivered, at the bound, the last of a URL, the recent ends."""

    def undelivered(self) -> tuple[int, int]:
        """Records in the records stream, and their bytes (not yet delivered and trimmed)."""
        with self.redis.pipeline(transaction=False) as pipe:
            pipe.xlen(self.keys.items)
            pipe.hmget(self.keys.counters, keys.RECORD_BYTES, keys.TRIMMED_BYTES)
            length, (appended, trimmed) = pipe.execute()
        return length, int(appended or 0) - int(trimmed or 0)

    def at_bound(self) -> bool:
        """Whether the records stream holds max_undelivered records or max_undelivered_bytes
        bytes: then no URL is released (lua/records.lua's stream_full) until a follower
        drains it (rqcrawl.ops.follow)."""
        records, size = self.undelivered()
        return records >= self.cfg.max_undelivered or size >= self.cfg.max_undelivered_bytes

    def ended_record(self, url: str, limit: int) -> dict | None:
        """The last record of `url` among the newest `limit` of the records stream (a URL
        that ended has one; the stream is read newest first, 1000 at a time)."""
        needles = (url.encode(), url.replace("/", "\\/").encode())  # cjson escapes '/'
        last, read = "+", 0
        while read < limit:
            batch = self.redis.xrevrange(self.keys.items, max=last, count=1000)
            if last != "+":
                batch = batch[1:]  # `max` is inclusive
            if not batch:
                return None
            for _, fields in batch:
                raw = fields[b"r"]
                if any(n in raw for n in needles):
                    found = json.loads(raw)
                    if found.get("url") == url:
                        return found
            read += len(batch)
            last = batch[-1][0]
        return None

    def recent_ends(self, since: float, limit: int) -> list[tuple[float, str]]:
        """(time, url) of the URLs that ended since `since`, among the newest `limit` records
        (the records stream's entry ids are their times in ms), newest first."""
        entries = self.redis.xrevrange(self.keys.items, min=f"{int(since * 1000)}", count=limit)
        records = [(entry_id, json.loads(fields[b"r"])) for entry_id, fields in entries]
        return [
            (int(entry_id.split(b"-")[0]) / 1000, r["url"])
            for entry_id, r in records
            if r.get("attempts")  # not a link refused at admission (never in flight)
        ]
