"""The task table: the schedule rule (pure), and the table itself on SQLite and on a real
PostgreSQL (and MySQL when one is given): visits, due URLs taken exactly once, purge."""

from __future__ import annotations

import os
import threading
import time

import pytest
from sqlalchemy import event, func, select

from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import tasks
from rqcrawl.frontier.tasks import DIGESTS, Known, TaskTable, Visited, schedule
from rqcrawl.parse.changes import Content, VisitEnd

CFG = CrawlConfig.from_dict({"revisit": 100, "revisit_min": 20, "revisit_max": 400})
NOW = 1_000_000.0


def after(known: Known, outcome: str = "fetched", status: int | None = 200, digest="d1"):
    return schedule(known, outcome, status, Content(digest) if digest else None, CFG, NOW)


# -- the schedule rule ------------------------------------------------------------------------


def test_a_first_visit_is_new_and_due_after_revisit():
    nxt = after(Known())
    assert (nxt.change, nxt.state, nxt.interval, nxt.next_visit) == (
        "new",
        "scheduled",
        100,
        NOW + 100,
    )


def test_unchanged_grows_the_interval_and_changed_shrinks_it_within_the_bounds():
    seen = Known(visits=1, interval=100, digest="d1")
    assert (after(seen).change, after(seen).interval) == ("unchanged", 150)
    assert (after(seen, digest="d2").change, after(seen, digest="d2").interval) == ("changed", 50)
    assert after(Known(1, 350, digest="d1")).interval == 400  # revisit_max
    assert after(Known(1, 30, digest="d1"), digest="d2").interval == 20  # revisit_min


def test_failures_back_off_two_four_eight_times_the_interval_which_stays():
    waits = []
    known = Known(visits=1, interval=100, digest="d1")
    for _ in range(4):
        nxt = after(known, "failed", 500, None)
        waits.append(nxt.next_visit - NOW)
        known = Known(known.visits + 1, nxt.interval, nxt.failures, nxt.missing, known.digest)
    assert waits == [200, 400, 800, 800]
    assert after(known).change == "unchanged" and after(known).failures == 0


def test_a_page_gone_revisit_gone_after_times_in_a_row_is_not_revisited():
    known = Known(visits=1, interval=100, digest="d1")
    states = []
    for status in (404, 410, 404):
        nxt = after(known, "failed", status, None)
        states.append((nxt.change, nxt.state))
        known = Known(known.visits + 1, nxt.interval, nxt.failures, nxt.missing, known.digest)
    assert states == [("gone", "scheduled"), ("gone", "scheduled"), ("gone", "gone")]
    assert known.missing == 3 and after(known, "failed", 404, None).next_visit is None


def test_a_500_between_404s_restarts_the_gone_count_and_a_page_back_is_changed():
    known = Known(visits=3, interval=100, failures=2, missing=2, digest="d1")
    assert after(known, "failed", 500, None).missing == 0
    assert after(known, digest="d1").change == "changed"  # back, even with the same body


def test_skips_are_not_revisited_and_bounds_default_to_a_quarter_and_eight_times():
    assert after(Known(), "not_html", 200, None).state == "skipped"
    lost = after(Known(1, 100, digest="d1"), "lost", None, None)  # lost with its worker
    assert (lost.state, lost.next_visit, lost.change) == ("scheduled", NOW + 200, None)
    assert CrawlConfig.from_dict({"revisit": "1h"}).revisit_bounds() == (900, 28800)


# -- the table ----------------------------------------------------------------------------------


def visit(table: TaskTable, url: str, outcome="fetched", status=200, digest="d1", crawl="c"):
    """The visit's number and change."""
    content = Content(digest) if digest else None
    return table.visited(crawl, url, 1, VisitEnd(outcome, status, content), CFG)[:2]


def make_due(db_url: str, crawl: str = "c") -> None:
    """Every scheduled row of `crawl` due now (instead of waiting for its interval)."""
    with tasks.engine(db_url).begin() as conn:
        conn.execute(
            tasks.update(tasks.TASKS)
            .where(tasks.TASKS.c.crawl == crawl, tasks.TASKS.c.state == "scheduled")
            .values(next_visit=time.time() - 1)
        )


