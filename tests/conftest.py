import sys
from pathlib import Path

import pytest
import redis

sys.path.insert(0, str(Path(__file__).parent))

from servers import RedisServer  # noqa: E402


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server):
    """The private Redis, emptied for each test (it is ours: nobody else's data is in it)."""
    conn = redis.Redis.from_url(redis_server.url)
    conn.flushdb()
    yield redis_server.url
    conn.close()


@pytest.fixture
def conn(redis_url):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


@pytest.fixture
def slowlog(conn):
    """Redis's own log of every command that ran longer than 100 ms, emptied first."""
    old = conn.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
    conn.config_set("slowlog-log-slower-than", 100_000)
    conn.slowlog_reset()
    yield lambda: conn.slowlog_get(1000)
    conn.config_set("slowlog-log-slower-than", old)
