"""`rqcrawl export NAME --follow`: records delivered as they are written, to files.

A follower takes the crawl's records through the delivery group (rqcrawl.frontier.delivery),
writes them with the format's exporter (rqcrawl.ops.exporters), makes them durable (fsync)
and only then acknowledges them, which trims them from Redis. Several followers share the
work, each record going to one of them; a follower killed outright leaves its records
pending: restarted on the same output it cuts its file back to the start of its
unacknowledged batch and writes that batch again (rqcrawl.frontier.delivery), so a record
is on disk exactly once; another follower claims them after `reclaim_after` seconds if it
never comes back.

The output is one file (appended to), or a directory of numbered files
`CRAWL-00001.jsonl`..., a new one past `rotate_records` records or `rotate_bytes` bytes and
for every run (a file is never reopened). A Parquet file is written as `NAME.part` and
renamed when complete: its records are acknowledged then.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO

from redis import Redis
from redis.exceptions import LockError, LockNotOwnedError
from redis.lock import Lock

from rqcrawl.defaults import REDIS_POLL
from rqcrawl.frontier.delivery import LOCK_TTL, Delivery, OutputTaken, hold
from rqcrawl.ops.exporters.base import Exporter
from rqcrawl.redisurl import REDIS_DOWN

BATCH = 500  # records taken from a shard in one read
BATCH_BYTES = 16_000_000  # and about as many bytes of them (records with `content` are big)
WAIT_MS = 50  # how long an idle read waits for a new record: the most a crawl's end waits for it

log = logging.getLogger(__name__)


class OutputError(OSError):
    """The output cannot be written as asked (one line for the user)."""


class Output:
    """Where a follower's records go: a directory of numbered, rotated files, or one file."""

    def __init__(
        self,
        target: str | os.PathLike,
        exporter: type[Exporter],
        crawl: str,
        rotate_records: int = 0,
        rotate_bytes: int = 0,
        append: bool = True,
    ) -> None:
        """`target`: an existing directory (or a path ending in "/") means numbered files;
        else one file, appended to unless `append` is False (then started afresh)."""
        self.exporter, self.crawl = exporter, crawl
        self.rotate_records, self.rotate_bytes = rotate_records, rotate_bytes
        self.directory = Path(target) if _is_dir(target) else None
        self.path = Path(target)
        self.append = append
        self.stream: IO | None = None
        self.writer: Exporter | None = None
        self.written = 0
        if self.directory:
            self.directory.mkdir(parents=True, exist_ok=True)
        elif not exporter.durable_on_flush and append and self.path.exists():
            raise OutputError(f"{target}: a {exporter.extension} file cannot be appended to")
        self._lock_fd = self._lock()

    def _lock(self) -> int:
        """An exclusive lock of the operating system on what the output is (the directory,
        the file, or a Parquet file's `.part`), however it is spelled; held until `release`."""
        durable = self.exporter.durable_on_flush
        where = self.directory or (self.path if durable else _part(self.path))
        flags = os.O_RDONLY if self.directory else os.O_WRONLY | os.O_CREAT | os.O_APPEND
        try:
            fd = os.open(where, flags | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise OutputError(f"cannot write {where}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise OutputError(
                f"{self.path}: another follower writes to this output (the same file or "
                "directory by another name): stop it, or follow into another file or directory"
            ) from None
        return fd

    def release(self) -> None:
        """Free the output's lock (the current file closed first), for another follower."""
        self.close()
        if self._lock_fd < 0:
            return
        os.close(self._lock_fd)
        self._lock_fd = -1
        part = None if self.directory or self.exporter.durable_on_flush else _part(self.path)
        if part and part.exists() and not part.stat().st_size:  # the lock's, nothing written
            part.unlink()

    def start(self) -> tuple[str, int]:
        """Open the file if none is, and say where the next record goes (file, offset)."""
        if self.writer is None:
            self._open()
        self.stream.flush()
        return os.fspath(self.part or self.final), self.stream.tell()

    def write(self, records: list[dict]) -> None:
        with self._writing():
            self.writer.write(records)
        self.written += len(records)

    def durable(self) -> bool:
        """Make what was written durable; False if this format needs the file closed first."""
        if self.writer is None:
            return True
        with self._writing():
            self.writer.flush()
        return self.exporter.durable_on_flush

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A failed write (disk full, file too large, I/O error) is one line naming the file."""
        try:
            yield
        except OSError as exc:
            where = self.part or self.final
            raise OutputError(f"cannot write {where}: {exc.strerror or exc}") from None

    def full(self) -> bool:
        """Whether the current file reached a rotation bound (a directory's only)."""
        if self.directory is None or self.stream is None:
            return False
        by_count = self.rotate_records and self.written >= self.rotate_records
        return bool(by_count or (self.rotate_bytes and self.stream.tell() >= self.rotate_bytes))

    def close(self) -> None:
        """Finish the current file (durable, renamed from .part where it had one)."""
        if self.writer is None:
            return
        writer, stream = self.writer, self.stream
        self.writer = self.stream = None  # closed once, even if that fails
        self.written = 0
        with self._writing():
            try:
                writer.close()
            finally:
                stream.close()
        if self.part:
            os.replace(self.part, self.final)

    def _open(self) -> None:
        self.final = self._next_file() if self.directory else self.path
        durable = self.exporter.durable_on_flush
        self.part = None if durable else _part(self.final)
        mode = ("ab" if self.exporter.binary else "a+") if durable and self.append else "w"
        mode = "wb" if self.exporter.binary and mode == "w" else mode
        text = {} if self.exporter.binary else {"encoding": "utf-8", "newline": ""}
        try:
            self.stream = open(self.part or self.final, mode, **text)  # noqa: SIM115
        except OSError as exc:
            raise OutputError(f"cannot write {self.final}: {exc.strerror}") from None
        self.writer = self.exporter(self.stream, append=self.stream.tell() > 0)
        self.append = True  # a file started afresh is appended to after a rotation

    def name(self) -> str:
        """The follower's name in the delivery group: this machine and the output's real
        path, so that a follower restarted on the same output, however spelled, resumes its
        own records (and a second one is refused by the lock of that name)."""
        return f"{os.uname().nodename}:{os.path.realpath(self.path)}"

    def _next_file(self) -> Path:
        """The next number after every file of the crawl in the directory."""
        pattern = re.compile(rf"{re.escape(self.crawl)}-(\d+)\.")
        numbers = [int(m[1]) for p in self.directory.iterdir() if (m := pattern.match(p.name))]
        name = f"{self.crawl}-{max(numbers, default=0) + 1:05d}{self.exporter.extension}"
        return self.directory / name


class Handover:
    """The output of a follower that hands its records to Python code (Follower.handed,
    api.crawl) instead of writing them: a name in the delivery group, of this machine and
    `where` (the caller's data directory), so that the next run from there resumes its
    records; nothing to make durable (a record is acknowledged once the caller took it)."""

    def __init__(self, where: str | os.PathLike) -> None:
        self.path = Path(where)

    def name(self) -> str:
        return f"{os.uname().nodename}:python:{os.path.realpath(self.path)}"

    def durable(self) -> bool:
        return True

    def release(self) -> None:
        """Nothing to close or unlock (the follower's lock in Redis is the only one)."""


def _is_dir(target: str | os.PathLike) -> bool:
    return os.path.isdir(target) or os.fspath(target).endswith(os.sep)


def _part(final: Path) -> Path:
    """Where a format written whole (Parquet) is written until complete."""
    return final.with_name(final.name + ".part")


class Follower:
    """Delivers a crawl's records from every shard to an Output until told to stop."""

    def __init__(
        self,
        shards: Sequence[Redis],
        crawl: str,
        output: Output | Handover,
        reclaim_after: float = 30.0,
        seen: Callable[[list[dict]], None] | None = None,
    ) -> None:
        """`seen` is shown every batch written (the caller's view of what leaves Redis).
        OutputError if another follower runs on this output (delivery.hold)."""
        self.seen, self.crawl, self.output = seen, crawl, output
        self.redis = shards[0]
        self.lock = self._hold()
        self.renewed = time.monotonic()
        self.deliveries = [Delivery(r, crawl, output.name(), reclaim_after) for r in shards]
        self.unacked: list[tuple[Delivery, list[str]]] = []
        self.delivered = 0
        self._cut_back()

    def _hold(self) -> Lock:
        try:
            return hold(self.redis, self.crawl, self.output.name())
        except OutputTaken as exc:
            raise OutputError(f"{self.output.path}: {exc}") from None

    def _cut_back(self) -> None:
        """A batch of the last run on this output written but not acknowledged is cut off
        its file (it is delivered again)."""
        starts: dict[str, int] = {}
        for path, offset in filter(None, (d.marked() for d in self.deliveries)):
            starts[path] = min(offset, starts.get(path, offset))
        for path, offset in starts.items():
            if os.path.exists(path) and os.path.getsize(path) > offset:
                os.truncate(path, offset)

    def run(self, finished: Callable[[], bool], stop: threading.Event) -> int:
        """Deliver until `stop` is set, or the crawl is `finished` and nothing is left to
        take; what was written is then made durable and acknowledged. Returns the records
        delivered."""
        try:
            while not stop.is_set():
                try:
                    if not self.step() and finished() and not self.step(wait=False):
                        break
                except REDIS_DOWN as exc:
                    if not self._ride_out(exc, stop, finished):
                        break
        finally:
            try:
                self.output.close()
                # Redis gone for good: what was written but not acknowledged stays pending,
                # and the next run on this output cuts it off and writes it again.
                with contextlib.suppress(*REDIS_DOWN):
                    self._acknowledge()
                with contextlib.suppress(LockError, *REDIS_DOWN):  # expired: nobody else may
                    self.lock.release()  # hold it anyway
            finally:
                self.output.release()
        return self.delivered

    def _ride_out(
        self, exc: Exception, stop: threading.Event, finished: Callable[[], bool]
    ) -> bool:
        """Wait until Redis answers again, as the workers and the crawl's watch do, then go
        on where this follower was (`_resume`): True. False when `stop` is set or the command
        ended meanwhile (`finished` says so without Redis: a crawl stopped while its Redis is
        gone has nothing more to drain)."""
        log.warning("follower of %s: Redis unreachable (%s), waiting for it", self.crawl, exc)
        while not stop.is_set():
            try:
                self._resume()
            except REDIS_DOWN:
                with contextlib.suppress(*REDIS_DOWN):
                    if finished():
                        return False
                stop.wait(REDIS_POLL)
                continue
            log.warning("follower of %s: Redis is back", self.crawl)
            return True
        return False

    def _resume(self) -> None:
        """After an outage: the lock again (an outage past LOCK_TTL lost it: taken anew, or
        OutputError if another follower took it meanwhile), what was written acknowledged,
        and this follower's entries taken but not written read again first."""
        try:
            self.lock.reacquire()
        except LockNotOwnedError:
            self.lock = self._hold()
        self.renewed = time.monotonic()
        if self.output.durable():  # (a Parquet file's records wait for its end)
            self._acknowledge()
            for delivery in self.deliveries:
                delivery.backlog = True

    def handed(self, finished: Callable[[], bool], stop: threading.Event) -> Iterator[dict]:
        """Each record, as `run` would write it, handed to the caller instead (api.crawl),
        until `stop` is set or the crawl is `finished` and nothing is left to take. A record
        is acknowledged (trimmed from Redis) when the caller asks for the next one: a caller
        that stops with a record in hand is handed it again by the next run of this output."""
        try:
            while not stop.is_set():
                try:
                    batches = self._take(wait=True)
                    if not batches and finished():
                        if not (batches := self._take(wait=False)):
                            break
                    for delivery, batch in batches:
                        for eid, record in batch:
                            yield record
                            self.unacked.append((delivery, [eid]))
                            self._acknowledge()
                except REDIS_DOWN as exc:  # the batch's rest is read again (backlog)
                    if not self._ride_out(exc, stop, finished):
                        break
        finally:
            with contextlib.suppress(LockError, *REDIS_DOWN):
                self.lock.release()
            self.output.release()

    def step(self, wait: bool = True) -> int:
        """One read of every shard (waiting up to WAIT_MS in all for records, if `wait`),
        written and (when durable) acknowledged; returns the records taken."""
        taken = 0
        for delivery, batch in self._take(wait):
            delivery.mark(*self.output.start())
            records = [record for _, record in batch]
            self.output.write(records)
            if self.seen:
                self.seen(records)
            self.unacked.append((delivery, [eid for eid, _ in batch]))
            taken += len(batch)
        if taken and self.output.durable():
            self._acknowledge()
        if self.output.full():
            self.output.close()
            self._acknowledge()
        return taken

    def _take(self, wait: bool) -> list[tuple[Delivery, list[tuple[str, dict]]]]:
        """One read of every shard, the lock renewed first: the shards' non-empty batches
        of (entry id, record), waiting up to WAIT_MS in all for the first if `wait`."""
        if time.monotonic() - self.renewed > LOCK_TTL / 3:
            self.lock.reacquire()
            self.renewed = time.monotonic()
        batches = []
        for delivery in self.deliveries:
            block_ms = WAIT_MS // len(self.deliveries) if wait and not batches else 0
            if batch := delivery.take(BATCH, block_ms=block_ms, max_bytes=BATCH_BYTES):
                batches.append((delivery, batch))
        return batches

    def _acknowledge(self) -> None:
        """Acknowledge the batches written, one at a time (Redis may go away in between)."""
        while self.unacked:
            delivery, ids = self.unacked[0]
            delivery.acknowledge(ids)
            del self.unacked[0]
            self.delivered += len(ids)