def test_visits_are_numbered_with_their_change_and_nothing_is_due_before_its_time(db_url):
    table = TaskTable(db_url)
    assert visit(table, "http://a/") == (1, "new")
    assert visit(table, "http://a/") == (2, "unchanged")
    assert visit(table, "http://a/", digest="d2") == (3, "changed")
    assert visit(table, "http://a/", "failed", 404, None) == (4, "gone")
    assert table.take_due("c", 10) == []
    assert table.next_visit("c") == pytest.approx(time.time() + 2 * 75, abs=5)
    assert table.due_counts("c") == {"now": 0, "hour": 1, "day": 1}


def test_due_urls_are_taken_once_with_their_depth_earliest_first(db_url):
    table = TaskTable(db_url)
    for n in range(5):
        visit(table, f"http://a/{n}")
    visit(table, "http://a/x", crawl="other")
    make_due(db_url)
    assert table.due_counts("c")["now"] == 5
    first = table.take_due("c", 3)
    assert len(first) == 3 and {d for _, d, _ in first} == {1}
    rest = table.take_due("c", 10)
    assert len(rest) == 2 and not {u for u, _, _ in first} & {u for u, _, _ in rest}
    assert table.take_due("c", 10) == []
    visit(table, first[0][0])  # its revisit ended: scheduled again, not due yet
    assert table.known("c") == 5 and table.due_counts("c")["now"] == 0


def test_due_urls_are_taken_highest_priority_first(db_url):
    table = TaskTable(db_url)
    for n, priority in enumerate([0, 3, -1, 7]):
        table.visited(
            "c", f"http://a/{n}", 1, VisitEnd("fetched", 200, Content(f"d{n}")), CFG, priority
        )
    make_due(db_url)
    assert table.take_due("c", 10) == [
        ("http://a/3", 1, 7), ("http://a/1", 1, 3), ("http://a/0", 1, 0), ("http://a/2", 1, -1)
    ]  # fmt: skip


def test_a_row_left_queued_past_the_lease_is_due_again(db_url):
    table = TaskTable(db_url)
    visit(table, "http://a/")
    make_due(db_url)
    assert table.take_due("c", 10) == [("http://a/", 1, 0)]
    with tasks.engine(db_url).begin() as conn:  # its pump died QUEUED_LEASE seconds ago
        row = conn.execute(tasks.select(tasks.TASKS)).one()
        assert row.state == "queued" and row.next_visit == pytest.approx(
            row.queued_at + tasks.QUEUED_LEASE
        )  # the end of its lease
        conn.execute(tasks.update(tasks.TASKS).values(next_visit=time.time() - 1))
    assert table.take_due("c", 10) == [("http://a/", 1, 0)]
    assert table.take_due("c", 10) == []


def test_the_pump_takes_what_is_due_by_the_clock_it_is_given(db_url):
    """The bench makes rows due by its clock, not by rewriting them (rqcrawl.bench)."""
    table = TaskTable(db_url)
    visit(table, "http://a/")
    assert table.take_due("c", 10) == []
    assert table.take_due("c", 10, now=time.time() + 30 * 86400) == [("http://a/", 1, 0)]


def test_concurrent_pumps_never_take_the_same_row(db_url):
    rows = 2000
    table = TaskTable(db_url)
    with tasks.engine(db_url).begin() as conn:
        conn.execute(
            tasks.insert(tasks.TASKS),
            [
                {"crawl": "c", "key": tasks.url_key(f"http://a/{n}"), "url": f"http://a/{n}",
                 "depth": 0, "state": "scheduled", "next_visit": 0.0, "interval_s": 1.0,
                 "visits": 1}
                for n in range(rows)
            ],
        )  # fmt: skip
    taken: list[list] = [[] for _ in range(6)]
    errors = []
    start = threading.Barrier(len(taken))  # all at once: one pump alone could take every row

    def pump(mine: list) -> None:
        try:
            start.wait(30)
            while batch := table.take_due("c", 7):
                mine.extend(batch)
                # A pump enqueues its batch before it takes the next: without a pause, the
                # pump holding SQLite's write lock took it again before a waiting one woke
                # from its busy back-off, and took every row alone on a loaded machine.
                time.sleep(0.005)
        except Exception as exc:  # a thread's exception would not fail the test
            errors.append(exc)

    threads = [threading.Thread(target=pump, args=(mine,)) for mine in taken]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    every = [url for mine in taken for url, _, _ in mine]
    assert len(every) == rows and len(set(every)) == rows
    assert sum(1 for mine in taken if mine) > 1  # they did run side by side


def test_purge_deletes_only_the_crawls_rows(db_url):
    table = TaskTable(db_url)
    visit(table, "http://a/")
    visit(table, "http://a/", crawl="other")
    assert table.delete("c") == 1
    assert (table.known("c"), table.known("other")) == (0, 1)


