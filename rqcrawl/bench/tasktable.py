"""`rqcrawl bench --task-table N --db URL`: what one pump batch costs in a big task table.

Builds N rows of one crawl in the table at URL (SQLite file, PostgreSQL, MySQL/MariaDB; the
rows of the bench's own crawl name, replaced at every run, nothing else touched), then times
TaskTable.take_due of PUMP_BATCH rows (the pump's batch) when 0.1 % of the rows are due and
when all are due, and a one-row read (`prior`, what every fetch does first) in another
process while the batches are taken. The table is analysed after it is built, as autovacuum
or a DBA would. Rows become due as in a crawl, by time passing (the bench's clock, given to
take_due), not by an UPDATE of every row: a mass UPDATE leaves as many dead index entries as
rows (PostgreSQL's first scan, InnoDB's purge), which a crawl of small transactions never has.
Timings on a shared machine are noisy: each figure is over BATCHES batches, and CPU time is
printed beside the wall time: the bench's own (all of SQLite's work, the client's share of
a server's) and, for a server on this machine, the server's (from /proc: PostgreSQL's
backend of the bench's connection, MariaDB's whole process), whose sum is what a batch
costs on an idle machine. What a batch writes tells disk-bound from CPU-bound: the bytes
this process wrote (SQLite: WAL and checkpoints), PostgreSQL's WAL, InnoDB's redo log (the
last two server-wide: other sessions' writes count too).
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import click
from sqlalchemy import delete, text, update
from sqlalchemy.engine import make_url

from rqcrawl.defaults import PUMP_BATCH
from rqcrawl.frontier import tasks
from rqcrawl.frontier.tasks import TASKS, TaskTable

CRAWL = "bench-task-table"
BUILD_BATCH = 10_000  # rows per INSERT while building
BATCHES = 5  # pump batches timed per case
SHARES = (0.001, 1.0)  # the due share of the rows in each case
LOCAL_HOSTS = (None, "", "localhost", "127.0.0.1", "::1")  # a server whose /proc we can read


def report(rows: int, db: str) -> None:
    """Build the table, time the pump in each case and print the figures."""
    table, now = TaskTable(db), time.time()
    started = time.perf_counter()
    build(table, rows, now)
    click.echo(f"built {rows} rows in {time.perf_counter() - started:.1f} s ({backend(table)})")
    head = (
        "due", "batch (median)", "batch (max)", "batch CPU (median)", "server CPU (median)",
        "written (median)", "1-row read (max)",
    )  # fmt: skip
    lines = ["  ".join(f"{h:>19}" for h in head)]
    for share in SHARES:
        clock = now + due_rows(rows, share)
        requeue(table, clock)
        batch_s, cpu_s, server_s, written, read_s = time_batches(table, clock)
        figures = (
            f"{share:.1%}", ms(statistics.median(batch_s)), ms(max(batch_s)),
            ms(statistics.median(cpu_s)),
            ms(statistics.median(server_s)) if server_s else "-",
            f"{statistics.median(written) / 2**20:.1f} MB" if written else "-",
            ms(max(read_s)),
        )  # fmt: skip
        lines.append("  ".join(f"{f:>19}" for f in figures))
    click.echo("\n".join(lines))
    click.echo(f"batch: {PUMP_BATCH} rows taken (TaskTable.take_due), {BATCHES} times; server "
               "CPU: its process on this machine (- elsewhere; 10 ms ticks); written: see "
               "rqcrawl/bench/tasktable.py; 1-row read: the slowest `prior` of another process "
               "during the batches")  # fmt: skip
    with table.engine.begin() as conn:
        conn.execute(delete(TASKS).where(TASKS.c.crawl == CRAWL))


def backend(table: TaskTable) -> str:
    return table.engine.dialect.name


def build(table: TaskTable, rows: int, now: float) -> None:
    """N scheduled rows of the bench crawl, row n due at now + n seconds (page numbers are
    in no relation to the primary key, a sha1), inserted in primary-key order (a B-tree
    filled from left to right: minutes less to build)."""
    with table.engine.begin() as conn:
        conn.execute(delete(TASKS).where(TASKS.c.crawl == CRAWL))
    urls = sorted((tasks.url_key(u), n, u) for n in range(rows) for u in (page(n),))
    for start in range(0, rows, BUILD_BATCH):
        batch = [
            {"crawl": CRAWL, "key": key, "url": url, "depth": 1, "priority": 0,
             "state": tasks.SCHEDULED, "next_visit": now + n, "interval_s": 86400.0,
             "visits": 1, "digest": key, "simhash": n}
            for key, n, url in urls[start : start + BUILD_BATCH]
        ]  # fmt: skip
        with table.engine.begin() as conn:
            conn.execute(tasks.insert(TASKS), batch)
    analyse(table)


def page(n: int) -> str:
    return f"http://bench{n % 1000}.test/page/{n}"


def analyse(table: TaskTable) -> None:
    """Fresh statistics for the planner, and on SQLite the WAL written back into the file
    (after a million-row build, as a checkpoint would have done meanwhile in a real crawl,
    whose transactions are small)."""
    statement = {
        "postgresql": "ANALYZE rqcrawl_tasks",
        "sqlite": "ANALYZE",
        "mysql": "ANALYZE TABLE rqcrawl_tasks",
    }[backend(table)]
    with table.engine.connect() as conn:
        conn.execute(text(statement)).close()
        conn.commit()
    if backend(table) == "sqlite":  # outside a transaction: the driver's own connection
        raw = table.engine.raw_connection()
        try:
            raw.driver_connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            raw.close()


def due_rows(rows: int, share: float) -> int:
    """How many rows are due in a case: `share` of them, and enough for every batch."""
    return max(PUMP_BATCH * BATCHES, int(rows * share))


def requeue(table: TaskTable, clock: float) -> None:
    """The rows taken by the last case scheduled again, after the others (not due at
    `clock`): 2,500 rows, as many as the pump's visits would rewrite."""
    mine = TASKS.c.crawl == CRAWL
    with table.engine.begin() as conn:
        conn.execute(
            update(TASKS).where(mine, TASKS.c.state == tasks.QUEUED).values(
                state=tasks.SCHEDULED, queued_at=None, next_visit=clock + 86400 * 365
            )
        )  # fmt: skip


