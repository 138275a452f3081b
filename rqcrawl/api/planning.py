"""A crawl checked (its seeds, settings and name) and started."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from redis import Redis, RedisError

from rqcrawl import config
from rqcrawl.api.errors import CrawlError, InvalidInput, StateError, sql_errors
from rqcrawl.api.reading import crawl_config
from rqcrawl.config import ConfigError, CrawlConfig
from rqcrawl.fetch.clients import client_class
from rqcrawl.frontier import keys
from rqcrawl.frontier.outage import TableUnavailable
from rqcrawl.frontier.state import is_known
from rqcrawl.loading import on_worker_path
from rqcrawl.ops import control
from rqcrawl.ops.exporters.registry import UnknownFormat, exporter_class
from rqcrawl.options import taken
from rqcrawl.parse.hooks import HookError
from rqcrawl.parse.urls import InvalidURL, canonicalize

if TYPE_CHECKING:
    from rqcrawl.frontier.tasks import TableExtent, TaskTable


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
        except (TableUnavailable, *sql_errors(), ImportError) as exc:
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


@dataclass(frozen=True)
class Planning:
    """How `plan` checks a crawl besides its settings: `config_file` (see `settings`), a
    `stable_name` derived from the seeds and settings, the directory of a SQLite task
    table (`task_dir`), and the seeds' `priority`."""

    config_file: str | os.PathLike | None = None
    stable_name: bool = False
    task_dir: str | os.PathLike = ".rqcrawl"
    priority: int = 0


def plan(
    seeds: Iterable[str], name: str | None = None, cfg: CrawlConfig | None = None, **given: Any
) -> Plan:
    """Check a crawl before starting it (see `settings` for `cfg`, `config_file` and the
    settings `given`). Without `name`, one is derived from the first seed's host and the
    time, or with `stable_name` from a hash of the seeds and settings, so that the same
    call names, and so resumes, the same crawl. A crawl with revisits and no `db` keeps its
    task table in SQLite in `task_dir`. The seeds are admitted at `priority`. (`given`:
    Planning's by name, and settings.)"""
    how, flags = taken(Planning, given), given
    config_file, stable_name, task_dir, priority = (
        how.config_file,
        how.stable_name,
        how.task_dir,
        how.priority,
    )
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