def test_a_sqlite_table_is_created_with_its_directory_in_wal_mode(tmp_path):
    url = CrawlConfig.from_dict({"revisit": 60}).with_task_table_in(tmp_path / "data").db
    assert url == f"sqlite:///{tmp_path.resolve()}/data/tasks.db"
    assert CrawlConfig().with_task_table_in(tmp_path).db == ""  # no revisits, no table
    visit(TaskTable(url), "http://a/")
    with tasks.engine(url).connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_lastmod_after_the_last_visit_makes_a_scheduled_url_due_now(db_url):
    table = TaskTable(db_url)
    for n in range(3):
        visit(table, f"http://a/{n}")
    visit(table, "http://a/gone", "failed", 404, None)
    now = time.time()
    listed = [("http://a/0", now + 1), ("http://a/1", now - 3600), ("http://a/new", now + 1)]
    listed += [(f"http://a/x{n}", now) for n in range(tasks.LISTED_BATCH)]  # a second batch
    assert table.pull_forward("c", listed) == 1  # /0 changed after its visit; /1 before it
    assert [u for u, _, _ in table.take_due("c", 10)] == ["http://a/0"]
    assert table.pull_forward("c", [("http://a/0", now + 1)]) == 0  # queued: not again


def test_a_table_of_an_earlier_version_gets_the_columns_added_since(db_url):
    with tasks.engine(db_url).begin() as conn:
        conn.exec_driver_sql(f"ALTER TABLE {tasks.TASKS.name} DROP COLUMN visited_at")
    tasks._engines.pop(db_url)  # as a process of the new version meets the old table
    table = TaskTable(db_url)
    visit(table, "http://a/")
    with table.engine.connect() as conn:
        (stamp,) = conn.execute(tasks.select(tasks.TASKS.c.visited_at)).one()
    assert stamp == pytest.approx(time.time(), abs=60)


# -- what a big table, a hostile site and simultaneous visits must not break ---------------


