"""Redis URLs and connections: the password never shown in messages, and which server a
connection talks to."""

from __future__ import annotations

import re
from collections.abc import Hashable
from urllib.parse import urlsplit

from redis import Redis

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
    crawl (rqcrawl.threadworkers) keeps each shard's state apart, and its threads of one
    shard share it whatever their connection objects."""
    pool = redis.connection_pool
    kw = pool.connection_kwargs
    service = getattr(pool, "service_name", None)  # a Sentinel's pool
    return service, kw.get("host"), kw.get("port"), kw.get("path"), kw.get("db", 0)
