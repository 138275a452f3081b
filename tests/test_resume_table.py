"""One crawl, one table: seeding a crawl name that already has rows in the task table (an
earlier run, another Redis) resumes that crawl and says so with its size and last visit; its
new seeds' links are crawled like any other; `--fresh` purges the old rows first."""

from __future__ import annotations

import pytest
from helpers import rqcrawl, seed_local, wait_until
from servers import HTTPSite, reply

from rqcrawl.frontier.tasks import TaskTable
from rqcrawl.ops import stats
from rqcrawl.workers.runner import LocalWorkers

LINKS = [f"/p{i}" for i in range(1, 6)]


def mirrored(req) -> None:
    """The same six pages on every port (a mirror, a staging copy): / links to five pages by
    root-relative links, so that each page's body is the same on every port."""
    links = "".join(f'<a href="{p}">{p}</a>' for p in LINKS) if req.path == "/" else "leaf"
    reply(req, 200, f"<html><title>{req.path}</title>{links}</html>".encode())


def crawl_once(redis_url: str, conn, http: HTTPSite, db: str, tmp_path, *extra: str) -> str:
    """Seed crawl `x` on `redis_url`, run workers until the six pages of `http` are fetched;
    the seed command's output."""
    seeded = seed_local(redis_url, http.base + "/", "x", 1, "--revisit", "1h", "--db", db, *extra)
    with LocalWorkers(redis_url, 1, log_dir=tmp_path):
        wait_until(
            lambda: stats.status(conn, "x"),
            60,
            "the crawl's six pages",
            accept=lambda s: s["state"] == "idle" and all(http.hits[p] for p in ["/", *LINKS]),
        )
    return seeded.stdout + seeded.stderr


@pytest.mark.timeout(150)
@pytest.mark.parametrize("fresh", [False, True])
def test_a_crawl_name_seeded_again_over_a_kept_table_resumes(
    redis_url, conn, second_redis_url, tmp_path, fresh
):
    from redis import Redis

    db = f"sqlite:///{tmp_path / 'tasks.db'}"
    with HTTPSite(mirrored, max_seconds=140) as first:
        said = crawl_once(redis_url, conn, first, db, tmp_path)
    assert "resum" not in said
    assert TaskTable(db).known("x") == 6
    fresh_redis = Redis.from_url(second_redis_url)
    with HTTPSite(mirrored, host="127.0.0.2", max_seconds=140) as second:
        extra = ("--fresh",) if fresh else ()
        said = crawl_once(second_redis_url, fresh_redis, second, db, tmp_path, *extra)
    if fresh:
        assert "resum" not in said and "6 URLs of its task table purged first" in said
        assert TaskTable(db).known("x") == 6
    else:
        assert "crawl x: resuming its task table's 6 URLs" in said and "last visited" in said
        assert TaskTable(db).known("x") == 12


def test_fresh_is_refused_for_a_crawl_this_redis_has(redis_url, tmp_path):
    db = f"sqlite:///{tmp_path / 'tasks.db'}"
    seed_local(redis_url, "http://127.0.0.1:9/", "y", 1, "--revisit", "1h", "--db", db)
    again = rqcrawl(
        redis_url, "seed", "http://127.0.0.1:9/", "--crawl", "y", "--fresh", "--allow-private",
        "--revisit", "1h", "--db", db, check=False,
    )  # fmt: skip
    assert again.returncode == 1
    assert again.stderr.strip().splitlines() == [
        "Error: crawl y exists: purge it (rqcrawl purge y) to start afresh"
    ]