def test_the_pump_reads_only_its_index_on_sqlite(tmp_path):
    """EXPLAIN QUERY PLAN of every statement of a pump batch: each probe and each claim
    (an UPDATE ... RETURNING) searches the index (crawl, state, priority, next_visit), none
    scans the table or sorts (a table analysed while every row was scheduled made the
    queued-row lookup of an earlier version a scan)."""
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    table = TaskTable(url)
    with tasks.engine(url).begin() as conn:
        conn.execute(
            tasks.insert(tasks.TASKS),
            [
                {"crawl": c, "key": tasks.url_key(f"http://{c}/{n}"), "url": f"http://{c}/{n}",
                 "depth": 1, "priority": n % 3, "state": "scheduled", "next_visit": n,
                 "interval_s": 1.0, "visits": 1}
                for c in ("c", "other") for n in range(2000)
            ],
        )  # fmt: skip
        conn.exec_driver_sql("ANALYZE")
    statements: list[tuple[str, tuple]] = []

    def seen(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.lstrip().startswith(("SELECT", "UPDATE")):
            statements.append((statement, parameters))

    event.listen(table.engine, "before_cursor_execute", seen)
    try:
        assert len(table.take_due("c", 500)) == 500
    finally:
        event.remove(table.engine, "before_cursor_execute", seen)
    assert len(statements) >= 3  # priorities, and each priority's queued and due rows
    assert sum(s.lstrip().startswith("UPDATE") for s, _ in statements) >= 2
    with table.engine.connect() as conn:
        for statement, parameters in statements:
            plan = " | ".join(
                row[-1]
                for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
            )
            assert "INDEX rqcrawl_tasks_pump" in plan, (statement, plan)
            assert "SCAN rqcrawl_tasks" not in plan and "TEMP B-TREE" not in plan, (statement, plan)


def test_hostile_validators_are_not_kept_and_the_visit_is_recorded(db_url):
    """A NUL byte (PostgreSQL: DataError) or 60 KB (MySQL: data too long) in an ETag or a
    Last-Modified: the visit is recorded, without a conditional GET next time."""
    table = TaskTable(db_url)
    hostile = [
        ('"a\x00b"', "Mon, 23 Nov 2026 17:00:00 GMT\x00"),
        ('"' + "e" * 60_000 + '"', "x" * 60_000),
    ]
    for n, (etag, modified) in enumerate(hostile):
        url = f"http://a/{n}"
        content = Content(f"d{n}", etag=etag, last_modified=modified)
        assert table.visited("c", url, 1, VisitEnd("fetched", 200, content), CFG).visit == 1
        assert table.prior("c", url).conditional_headers() == {}
    fine = Content("d9", etag='W/"v1"', last_modified="Mon, 23 Nov 2026 17:00:00 GMT")
    table.visited("c", "http://a/9", 1, VisitEnd("fetched", 200, fine), CFG)
    assert len(table.prior("c", "http://a/9").conditional_headers()) == 2


def test_simultaneous_first_visits_of_one_body_flag_exactly_one_duplicate(db_url):
    """Pairs of URLs of one body whose visits end at the same moment (two threads, two
    connections, released together): exactly one URL of each pair is `duplicate_of` the
    other, whoever commits first; and a later visit of the second still says so."""
    table = TaskTable(db_url)
    pairs = 12
    barrier = threading.Barrier(2)
    found: dict[str, str | None] = {}
    errors = []

    def visit_all(side: str) -> None:
        try:
            for n in range(pairs):
                barrier.wait(10)
                url = f"http://{side}/{n}"
                content = Content(f"body{n}")
                found[url] = table.visited(
                    "c", url, 1, VisitEnd("fetched", 200, content), CFG
                ).duplicate_of
        except Exception as exc:  # a thread's exception would not fail the test
            errors.append(exc)

    threads = [threading.Thread(target=visit_all, args=(side,)) for side in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    for n in range(pairs):
        a, b = f"http://a/{n}", f"http://b/{n}"
        assert {found[a], found[b]} in ({None, a}, {None, b}), (n, found[a], found[b])
        second = b if found[b] else a
        again = table.visited("c", second, 1, VisitEnd("fetched", 200, Content(f"body{n}")), CFG)
        assert again.duplicate_of == (a if second == b else b)
    assert table.delete("c") == 2 * pairs
    fresh = table.visited("c", "http://b/0", 1, VisitEnd("fetched", 200, Content("body0")), CFG)
    assert fresh.duplicate_of is None  # purge forgot the digests too


def test_a_forked_child_opens_its_own_connections(db_url):
    """The parent's pooled connection is not the child's: `rqcrawl crawl` forks its workers
    after it checked the task table, and a SQLite or PostgreSQL connection used by two
    processes (or through a descriptor the child closed and reused) breaks them both."""
    table = TaskTable(db_url)
    visit(table, "http://a/")
    assert table.engine.pool.checkedin() >= 1  # the parent keeps its own for its next queries
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what its pool holds, then whether a query works
        code = 1
        try:
            pooled = table.engine.pool.checkedin()
            due = table.take_due("c", 10, now=time.time() + 30 * 86400)
            os.write(write, f"{pooled} {len(due)}".encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    reported = os.read(read, 100).decode()
    os.close(read)
    assert os.waitstatus_to_exitcode(status) == 0 and reported == "0 1", reported
    assert table.take_due("c", 10, now=time.time() + 30 * 86400) == []  # the child took it


def test_the_digests_table_keeps_one_row_per_url_however_often_pages_change(db_url):
    """A page changing at each visit leaves the row of its current body only; a URL that
    repeated an old body becomes that body's first once its first URL moved on."""
    table = TaskTable(db_url)
    for n in range(20):
        table.visited("c", "http://a/live", 1, VisitEnd("fetched", 200, Content(f"live{n}")), CFG)
    assert table.visited(
        "c", "http://a/copy", 1, VisitEnd("fetched", 200, Content("live19")), CFG
    ) == (Visited(1, "new", "http://a/live"))
    with table.engine.connect() as conn:
        rows = conn.execute(select(DIGESTS.c.digest, DIGESTS.c.url)).all()
    assert sorted(rows) == [("live19", "http://a/live")]
    again = table.visited("c", "http://a/live", 1, VisitEnd("fetched", 200, Content("live20")), CFG)
    assert again.change == "changed" and again.duplicate_of is None
    copy = table.visited("c", "http://a/copy", 1, VisitEnd("fetched", 200, Content("live19")), CFG)
    assert copy.change == "unchanged" and copy.duplicate_of is None
    back = table.visited("c", "http://a/live", 1, VisitEnd("fetched", 200, Content("live19")), CFG)
    assert back.change == "changed" and back.duplicate_of == "http://a/copy"
    with table.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(DIGESTS)).scalar() == 1