def time_batches(table: TaskTable, clock: float) -> tuple[list[float], ...]:
    """Seconds per pump batch taken at `clock` (wall time, CPU time of this process and of the
    server's, if measured), bytes written per batch (if measured), and seconds of the one-row
    reads that another process (a worker, as in a crawl) made meanwhile."""
    spawn = multiprocessing.get_context("spawn")
    stop, results = spawn.Event(), spawn.Queue()
    reader = spawn.Process(target=read_rows, args=(table.url, stop, results))
    reader.start()
    meters = {"server": server_cpu(table), "written": bytes_written(table)}  # None: unmeasured
    spent: dict[str, list] = {name: [] for name, meter in meters.items() if meter}
    try:
        assert results.get(timeout=60) == "ready"
        batches, cpu = [], []
        for _ in range(BATCHES):
            before = {name: meters[name]() for name in spent}
            started, cpu_started = time.perf_counter(), time.process_time()
            taken = table.take_due(CRAWL, PUMP_BATCH, now=clock)
            batches.append(time.perf_counter() - started)
            cpu.append(time.process_time() - cpu_started)
            for name, values in spent.items():
                values.append(meters[name]() - before[name])
            assert len(taken) == PUMP_BATCH, len(taken)
    finally:
        stop.set()
    reads = results.get(timeout=60)
    reader.join(10)
    if table.engine.pool.checkedin() > 1:  # another backend may have served some batches
        spent.pop("server", None)
    return batches, cpu, spent.get("server", []), spent.get("written", []), reads or [0.0]


def server_cpu(table: TaskTable) -> Callable[[], float] | None:
    """A reader of the server's CPU seconds from /proc: the PostgreSQL backend of the bench's
    (one pooled) connection, or the whole MariaDB/MySQL process; None for SQLite (the bench's
    own CPU is all of it) or a server elsewhere."""
    if make_url(table.url).host not in LOCAL_HOSTS:
        return None
    with table.engine.connect() as conn:
        if backend(table) == "postgresql":
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
        elif backend(table) == "mysql":
            pid = _read(conn.execute(text("SELECT @@pid_file")).scalar())
        else:
            return None
    stat = Path(f"/proc/{pid}/stat")
    if pid is None or not stat.exists():
        return None

    def seconds() -> float:
        fields = stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime

    return seconds


def bytes_written(table: TaskTable) -> Callable[[], int] | None:
    """A reader of bytes written so far: by this process (SQLite: its WAL and checkpoints;
    Linux /proc/self/io), PostgreSQL's WAL position, InnoDB's redo log written."""
    query = {
        "postgresql": "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')",
        "mysql": "SELECT variable_value FROM information_schema.global_status"
        " WHERE variable_name = 'INNODB_OS_LOG_WRITTEN'",
    }.get(backend(table))
    if query is None:
        io = Path("/proc/self/io")
        return (lambda: _io_field(io, "write_bytes")) if io.exists() else None

    def server() -> int:
        with table.engine.connect() as conn:
            return int(conn.execute(text(query)).scalar())

    return server


def _io_field(io: Path, name: str) -> int:
    return int(dict(line.split(": ") for line in io.read_text().splitlines())[name])


def _read(path: str | None) -> int | None:
    try:
        return int(Path(path).read_text().strip()) if path else None
    except (OSError, ValueError):
        return None


def read_rows(url: str, stop, results) -> None:
    """The reading process: `prior` of one row after another until `stop`."""
    table, reads, n = TaskTable(url), [], 0
    table.prior(CRAWL, page(n))
    results.put("ready")
    while not stop.is_set():
        started = time.perf_counter()
        table.prior(CRAWL, page(n))
        reads.append(time.perf_counter() - started)
        n += 7
    results.put(reads)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"
