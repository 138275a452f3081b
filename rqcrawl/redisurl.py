"""Redis URLs and connections: Sentinel URLs, the password never shown in messages, and
which server a connection talks to.

redis-py's `Redis.from_url` knows no Sentinel URL, and RQ's CLI takes Sentinel settings only
from a config module. `Client.from_url` also takes

    redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db]

(the sentinels, the monitored service, the database): the connection asks the sentinels for
the service's primary and follows it through a failover. A stock `rq worker` takes it with
`--connection-class rqcrawl.redisurl.Client`. The password is the data servers' and, as
with Redis Sentinel's own `requirepass`, the sentinels'.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from urllib.parse import unquote, urlsplit

from redis import Redis
from redis import exceptions as redis_errors
from redis.connection import parse_url
from redis.sentinel import Sentinel, SentinelConnectionPool

SENTINEL_SCHEME = "redis+sentinel"
CLIENT = "rqcrawl.redisurl.Client"  # for `rq worker --connection-class`

# The errors of a Redis that is gone (crashed, restarting, failing over), which workers and
# `rqcrawl crawl` wait out rather than end on.
REDIS_DOWN = (redis_errors.ConnectionError, redis_errors.TimeoutError)

_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&\s'\"]*")


def masked(text: str, url: str) -> str:
    """`text` (the URL itself, or a message that may quote it) with the URL's password
    replaced by `***`, for `redis://:pw@`, `redis://user:pw@`, `rediss://` and a
    `?password=` query alike."""
    text = _QUERY_PASSWORD.sub(r"\1***", text)
    try:
        password = urlsplit(url).password
    except ValueError:  # an unparsable URL: hide everything between :// and @
        password = url.partition("://")[2].rpartition("@")[0].partition(":")[2] or None
    if not password:
        return text
    return text.replace(f":{password}@", ":***@")


def server_key(redis: Redis) -> Hashable:
    """The server a connection talks to (address or Sentinel service, and database), as a
    key of what a process keeps per crawl: a process that serves several shards of one
    crawl (rqcrawl.workers.threadworkers) keeps each shard's state apart, and its threads of one
    shard share it whatever their connection objects."""
    pool = redis.connection_pool
    kw = pool.connection_kwargs
    service = getattr(pool, "service_name", None)  # a Sentinel's pool
    return service, kw.get("host"), kw.get("port"), kw.get("path"), kw.get("db", 0)


class Client(Redis):
    """redis-py's client, whose `from_url` also takes a Sentinel URL (see the module)."""

    @classmethod
    def from_url(cls, url: str, **kwargs) -> Redis:
        if not is_sentinel(url):
            return super().from_url(url, **kwargs)
        sentinels, service, auth = sentinel_settings(url)
        manager = Sentinel(sentinels, sentinel_kwargs=dict(auth), **auth, **kwargs)
        return manager.master_for(service["name"], redis_class=cls, db=service["db"])


def sentinel_settings(url: str) -> tuple[list[tuple[str, int]], dict, dict]:
    """The sentinels' addresses, the service (name, db) and the credentials of a Sentinel
    URL; a ValueError names what is wrong."""
    rest = url.removeprefix(SENTINEL_SCHEME + "://")
    credentials, _, rest = rest.rpartition("@")
    hosts, _, path = rest.partition("/")
    user, _, password = credentials.partition(":")
    sentinels = []
    for address in hosts.split(","):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"a sentinel must be host:port, not {address!r}")
        sentinels.append((host.strip("[]"), int(port)))
    name, _, db = path.partition("/")
    if not name or not (db or "0").isdigit():
        raise ValueError("a Sentinel URL ends with /service or /service/db")
    auth = {"username": unquote(user) or None, "password": unquote(password) or None}
    return sentinels, {"name": name, "db": int(db or 0)}, {k: v for k, v in auth.items() if v}


def is_sentinel(url: str) -> bool:
    return url.startswith(SENTINEL_SCHEME + "://")


def behind_sentinel(redis: Redis) -> bool:
    """Whether the connection follows a Sentinel's primary."""
    return isinstance(redis.connection_pool, SentinelConnectionPool)


def check_url(url: str) -> None:
    """A ValueError if `url` is neither a Redis URL nor a Sentinel URL (nothing is reached)."""
    if is_sentinel(url):
        sentinel_settings(url)
    else:
        parse_url(url)


def client(url: str) -> Redis:
    """A connection to the Redis of `url` (redis://, rediss://, unix:// or Sentinel)."""
    return Client.from_url(url)
