"""A crawl's settings: defaults, validation, and their home in Redis.

Workers read the config of a crawl from Redis (and cache it per process), so a bare
`rq worker crawl` with only a Redis URL can serve any crawl. `conf/default.toml` documents
the same defaults; a test keeps the two in step.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from redis import Redis

from . import keys
from .extract import field_problem

# Links to files a crawler of HTML pages has no use for: Scrapy's IGNORED_EXTENSIONS.
DENIED_EXTENSIONS = [
    # archives
    "7z", "7zip", "bz2", "rar", "tar", "tar.gz", "xz", "zip",
    # images
    "mng", "pct", "bmp", "gif", "jpg", "jpeg", "png", "pst", "psp", "tif", "tiff", "ai", "drw",
    "dxf", "eps", "ps", "svg", "cdr", "ico", "webp",
    # audio
    "mp3", "wma", "ogg", "wav", "ra", "aac", "mid", "au", "aiff",
    # video
    "3gp", "asf", "asx", "avi", "mov", "mp4", "mpg", "qt", "rm", "swf", "wmv", "m4a", "m4v",
    "flv", "webm",
    # office suites
    "xls", "xlsm", "xlsx", "xltm", "xltx", "potm", "potx", "ppt", "pptm", "pptx", "pps", "doc",
    "docb", "docm", "docx", "dotm", "dotx", "odt", "ods", "odg", "odp",
    # other
    "css", "pdf", "exe", "bin", "rss", "dmg", "iso", "apk", "jar", "sh", "rb", "js", "hta",
    "bat", "cpl", "msi", "msp", "py",
]  # fmt: skip


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
    failed_job_ttl: int = 24 * 3600  # seconds a failed page's finished RQ job stays listed
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
    # Extraction: {name: {css|xpath = "...", all = bool}}, see extract.field_problem.
    fields: dict[str, dict] = field(default_factory=dict)
    # Link rules (they narrow the scope, never widen it; seeds are not subject to them).
    link_allow: list[str] = field(default_factory=list)  # regexes; empty: allow all
    link_deny: list[str] = field(default_factory=list)  # regexes
    link_allow_domains: list[str] = field(default_factory=list)  # domains and subdomains
    link_deny_domains: list[str] = field(default_factory=list)
    link_deny_extensions: list[str] = field(default_factory=lambda: list(DENIED_EXTENSIONS))
    hook: str = ""  # "package.module:function", called on every fetched HTML page
    warc_dir: str = ""  # archive responses as WARC files in this directory of each worker
    warc_max_bytes: int = 100_000_000  # a worker starts a new WARC file past this size

    @classmethod
    def from_dict(cls, data: dict[str, Any], base: CrawlConfig | None = None) -> CrawlConfig:
        """Overlay `data` on `base` (or the defaults), rejecting unknown keys and wrong types."""
        known = {f.name: f for f in fields(cls)}
        merged = asdict(base or cls())
        for name, value in data.items():
            if name not in known:
                raise ConfigError(f"unknown setting {name!r}")
            merged[name] = _checked(name, value, type(merged[name]))
            if name in _VALIDATORS:
                _VALIDATORS[name](name, merged[name])
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
        """The settings as a `[crawl]` table that `--config FILE` reads back."""
        lines = [f"{name} = {_toml(value)}" for name, value in asdict(self).items()]
        return "\n".join(["[crawl]", *lines])


def _toml(value: Any) -> str:
    """A setting's value in TOML: tables inline, and JSON for the rest (a JSON string, number,
    boolean or array of strings is also valid TOML)."""
    if isinstance(value, dict):
        items = ", ".join(f"{_toml_key(k)} = {_toml(v)}" for k, v in value.items())
        return f"{{ {items} }}" if items else "{}"
    return json.dumps(value)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _checked(name: str, value: Any, expected: type) -> Any:
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if expected is list:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
        raise ConfigError(f"setting {name!r} must be a list of strings")
    if expected is dict:
        if isinstance(value, dict):
            return value
        raise ConfigError(f"setting {name!r} must be a table")
    if type(value) is not expected:
        raise ConfigError(
            f"setting {name!r} must be {expected.__name__}, not {type(value).__name__}"
        )
    return value


def _check_fields(name: str, specs: dict) -> None:
    for field_name, spec in specs.items():
        problem = field_problem(spec)
        if problem:
            raise ConfigError(f"setting '{name}.{field_name}': {problem}")


def _check_regexes(name: str, patterns: list[str]) -> None:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(
                f"setting {name!r}: bad regular expression {pattern!r}: {exc}"
            ) from None


_HOOK_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*[:.][A-Za-z_]\w*")


def _check_hook(name: str, path: str) -> None:
    if path and not _HOOK_PATH.fullmatch(path):
        raise ConfigError(
            f"setting {name!r} must look like 'package.module:function', not {path!r}"
        )


# Checks of a setting's value beyond its type, run whenever a config is built.
_VALIDATORS: dict[str, Callable[[str, Any], None]] = {
    "fields": _check_fields,
    "link_allow": _check_regexes,
    "link_deny": _check_regexes,
    "hook": _check_hook,
}


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
