"""rqcrawl: a distributed web crawler in which every URL is an RQ job.

The public Python API, importable from here (`from rqcrawl import start, status, CrawlConfig`):
the functions of `rqcrawl.api`, the settings model, the shared Bloom filter, a hook's page,
the local fleet and embedded Redis of `rqcrawl crawl`. Each is imported on first use, so that
importing a light module of the package (`rqcrawl.parse.urls`, say) loads neither RQ nor the
frontier.

The package by role, in layers, each importing only those below it (tests/test_layers.py):
`cli` over `bench` (the benchmark) and `demo`, over `api`, `render/` (pages that JavaScript
builds), `workers/` (the processes and the job of one URL), `ops/` (status, metrics,
operations, export), `frontier/` (a crawl's state in Redis and SQL), `fetch/` (requests and
the rules every request obeys), `config` (the settings), `parse/` (what a response says), and
small utilities at the bottom (`defaults`, `lru`, `redisurl`, `quickexit`, `lazygroup`).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_API = (
    "settings", "plan", "start", "add_seeds", "crawls", "crawl_config", "status", "records",
    "failures", "export", "pause", "resume", "cancel", "purge", "pump", "crawl", "CrawlError",
    "InvalidInput", "NoSuchCrawl", "StateError", "DamagedCrawl",
)  # fmt: skip
_ELSEWHERE = {
    "CrawlConfig": "rqcrawl.config",
    "ConfigError": "rqcrawl.config",
    "BloomFilter": "rqcrawl.frontier.bloom",
    "HookPage": "rqcrawl.parse.hooks",
    "LocalWorkers": "rqcrawl.workers.runner",
    "EmbeddedRedis": "rqcrawl.workers.embedded",
}
__all__ = [*_API, *_ELSEWHERE]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(import_module("rqcrawl.api"), name)
    if name in _ELSEWHERE:
        return getattr(import_module(_ELSEWHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
