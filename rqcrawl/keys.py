"""Redis key names. Every key of a crawl carries the crawl's hash tag, so that one crawl
lives in one Redis Cluster slot and `purge` can find exactly its own keys."""

import re

QUEUE_NAME = "crawl"
CRAWLS = "rqcrawl:crawls"  # set of crawl names known to this Redis

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def valid_crawl_name(name: str) -> bool:
    """Names go inside key names and RQ job ids, which allow only letters, digits, _ and -.
    (fullmatch: `$` would let a final newline through.)"""
    return bool(_NAME.fullmatch(name))


def key(crawl: str, *parts: str) -> str:
    """`rqcrawl:{crawl}:part:part`."""
    return ":".join((f"rqcrawl:{{{crawl}}}",) + parts)
