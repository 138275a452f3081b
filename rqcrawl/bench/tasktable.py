"""`rqcrawl bench --task-table N --db URL`: what one pump batch costs in a big task table.

Builds N rows of one crawl in the table at URL (SQLite file, PostgreSQL, MySQL/MariaDB; the
rows of the bench's own crawl name, replaced at every run, nothing else touched), then times
TaskTable.take_due of PUMP_BATCH rows (the pump's batch) when 0.1 % of the rows are due and
when all are due, and a one-row read (`prior`, what every fetch does first) while a batch is
being taken. The table is analysed after it is built, as autovacuum or a DBA would.
Timings on a shared machine are noisy: each figure is the median of BATCHES batches.
"""

from __future__ import annotations

import statistics
import threading
import time

import click
from sqlalchemy import delete, text, update

from .. import tasks
from ..frontier import PUMP_BATCH
from ..tasks import TASKS, TaskTable

CRAWL = "bench-task-table"
BUILD_BATCH = 10_000  # rows per INSERT while building
BATCHES = 5  # pump batches timed per case
SHARES = (0.001, 1.0)  # the due share of the rows in each case


def report(rows: int, db: str) -> None:
    """Build the table, time the pump in each case and print the figures."""
    table = TaskTable(db)
    started = time.perf_counter()
    build(table, rows)
    click.echo(f"built {rows} rows in {time.perf_counter() - started:.1f} s ({backend(table)})")
    lines = [f"{'due':>8}  {'batch (median)':>14}  {'batch (max)':>11}  {'1-row read':>10}"]
    for share in SHARES:
        make_due(table, rows, share)
        batch_s, read_s = time_batches(table)
        lines.append(
            f"{share:>8.1%}  {ms(statistics.median(batch_s)):>14}  {ms(max(batch_s)):>11}  "
            f"{ms(max(read_s)):>10}"
        )
    click.echo("\n".join(lines))
    click.echo(f"batch: {PUMP_BATCH} rows taken (TaskTable.take_due); 1-row read: the slowest "
               "`prior` run during the batches")  # fmt: skip
    with table.engine.begin() as conn:
        conn.execute(delete(TASKS).where(TASKS.c.crawl == CRAWL))


def backend(table: TaskTable) -> str:
    return table.engine.dialect.name


def build(table: TaskTable, rows: int) -> None:
    """N scheduled rows of the bench crawl, none due (due in one to two days)."""
    now = time.time()
    with table.engine.begin() as conn:
        conn.execute(delete(TASKS).where(TASKS.c.crawl == CRAWL))
    for start in range(0, rows, BUILD_BATCH):
        batch = [
            {"crawl": CRAWL, "key": tasks.url_key(url), "url": url, "depth": 1, "priority": 0,
             "state": tasks.SCHEDULED, "next_visit": now + 86400 + n, "interval_s": 86400.0,
             "visits": 1, "digest": tasks.url_key(url), "simhash": n}
            for n in range(start, min(rows, start + BUILD_BATCH))
            for url in (f"http://bench{n % 1000}.test/page/{n}",)
        ]  # fmt: skip
        with table.engine.begin() as conn:
            conn.execute(tasks.insert(TASKS), batch)
    analyse(table)


def analyse(table: TaskTable) -> None:
    statement = {"postgresql": "ANALYZE rqcrawl_tasks", "sqlite": "ANALYZE"}
    sql = statement.get(backend(table), "ANALYZE TABLE rqcrawl_tasks")
    with table.engine.connect() as conn:
        conn.execute(text(sql)).all() if sql.startswith("ANALYZE TABLE") else conn.execute(
            text(sql)
        )
        conn.commit()


def make_due(table: TaskTable, rows: int, share: float) -> None:
    """Every row scheduled again; the first `share` of them (by build order) due, spread
    over the last hour, in random order of next_visit vs build order."""
    now = time.time()
    due = max(PUMP_BATCH * BATCHES, int(rows * share))
    scheduled = {"state": tasks.SCHEDULED, "queued_at": None}
    with table.engine.begin() as conn:
        conn.execute(
            update(TASKS).where(TASKS.c.crawl == CRAWL).values(
                **scheduled, next_visit=now + 86400 + TASKS.c.simhash
            )
        )  # fmt: skip
        conn.execute(
            update(TASKS)
            .where(TASKS.c.crawl == CRAWL, TASKS.c.simhash < due)
            .values(next_visit=now - 3600 + (TASKS.c.simhash * 7919 % 3600))
        )
    analyse(table)


def time_batches(table: TaskTable) -> tuple[list[float], list[float]]:
    """Seconds per pump batch, and of one-row reads made meanwhile by another thread."""
    reads: list[float] = []
    stop = threading.Event()

    def reader() -> None:
        n = 0
        while not stop.is_set():
            started = time.perf_counter()
            table.prior(CRAWL, f"http://bench{n % 1000}.test/page/{n}")
            reads.append(time.perf_counter() - started)
            n += 7

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    batches = []
    try:
        for _ in range(BATCHES):
            started = time.perf_counter()
            taken = table.take_due(CRAWL, PUMP_BATCH)
            batches.append(time.perf_counter() - started)
            assert len(taken) == PUMP_BATCH, len(taken)
    finally:
        stop.set()
        thread.join()
    return batches, reads or [0.0]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"
