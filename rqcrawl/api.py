"""The Python API of rqcrawl: start, watch and control crawls from your own code (a notebook,
a Django command), as the `rqcrawl` command does, which is a thin layer over it.

    import redis
    from rqcrawl import api

    conn = redis.Redis.from_url("redis://localhost:6379/0")
    started = api.start(conn, ["https://example.org/"], max_depth=1)
    api.status(conn, started.name)["state"]        # "running", then "finished"
    rows = list(api.records(conn, started.name))

Every refusal is a CrawlError (one line, naming the crawl): the CLI prints it as is. Errors of
Redis itself (unreachable, lost) are redis-py's own, as for any other Redis client code.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

from redis import Redis, RedisError, ResponseError
from rq.utils import import_attribute

from rqcrawl import config
from rqcrawl.config import ConfigError, CrawlConfig
from rqcrawl.defaults import PUMP_EVERY
from rqcrawl.extras import MissingExtra
from rqcrawl.fetch import warc
from rqcrawl.fetch.clients import client_class
from rqcrawl.frontier import configs, delivery, keys
from rqcrawl.frontier.dispatch import Frontier
from rqcrawl.frontier.outage import TableUnavailable
from rqcrawl.frontier.records import FAILED_OUTCOMES
from rqcrawl.frontier.state import all_shards, crawl_names, is_known
from rqcrawl.loading import on_worker_path
from rqcrawl.ops import control, follow, sinks, stats, wacz
from rqcrawl.ops.exporters.base import Exporter
from rqcrawl.ops.exporters.registry import UnknownFormat, exporter_class, format_of, formats
from rqcrawl.parse.changes import KINDS as CHANGE_KINDS
from rqcrawl.parse.hooks import HookError
from rqcrawl.parse.urls import InvalidURL, canonicalize
from rqcrawl.redisurl import client
from rqcrawl.workers.embedded import EmbeddedRedis
from rqcrawl.workers.runner import RENDER_WORKER_CLASS, LocalWorkers

if TYPE_CHECKING:
    from rqcrawl.frontier.tasks import TableExtent, TaskTable


class CrawlError(Exception):
    """An operation of this API refused or failed, with a one-line reason naming the crawl."""


class InvalidInput(CrawlError, ValueError):
    """A seed URL, setting, crawl name or export format that cannot be used: nothing was
    written to Redis."""


class NoSuchCrawl(CrawlError, LookupError):
    """This Redis holds no crawl of that name."""


class StateError(CrawlError):
    """The crawl's state does not allow the operation (pause a finished crawl, purge a
    running one without `force`)."""


class DamagedCrawl(CrawlError):
    """The crawl's keys are damaged or its settings missing or unreadable: only
    `purge(..., force=True)` still works on it."""


@dataclass(frozen=True)
class Started:
    """What `start` did."""

    name: str
    cfg: CrawlConfig  # the settings in force: an existing crawl keeps its own
    admitted: int  # seeds that were new to the crawl
    resumed: bool  # the crawl existed already
    table: TableExtent | None = None  # the rows it found in the task table, if it had any
    purged: int = 0  # the task table's rows deleted first (`fresh`)


@dataclass(frozen=True)
class Plan:
    """A checked crawl, not started yet: seeds canonical, settings valid and scoped, name
    valid. Building it touches no Redis, so that bad input fails before anything else."""

    name: str
    seeds: list[str]
    cfg: CrawlConfig
    priority: int = 0  # the seeds'

    def start(self, redis: Redis, fresh: bool = False) -> Started:
        """Store the settings and admit the seeds, all or nothing (control.start). An
        existing crawl of this name keeps its own settings and gets the new seeds. The task
        table of a crawl with revisits is reached first: nothing is written if it is not.
        A crawl new to this Redis whose name has rows in the task table (an earlier run,
        another Redis) resumes them, and says so in `table`; with `fresh` they are deleted
        first (refused for a crawl this Redis has: purge it)."""
        table, known = self._table(), is_known(redis, self.name)
        if fresh and known:
            raise StateError(
                f"crawl {self.name} exists: purge it (rqcrawl purge {self.name}) to start afresh"
            )
        found, purged = None, 0
        if table is not None and not known:
            try:
                found = None if fresh else table.extent(self.name)
                purged = table.delete(self.name) if fresh else 0
            except TableUnavailable as exc:
                raise CrawlError(f"crawl {self.name} not started: {exc}") from exc
        try:
            cfg, admitted, resumed = control.start(
                redis, self.name, self.cfg, self.seeds, self.priority
            )
        except (ConfigError, RedisError) as exc:
            raise CrawlError(f"crawl {self.name} not started: {exc}") from exc
        return Started(self.name, cfg, admitted, resumed, found, purged)

    def _table(self) -> TaskTable | None:
        """The crawl's task table, reached (None without revisits)."""
        if not (self.cfg.revisit and self.cfg.db):
            return None
        from rqcrawl.frontier.tasks import TaskTable  # SQLAlchemy only for crawls with revisits

        table = TaskTable(self.cfg.db)
        try:
            table.check()
        except (TableUnavailable, *_sql_errors(), ImportError) as exc:
            line = str(exc).strip().splitlines()[0]
            raise CrawlError(f"crawl {self.name} not started: {line}") from exc
        return table


