"""A crawl's records written out: an export, a WACZ, a follower that delivers them as they
come."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from redis import Redis

from rqcrawl.api.errors import CrawlError, InvalidInput
from rqcrawl.api.reading import Feed, crawl_config, crawl_shards, is_over
from rqcrawl.config import CrawlConfig
from rqcrawl.fetch import warc
from rqcrawl.frontier import delivery
from rqcrawl.ops import follow, sinks, wacz
from rqcrawl.ops.exporters.base import Exporter
from rqcrawl.ops.exporters.registry import UnknownFormat, exporter_class, format_of, formats


def export(
    redis: Redis,
    name: str,
    out: str | os.PathLike | IO,
    fmt: str | None = None,
    **feed: Any,
) -> int:
    """Write the crawl's records not yet delivered to a follower to a file (its extension
    names the format: .csv, .parquet) or an open stream (JSON lines unless `fmt`: a name of
    `export_formats`); returns the row count. `feed` (Feed's, by name): `since` and
    `changes` make it a change feed, `skip_noindex` leaves out noindex pages, as in
    `records`. CSV cells that start like a formula get a leading quote unless `raw_csv`
    (exporters.csv.safe_cell)."""
    cfg = crawl_config(redis, name)
    wanted = Feed(**feed)
    feed = {**wanted.filters(), "raw_csv": wanted.raw_csv}
    shards = crawl_shards(redis, name)
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
        return _write_wacz(name, sinks.iter_records(crawl_shards(redis, name), name), files, out)
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
    return any(delivery.delivered(shard, name) for shard in crawl_shards(redis, name))


def delivered_to(redis: Redis, name: str) -> dict[str, int]:
    """The records each follower (by name: its machine and output) delivered, every shard's."""
    went: Counter[str] = Counter()
    for shard in crawl_shards(redis, name):
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


@dataclass(frozen=True)
class Following:
    """How `follow_records` delivers: into a directory, a new file past `rotate_records`
    records or `rotate_bytes` bytes; appended to what `out` holds (`append`); ended by
    `stop` and `ending`; `seen` shown each batch written."""

    rotate_records: int = 0
    rotate_bytes: int = 0
    append: bool = True
    stop: threading.Event | None = None
    ending: threading.Event | None = None
    seen: Callable[[list[dict]], None] | None = None


def follow_records(
    redis: Redis,
    name: str,
    out: str | os.PathLike,
    fmt: str | None = None,
    **how: Any,
) -> int:
    """Deliver the crawl's records as they are written to `out` (a directory: numbered
    files rotated past `rotate_records` records or `rotate_bytes` bytes; else one file) and
    trim them from Redis (rqcrawl.ops.follow); returns how many were delivered. Ends when
    every record is delivered and the crawl is finished or cancelled (or `ending` is set),
    or as soon as what it took is on disk once `stop` is set. `seen` is shown each batch
    written. (`how`: Following's, by name.)"""
    f = Following(**how)
    cfg = crawl_config(redis, name)
    exporter = output_exporter(cfg, out, fmt)
    try:
        output = follow.Output(out, exporter, name, f.rotate_records, f.rotate_bytes, f.append)
        follower = follow.Follower(crawl_shards(redis, name), name, output, seen=f.seen)
        ending, stop = f.ending or threading.Event(), f.stop or threading.Event()
        return follower.run(lambda: ending.is_set() or is_over(redis, name), stop)
    except follow.OutputError as exc:
        raise CrawlError(str(exc)) from None
