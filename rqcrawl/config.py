"""A crawl's settings: defaults, validation, and their home in Redis.

Workers read the config of a crawl from Redis (and cache it per process), so a bare
`rq worker crawl` with only a Redis URL can serve any crawl. `conf/default.toml` documents
the same defaults; a test keeps the two in step.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from redis import Redis

from . import keys


class ConfigError(ValueError):
    """A setting has an unknown name or a value of the wrong type."""


@dataclass(frozen=True)
class CrawlConfig:
    max_depth: int = 2
    scope_hosts: list[str] = field(default_factory=list)  # empty: the seeds' hosts
    allow_private: bool = False
    user_agent: str = "rqcrawl/0.1 (+https://pypi.org/project/rqcrawl/)"
    connect_timeout: float = 5.0
    read_timeout: float = 15.0
    download_timeout: float = 45.0
    max_body_bytes: int = 5_000_000
    max_redirects: int = 10
    max_url_length: int = 2048
    bloom_capacity: int = 10_000_000
    bloom_error_rate: float = 0.001
    window: int = 1000
    job_timeout: int = 60
    failure_ttl: int = 7 * 24 * 3600
    retries: int = 2
    retry_base: float = 2.0
    delay: float = 1.0
    host_concurrency: int = 1
    obey_robots: bool = True
    max_crawl_delay: float = 30.0
    robots_ttl: int = 24 * 3600
    max_pages: int = 0
    max_pages_per_host: int = 0
    max_segment_repeats: int = 3
    max_query_params: int = 20

    @classmethod
    def from_dict(cls, data: dict[str, Any], base: CrawlConfig | None = None) -> CrawlConfig:
        """Overlay `data` on `base` (or the defaults), rejecting unknown keys and wrong types."""
        known = {f.name: f for f in fields(cls)}
        merged = asdict(base or cls())
        for name, value in data.items():
            if name not in known:
                raise ConfigError(f"unknown setting {name!r}")
            merged[name] = _checked(name, value, type(merged[name]))
        return cls(**merged)

    @classmethod
    def from_toml(cls, path: str | Path, base: CrawlConfig | None = None) -> CrawlConfig:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        return cls.from_dict(data.get("crawl", data), base)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def to_toml(self) -> str:
        """The settings as a `[crawl]` table that `--config FILE` reads back (the JSON of a
        string, number, boolean or list of strings is also its TOML)."""
        lines = [f"{name} = {json.dumps(value)}" for name, value in asdict(self).items()]
        return "\n".join(["[crawl]", *lines])


def _checked(name: str, value: Any, expected: type) -> Any:
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if expected is list:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
        raise ConfigError(f"setting {name!r} must be a list of strings")
    if type(value) is not expected:
        raise ConfigError(
            f"setting {name!r} must be {expected.__name__}, not {type(value).__name__}"
        )
    return value


def save(redis: Redis, crawl: str, config: CrawlConfig) -> None:
    with redis.pipeline() as pipe:
        pipe.set(keys.key(crawl, "config"), config.to_json())
        pipe.sadd(keys.CRAWLS, crawl)
        pipe.execute()


_cache: dict[str, CrawlConfig] = {}


def load(redis: Redis, crawl: str) -> CrawlConfig | None:
    """The crawl's config, cached for the life of the process (a crawl's config never changes)."""
    if crawl not in _cache:
        raw = redis.get(keys.key(crawl, "config"))
        if raw is None:
            return None
        _cache[crawl] = CrawlConfig.from_dict(json.loads(raw))
    return _cache[crawl]