def settings(
    config_file: str | os.PathLike | None = None, base: CrawlConfig | None = None, **flags: Any
) -> CrawlConfig:
    """The settings of a new crawl: `base` (or the defaults) < TOML file < `flags`, each a
    setting of conf/default.toml by name (None leaves it to the file or the default)."""
    try:
        chosen = config.layered(config_file, flags, base)
    except (ConfigError, HookError) as exc:
        raise InvalidInput(str(exc)) from exc
    _check_classes(chosen)
    return chosen


def _check_classes(cfg: CrawlConfig) -> None:
    """Import the classes the settings name (`http_client`, `exporters`) as the workers and
    the export will, so that a bad name is one line now, not a lost page per URL later."""
    on_worker_path()
    try:
        client_class(cfg.http_client)
    except ValueError as exc:
        raise InvalidInput(f"setting {exc}") from None
    for fmt in cfg.exporters:
        try:
            exporter_class(cfg.exporters, fmt)
        except UnknownFormat as exc:
            raise InvalidInput(f"setting 'exporters': {exc}") from None


def plan(
    seeds: Iterable[str],
    name: str | None = None,
    cfg: CrawlConfig | None = None,
    *,
    config_file: str | os.PathLike | None = None,
    stable_name: bool = False,
    task_dir: str | os.PathLike = ".rqcrawl",
    priority: int = 0,
    **flags: Any,
) -> Plan:
    """Check a crawl before starting it (see `settings` for `cfg`, `config_file` and `flags`).
    Without `name`, one is derived from the first seed's host and the time, or with
    `stable_name` from a hash of the seeds and settings, so that the same call names, and
    so resumes, the same crawl. A crawl with revisits and no `db` keeps its task table in
    SQLite in `task_dir`. The seeds are admitted at `priority`."""
    chosen = settings(config_file, cfg, **flags)
    urls = _canonical_seeds(seeds, chosen)
    scoped = chosen.scoped_to(urls).with_task_table_in(task_dir)
    if name is None:
        stable_key = json.dumps([urls, scoped.to_json()]) if stable_name else None
        name = _derived_name(urls[0], stable_key)
    elif not keys.valid_crawl_name(name):
        raise InvalidInput(
            f"invalid crawl name {name!r}: use letters, digits, _ and - (at most 64)"
        )
    return Plan(name, urls, scoped, priority)


def start(
    redis: Redis,
    seeds: Iterable[str],
    name: str | None = None,
    cfg: CrawlConfig | None = None,
    **flags: Any,
) -> Started:
    """Check and start a crawl in one step: `plan(...).start(redis)`. Workers (`rq worker
    crawl`, or runner.LocalWorkers) on the same Redis then crawl it."""
    return plan(seeds, name, cfg, **flags).start(redis)


def _canonical_seeds(urls: Iterable[str], cfg: CrawlConfig) -> list[str]:
    """The seeds in canonical form, without the crawl's `strip_params` (as its links); at
    least one, each an http(s) URL. One URL may come as a plain string (which would
    otherwise be read as URLs of one character)."""
    strip = cfg.url_filter
    seeds = []
    for raw in [urls] if isinstance(urls, str) else urls:
        try:
            raw.encode("utf-8")  # bytes that are not UTF-8 arrive as lone surrogates
            seeds.append(canonicalize(raw, strip=strip))
        except UnicodeEncodeError:
            raise InvalidInput(f"invalid URL {raw!r}: not UTF-8") from None
        except InvalidURL as exc:
            raise InvalidInput(str(exc)) from exc
    if not seeds:
        raise InvalidInput("no seed URL")
    return seeds


