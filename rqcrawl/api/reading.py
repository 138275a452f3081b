"""What a crawl holds: its settings, its status, its records and failures (a change feed)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from redis import Redis

from rqcrawl import config
from rqcrawl.api.errors import DamagedCrawl, InvalidInput, NoSuchCrawl, refusals
from rqcrawl.config import ConfigError, CrawlConfig
from rqcrawl.frontier import configs, keys
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.records import FAILED_OUTCOMES
from rqcrawl.frontier.state import all_shards, crawl_names
from rqcrawl.ops import sinks, stats
from rqcrawl.parse.changes import KINDS as CHANGE_KINDS


def crawls(redis: Redis) -> list[str]:
    """The names of every crawl of this Redis, sorted."""
    return crawl_names(redis)


def crawl_config(redis: Redis, name: str) -> CrawlConfig:
    """The settings of an existing crawl."""
    try:
        cfg = configs.load(redis, name, fresh=True)
    except ConfigError as exc:
        raise DamagedCrawl(str(exc)) from exc
    if cfg is None:
        raise NoSuchCrawl(f"no crawl named {name!r} in this Redis")
    return cfg


def status(redis: Redis, name: str, recover: bool = True) -> dict:
    """The crawl's state and counters (stats.status). With `recover`, first the recovery
    pass that requeues the URLs of dead workers (at most one per crawl every few seconds,
    whoever asks), so that a crawl whose workers all died is not shown running forever."""
    if recover:
        cfg = crawl_config(redis, name)
        with refusals(name):
            Frontier(redis, name, cfg).maybe_reap()
    if not keys.valid_crawl_name(name):
        raise DamagedCrawl(f"crawl {name!r}: invalid name (purge it with redis-cli)")
    with refusals(name):
        s = stats.status(redis, name)
    if s is None:
        raise DamagedCrawl(
            f"crawl {name} has no settings (half-registered?): `rqcrawl purge {name} --force`"
        )
    return s


def records(
    redis: Redis,
    name: str,
    since: str | datetime | None = None,
    changes: Iterable[str] | str = (),
    skip_noindex: bool = False,
) -> Iterator[dict]:
    """Every record of the crawl (one per URL that ended), oldest first (a sharded crawl's
    from every shard, merged by time: sinks.iter_records): the rows of `export`. A change
    feed: only those recorded since `since` (see `since_time`) and whose change is one of
    `changes` (a list, or names separated by commas). With `skip_noindex`, not the pages
    that asked not to be indexed (`noindex`)."""
    crawl_config(redis, name)
    feed = Feed(since, changes, skip_noindex).filters()
    return sinks.iter_records(crawl_shards(redis, name), name, **feed)


@dataclass(frozen=True)
class Feed:
    """The records `records` and `export` write (a change feed): those recorded since
    `since` (see `since_time`), whose change is one of `changes`, without the noindex pages
    with `skip_noindex`; and for `export`, CSV cells as recorded with `raw_csv`."""

    since: str | datetime | None = None
    changes: Iterable[str] | str = ()
    skip_noindex: bool = False
    raw_csv: bool = False

    def filters(self) -> dict:
        """The record filters, as sinks.iter_records takes them."""
        return {
            "since": since_time(self.since),
            "changes": change_kinds(self.changes),
            "skip_noindex": self.skip_noindex,
        }


def since_time(since: str | datetime | None, now: float | None = None) -> float | None:
    """`since` as epoch seconds: a datetime, an ISO-8601 time (UTC unless it says), or a
    duration before `now` (`90s`, `30m`, `1h`, `2d`)."""
    if since is None:
        return None
    if isinstance(since, datetime):
        return _epoch(since)
    try:
        return (time.time() if now is None else now) - config.parse_duration("since", since)
    except ConfigError:
        pass  # not a duration: a time
    try:
        return _epoch(datetime.fromisoformat(since.strip()))
    except ValueError:
        raise InvalidInput(
            f"invalid time {since!r}: use ISO-8601 (2026-11-23T18:00:00Z) or a duration "
            "before now (30m, 1h, 2d)"
        ) from None


def _epoch(moment: datetime) -> float:
    """A datetime's epoch seconds, a naive one taken as UTC (not the machine's zone)."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def change_kinds(changes: Iterable[str] | str) -> set[str]:
    """The changes a feed keeps, checked (none: every record)."""
    if isinstance(changes, str):
        changes = changes.split(",")
    kinds = {c.strip() for c in changes if c.strip()}
    unknown = sorted(kinds - set(CHANGE_KINDS))
    if unknown:
        raise InvalidInput(f"unknown change {unknown[0]!r}: use some of {', '.join(CHANGE_KINDS)}")
    return kinds


def failures(
    redis: Redis,
    name: str,
    reasons: Iterable[str] = (),
    records_file: str | os.PathLike | None = None,
    skipped: bool = False,
) -> Iterator[dict]:
    """The records of the URLs that failed for good, their `reason` filled in ("other" if
    none), and with `skipped` those of the URLs skipped (their outcome is their reason:
    refused_address, robots_disallowed...), only those of `reasons` if given: from the
    records in Redis or, once a follower delivered them (`delivered`), from the JSON lines
    file or directory they went to (`records_file`)."""
    if records_file is None:
        return _failed(records(redis, name), set(reasons), skipped)
    crawl_config(redis, name)
    return _failed(_read_records(records_file), set(reasons), skipped)


def _read_records(path: str | os.PathLike) -> Iterator[dict]:
    """sinks.read_jsonl_records, its errors one line naming the file (InvalidInput)."""
    try:
        yield from sinks.read_jsonl_records(path)
    except ValueError as exc:  # a line that is not a JSON object; a directory without one
        raise InvalidInput(f"{os.fspath(path)}: {exc}") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {os.fspath(path)}: {exc.strerror}") from None


def _failed(rows: Iterator[dict], reasons: set[str], skipped: bool) -> Iterator[dict]:
    for record in rows:
        if record["outcome"] in FAILED_OUTCOMES:
            record["reason"] = record["reason"] or "other"
        elif skipped and record["outcome"] != "fetched":
            record["reason"] = record["outcome"]
        else:
            continue
        if not reasons or record["reason"] in reasons:
            yield record


def is_over(redis: Redis, name: str) -> bool:
    """Whether no record will be written any more: the crawl is finished or cancelled."""
    return status(redis, name, recover=False)["state"] in stats.OVER


def crawl_shards(redis: Redis, name: str) -> list[Redis]:
    """Every shard of the crawl in shard order (`[redis]` unless sharded). A crawl whose
    settings cannot be read is dealt with on this Redis alone."""
    try:
        return all_shards(redis, name)
    except ConfigError:
        return [redis]
