"""One broken crawl breaks nothing else: a crawl whose task table does not answer (a
PostgreSQL URL on a port where nothing listens) or whose keys are damaged is skipped, and
said so, by /metrics and `rqcrawl list`; it can be cancelled and purged; `seed` reaches the
table before it writes anything; a malformed --db URL is a one-line error."""

from __future__ import annotations

import pytest
from helpers import rqcrawl
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rqcrawl import api
from rqcrawl.config import CrawlConfig
from rqcrawl.frontier import keys
from rqcrawl.ops import control, metrics

UNREACHABLE = "postgresql://crawler:s3cret@127.0.0.1:1/tasks"  # nothing listens on port 1
SEED = "http://127.0.0.1:9/"


def broken_table_crawl(conn, name: str = "broken") -> None:
    """A crawl with revisits whose table went away after its start (`seed` would refuse to
    start it now: the settings are written as its start did)."""
    cfg = CrawlConfig.from_dict({"revisit": 60, "db": UNREACHABLE, "allow_private": True})
    control.start(conn, name, cfg, [SEED])


def samples(conn) -> dict[tuple[str, tuple], float]:
    text = generate_latest(metrics.registry(conn)).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_skip_a_crawl_that_fails_and_say_which(conn):
    api.start(conn, [SEED], "fine", max_depth=0)
    broken_table_crawl(conn)
    api.start(conn, [SEED], "damaged", max_depth=0)
    conn.delete(keys.CrawlKeys("damaged").inflight)
    conn.set(keys.CrawlKeys("damaged").inflight, "not a hash")
    found = samples(conn)
    assert found[("rqcrawl_urls_admitted_total", (("crawl", "fine"),))] == 1
    assert found[("rqcrawl_task_table_up", (("crawl", "broken"),))] == 0
    assert found[("rqcrawl_urls_admitted_total", (("crawl", "broken"),))] == 1
    assert found[("rqcrawl_status_error", (("crawl", "damaged"),))] == 1
    assert ("rqcrawl_urls_admitted_total", (("crawl", "damaged"),)) not in found


def test_list_cancel_and_purge_work_without_the_table(redis_url, conn):
    api.start(conn, [SEED], "fine", max_depth=0)
    broken_table_crawl(conn)
    listed = rqcrawl(redis_url, "list")
    assert "fine" in listed.stdout and "broken" in listed.stdout
    assert "warning: crawl broken: task table unreachable" in listed.stderr
    assert "Traceback" not in listed.stderr
    shown = rqcrawl(redis_url, "status", "broken")
    assert "task table unreachable" in shown.stdout
    assert "cancelled" in rqcrawl(redis_url, "cancel", "broken").stdout
    purged = rqcrawl(redis_url, "purge", "broken", "--force")
    assert "crawl broken purged" in purged.stdout
    assert "task rows were not deleted: task table unreachable" in purged.stderr
    assert api.crawls(conn) == ["fine"]


def test_seed_reaches_the_table_before_it_writes_anything(redis_url, conn):
    out = rqcrawl(
        redis_url, "seed", SEED, "--crawl", "never", "--revisit", "1m", "--db", UNREACHABLE,
        check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "crawl never not started" in out.stderr and "s3cret" not in out.stderr
    assert api.crawls(conn) == []


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:p@h:54x2/db",
        "postgresql://u:p@h:99999/db",
        "nosuchdb://x/y",
        "mysql://[::1",
        "not a url",
    ],
)
def test_a_malformed_db_url_is_a_one_line_error(redis_url, conn, url):
    out = rqcrawl(redis_url, "seed", SEED, "--revisit", "1m", "--db", url, check=False)
    assert out.returncode != 0
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "is not a database URL" in out.stderr
    assert api.crawls(conn) == []


def test_a_database_without_a_task_table_dialect_is_a_one_line_error(redis_url, conn):
    """A database SQLAlchemy knows but the task table does not (rqcrawl.frontier.dialects)."""
    out = rqcrawl(
        redis_url, "seed", SEED, "--crawl", "oracle", "--revisit", "1m",
        "--db", "oracle://u:s3cret@127.0.0.1:1/db", check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert out.stderr.strip().splitlines() == [
        "Error: crawl oracle not started: no task table on oracle: use one of mariadb, mysql, "
        "postgresql, sqlite"
    ], out.stderr
    assert api.crawls(conn) == []