def _derived_name(seed_url: str, stable_key: str | None = None) -> str:
    """The seed's host and a timestamp, or a hash of `stable_key`."""
    host = re.sub(r"[^A-Za-z0-9]+", "-", urlsplit(seed_url).hostname or "").strip("-")
    host = host[:40].rstrip("-") or "crawl"  # a name starting with - would read as a flag
    if stable_key is not None:
        return f"{host}-{hashlib.sha1(stable_key.encode()).hexdigest()[:10]}"
    return f"{host}-{time.strftime('%Y%m%d-%H%M%S')}"


def add_seeds(redis: Redis, name: str, urls: Iterable[str]) -> int:
    """Admit more seeds (depth 0) to an existing crawl; returns how many were new."""
    cfg = crawl_config(redis, name)
    return Plan(name, _canonical_seeds(urls, cfg), cfg).start(redis).admitted


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
        with _damage(name):
            Frontier(redis, name, cfg).maybe_reap()
    if not keys.valid_crawl_name(name):
        raise DamagedCrawl(f"crawl {name!r}: invalid name (purge it with redis-cli)")
    with _damage(name):
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
    feed = _feed(since, changes, skip_noindex)
    return sinks.iter_records(_shards(redis, name), name, **feed)


def _feed(since: str | datetime | None, changes: Iterable[str] | str, skip_noindex: bool) -> dict:
    """The record filters of `records` and `export`, as sinks.iter_records takes them."""
    return {
        "since": since_time(since),
        "changes": change_kinds(changes),
        "skip_noindex": skip_noindex,
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


def export(
    redis: Redis,
    name: str,
    out: str | os.PathLike | IO,
    fmt: str | None = None,
    since: str | datetime | None = None,
    changes: Iterable[str] | str = (),
    raw_csv: bool = False,
    skip_noindex: bool = False,
) -> int:
    """Write the crawl's records not yet delivered to a follower to a file (its extension
    names the format: .csv, .parquet) or an open stream (JSON lines unless `fmt`: a name of
    `export_formats`); returns the row count. `since` and `changes` make it a change feed,
    `skip_noindex` leaves out noindex pages, as in `records`. CSV cells that start like a
    formula get a leading quote unless `raw_csv` (exporters.csv.safe_cell)."""
    cfg = crawl_config(redis, name)
    feed = {**_feed(since, changes, skip_noindex), "raw_csv": raw_csv}
    shards = _shards(redis, name)
    if not isinstance(out, str | os.PathLike):
        return sinks.export(shards, name, out, _exporter(cfg, fmt or "jsonl"), **feed)
    exporter = output_exporter(cfg, out, fmt)
    text = {} if exporter.binary else {"encoding": "utf-8", "newline": ""}
    try:
        with open(out, "wb" if exporter.binary else "w", **text) as stream:
            return sinks.export(shards, name, stream, exporter, **feed)
    except OSError as exc:
        raise CrawlError(f"cannot write {out}: {exc.strerror}") from exc


def export_wacz(
    redis: Redis,
    name: str,
    out: str | os.PathLike,
    warc_dir: str | os.PathLike | None = None,
    records_file: str | os.PathLike | None = None,
) -> wacz.Written:
    """Write the crawl as a WACZ file `out` (ops/wacz.py): the crawl's WARC files in
    `warc_dir` (default: its `warc_dir` setting, as seen from this working directory), their
    index, and its fetched pages with their titles and main text (`content` with text), from
    its records in Redis or, once a follower (`crawl -o`, `export --follow`) has delivered
    them, from that JSON lines file (`records_file`)."""
    cfg = crawl_config(redis, name)
    directory = warc_dir or cfg.warc_dir
    if not directory:
        raise InvalidInput(f"crawl {name} archived no WARC files: seed it with --warc DIR")
    files = _warc_files(name, directory)
    if records_file is None and delivered(redis, name):
        raise InvalidInput(
            f"crawl {name}: its records were delivered to a follower and left Redis: give "
            "the JSON lines file they went to with --records FILE"
        )
    if records_file is None:
        return _write_wacz(name, sinks.iter_records(_shards(redis, name), name), files, out)
    return pack_wacz(name, directory, records_file, out)


def pack_wacz(
    name: str,
    warc_dir: str | os.PathLike,
    records_file: str | os.PathLike,
    out: str | os.PathLike,
) -> wacz.Written:
    """Write the WACZ file `out` of crawl `name` from its WARC files in `warc_dir` and its
    records in the JSON lines file `records_file`: no Redis needed (`crawl --wacz`, whose
    embedded Redis stops with it)."""
    files = _warc_files(name, warc_dir)
    try:
        return _write_wacz(name, sinks.read_jsonl_records(records_file), files, out)
    except ValueError as exc:  # a line of records_file that is not a JSON object
        raise InvalidInput(f"{os.fspath(records_file)}: {exc}") from exc


def _warc_files(name: str, directory: str | os.PathLike) -> list[Path]:
    files = warc.crawl_files(directory, name)
    if not files:
        raise CrawlError(f"crawl {name}: no WARC files of it in {os.fspath(directory)}")
    return files


def _write_wacz(
    name: str, records: Iterable[dict], files: list[Path], out: str | os.PathLike
) -> wacz.Written:
    try:
        return wacz.write_wacz(records, files, Path(out), title=name)
    except wacz.WaczError as exc:
        raise CrawlError(f"crawl {name}: {exc}") from exc
    except OSError as exc:
        raise CrawlError(f"cannot read or write: {exc.filename}: {exc.strerror}") from exc


def delivered(redis: Redis, name: str) -> bool:
    """Whether a follower delivered records of the crawl (they left Redis then)."""
    return any(delivery.delivered(shard, name) for shard in _shards(redis, name))


def delivered_to(redis: Redis, name: str) -> dict[str, int]:
    """The records each follower (by name: its machine and output) delivered, every shard's."""
    went: Counter[str] = Counter()
    for shard in _shards(redis, name):
        went.update(delivery.delivered_to(shard, name))
    return dict(went)


def export_formats(redis: Redis | None = None, name: str = "") -> list[str]:
    """The export formats' names: the built-in ones, and those of the crawl's `exporters`."""
    return list(formats(crawl_config(redis, name).exporters if redis else {}))


def _exporter(cfg: CrawlConfig, fmt: str) -> type[Exporter]:
    try:
        return exporter_class(formats(cfg.exporters), fmt)
    except UnknownFormat as exc:
        raise InvalidInput(str(exc)) from None


def output_exporter(cfg: CrawlConfig, out: str | os.PathLike, fmt: str | None) -> type[Exporter]:
    """The exporter of `fmt`, else of the format `out`'s name asks for (JSON lines unless its
    extension names another); InvalidInput, one line, when it cannot be loaded (its extra
    missing: `rqcrawl crawl -o pages.parquet` says so before the crawl starts)."""
    try:
        return _exporter(cfg, fmt or format_of(formats(cfg.exporters), os.fspath(out)))
    except UnknownFormat as exc:
        raise InvalidInput(str(exc)) from None


def follow_records(
    redis: Redis,
    name: str,
    out: str | os.PathLike,
    fmt: str | None = None,
    rotate_records: int = 0,
    rotate_bytes: int = 0,
    append: bool = True,
    stop: threading.Event | None = None,
    ending: threading.Event | None = None,
    seen: Callable[[list[dict]], None] | None = None,
) -> int:
    """Deliver the crawl's records as they are written to `out` (a directory: numbered
    files rotated past `rotate_records` records or `rotate_bytes` bytes; else one file) and
    trim them from Redis (rqcrawl.ops.follow); returns how many were delivered. Ends when
    every record is delivered and the crawl is finished or cancelled (or `ending` is set),
    or as soon as what it took is on disk once `stop` is set. `seen` is shown each batch
    written."""
    cfg = crawl_config(redis, name)
    exporter = output_exporter(cfg, out, fmt)
    try:
        output = follow.Output(out, exporter, name, rotate_records, rotate_bytes, append)
        follower = follow.Follower(_shards(redis, name), name, output, seen=seen)
        ending, stop = ending or threading.Event(), stop or threading.Event()
        return follower.run(lambda: ending.is_set() or _over(redis, name), stop)
    except follow.OutputError as exc:
        raise CrawlError(str(exc)) from None


def crawl(
    seeds: Iterable[str],
    name: str | None = None,
    cfg: CrawlConfig | None = None,
    *,
    data_dir: str | os.PathLike = ".rqcrawl",
    redis_url: str | None = None,
    workers: int = 2,
    threads: int | None = None,
    render_workers: int | None = None,
    fresh: bool = False,
    config_file: str | os.PathLike | None = None,
    **flags: Any,
) -> Iterator[dict]:
    """Run a crawl on this machine and yield each record as it is delivered, as `rqcrawl
    crawl` writes them: an embedded Redis in `data_dir` unless `redis_url` (or the `shards`
    setting) names one, `workers` local worker processes (`threads` requests in flight
    each) per Redis, and `render_workers` (default: 1 if `render` is set) browser workers.
    Settings as `plan`'s; the input is checked before anything starts (InvalidInput).

    The same call again resumes the crawl (named from its seeds and settings, `stable_name`).
    A record is acknowledged, and trimmed from Redis, when the loop asks for the next one:
    a loop that stops (`break`, an exception) leaves the record it held to the next run, and
    no record is handed twice otherwise. Ends when the crawl is finished or cancelled; a crawl
    with revisits runs until the loop stops. Stopping the loop stops the workers (each ends
    its current page) and the embedded Redis (its data kept)."""
    planned = plan(
        seeds, name, cfg, config_file=config_file, stable_name=True, task_dir=data_dir, **flags
    )
    if render_workers is None:
        render_workers = 1 if planned.cfg.render else 0
    if render_workers:  # without the render extra: one line now, before anything starts
        try:
            import_attribute(RENDER_WORKER_CLASS)
        except MissingExtra as exc:
            raise InvalidInput(str(exc)) from None
    fleet = partial(local_fleet, workers=workers, threads=threads, render_workers=render_workers)
    return _crawled(planned, Path(data_dir), redis_url, fleet, fresh)


def _crawled(
    planned: Plan,
    data_dir: Path,
    redis_url: str | None,
    fleet: Callable[..., AbstractContextManager[tuple[LocalWorkers, LocalWorkers]]],
    fresh: bool,
) -> Iterator[dict]:
    """The records of `crawl`, from its Redis, fleet and follower, stopped when left."""
    shards = planned.cfg.shards
    target = shards[0] if shards else redis_url
    server = None if target else EmbeddedRedis(data_dir)
    try:
        if server:
            embedded_redis(server)
            target = embedded_redis(server, ready=True)
        redis = client(target)
        planned.start(redis, fresh)
        with fleet(shards or [target], log_dir=data_dir / "workers") as (pool, _):

            def over() -> bool:
                if unserved := pool.unserved():
                    of = f" of shard {unserved[0]}" if len(shards) > 1 else ""
                    where = pool.log_dir
                    raise CrawlError(f"crawl {planned.name}: every worker{of} exited; see {where}")
                return status(redis, planned.name)["state"] in stats.OVER

            try:
                output = follow.Handover(data_dir)
                follower = follow.Follower(_shards(redis, planned.name), planned.name, output)
            except follow.OutputError as exc:
                raise CrawlError(str(exc)) from None
            yield from follower.handed(over, threading.Event())
    finally:
        if server:
            server.stop()


def embedded_redis(server: EmbeddedRedis, ready: bool = False) -> str:
    """Launch the embedded Redis, or with `ready` wait until it answers; its URL. CrawlError,
    one line, if it cannot."""
    try:
        return (server.ready() if ready else server.launch()).url
    except RuntimeError as exc:
        raise CrawlError(str(exc)) from None
    except OSError as exc:
        raise CrawlError(f"cannot use {server.data_dir}: {exc.strerror}") from None


@contextmanager
def local_fleet(
    targets: list[str],
    workers: int,
    threads: int | None,
    log_dir: Path,
    render_workers: int,
    fork: bool = False,
) -> Iterator[tuple[LocalWorkers, LocalWorkers]]:
    """`workers` processes per Redis of `targets` (the crawl's shards) and `render_workers`
    browser workers of the render queue, stopped on exit. `fork` (LocalWorkers) only from a
    process that knows it runs no other thread."""
    pool = LocalWorkers(targets, workers, threads, log_dir, fork=fork)
    renderers = LocalWorkers(
        targets, render_workers, 1, log_dir / "render", RENDER_WORKER_CLASS,
        queue=keys.RENDER_QUEUE,
    )  # fmt: skip
    with pool, renderers:
        yield pool, renderers


def _over(redis: Redis, name: str) -> bool:
    """Whether no record will be written any more: the crawl is finished or cancelled."""
    return status(redis, name, recover=False)["state"] in stats.OVER


def pause(redis: Redis, name: str) -> bool:
    """Stop releasing the crawl's URLs (running pages finish, queued ones wait); False if it
    was already paused."""
    _, state = _controlled(redis, name)
    with _damage(name):
        return control.pause(_shards(redis, name), name, state)


def resume(redis: Redis, name: str) -> None:
    """Release the held URLs of a paused crawl again."""
    cfg, state = _controlled(redis, name)
    with _damage(name):
        control.resume(_shards(redis, name), name, cfg, state)


def cancel(redis: Redis, name: str) -> control.Cancelled:
    """Stop the crawl for good, dropping its pending URLs and queued jobs."""
    _, state = _controlled(redis, name)
    with _damage(name):
        return control.cancel(_shards(redis, name), name, state)


def purge(redis: Redis, name: str, force: bool = False) -> control.Purged:
    """Delete every key and RQ job of the crawl, and nothing of any other crawl. Without
    `force`, only a finished or cancelled crawl (workers may still be on the others). A
    purge that a crash interrupted (a sharded crawl gone from some shards only) is
    completed, whatever the crawl's state (control.purge)."""
    shards = _shards(redis, name)
    with _damage(name):
        if control.purging(shards, name):
            return control.discard_all(shards, name)
    try:
        _, state = _controlled(redis, name)
    except CrawlError:  # a half-registered or damaged crawl can still be purged
        if not is_known(redis, name):
            raise
        state = control.BROKEN
    with _damage(name):
        return control.purge(shards, name, state, force)


def pump(redis: Redis, name: str, every: float = PUMP_EVERY) -> int:
    """Move the crawl's due revisits from its task table into Redis, unless a pump ran for
    it in the last `every` seconds (whoever ran it); returns how many URLs were readmitted.
    For fleets of stock workers: the recommended worker pumps by itself."""
    cfg = crawl_config(redis, name)
    if not cfg.revisit:
        raise StateError(f"crawl {name} has no revisits (seed it with --revisit)")
    with _damage(name):
        return Frontier(redis, name, cfg).maybe_pump(every)


def _shards(redis: Redis, name: str) -> list[Redis]:
    """Every shard of the crawl in shard order (`[redis]` unless sharded). A crawl whose
    settings cannot be read is dealt with on this Redis alone."""
    try:
        return all_shards(redis, name)
    except ConfigError:
        return [redis]


def _controlled(redis: Redis, name: str) -> tuple[CrawlConfig, str]:
    """Settings and current state of an existing crawl, for pause ... purge."""
    cfg = crawl_config(redis, name)
    return cfg, status(redis, name, recover=False)["state"]


@contextmanager
def _damage(name: str) -> Iterator[None]:
    """A refused operation as a StateError; damaged keys (wrong type, not a number) or
    unreadable settings as a DamagedCrawl naming the crawl."""
    try:
        yield
    except control.ControlError as exc:
        raise StateError(str(exc)) from exc
    except (ValueError, ResponseError) as exc:  # ConfigError is a ValueError
        raise DamagedCrawl(f"crawl {name}: {exc}") from exc
    except _sql_errors() as exc:  # its message shows no password
        raise CrawlError(f"crawl {name}: task table: {exc}".splitlines()[0]) from exc


def _sql_errors() -> tuple[type[Exception], ...]:
    """SQLAlchemy's error class once SQLAlchemy is loaded, else none: only a task table
    loads it and only it raises them, so catching them costs other commands no import of
    SQLAlchemy (a third of a second)."""
    loaded = sys.modules.get("sqlalchemy.exc")
    return (loaded.SQLAlchemyError,) if loaded else ()
