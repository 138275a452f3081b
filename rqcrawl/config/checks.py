"""The checks of every setting, whatever its source (flags, a file, Redis): its type, its
range (BOUNDS) and its own validator (a database URL, a regex, a proxy, a hook path...)."""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rqcrawl.parse.extract import field_problem
from rqcrawl.parse.urls import param_problem
from rqcrawl.redisurl import check_url, masked


class ConfigError(ValueError):
    """A setting has an unknown name, a value of the wrong type or out of its range."""


def checked_setting(name: str, value: Any, expected: type) -> Any:
    """`value` as setting `name`: of its type and range (_checked), and passing the setting's
    own validator if it has one."""
    value = _checked(name, value, expected)
    if name in _VALIDATORS:
        _VALIDATORS[name](name, value)
    return value


def _checked(name: str, value: Any, expected: type) -> Any:
    """`value` if it has the setting's type (an int for a float is converted) and range."""
    typed = _typed(name, value, expected)
    if name in BOUNDS:
        BOUNDS[name].check(name, value)  # the error shows the value as given
    return typed


def _typed(name: str, value: Any, expected: type) -> Any:
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


# Settings in seconds that also accept a duration string.
DURATIONS = ("revisit", "revisit_min", "revisit_max", "sitemap_revisit")
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(name: str, text: str) -> float:
    """`30s`, `10m`, `12h`, `7d` or plain seconds, as seconds."""
    match = _DURATION.fullmatch(text.lower())
    if not match:
        raise ConfigError(
            f"setting {name!r} must be a duration such as 30s, 10m, 12h, 7d or seconds, "
            f"not {text!r}"
        )
    return float(match[1]) * _UNIT_SECONDS[match[2]]


def _check_db(name: str, url: str) -> None:
    """The task table's SQLAlchemy URL, checked before the crawl starts."""
    if not url:
        return
    from sqlalchemy.engine import make_url  # only crawls with a task table need SQLAlchemy
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)  # a port that is not a number: ValueError
        parsed.get_dialect()  # an unknown dialect: ArgumentError
        if parsed.port is not None and not 0 < parsed.port < 65536:
            raise ValueError(f"port {parsed.port} out of range")
    except (ArgumentError, ValueError) as exc:
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"setting {name!r} is not a database URL (dialect://...): {problem}"
        ) from None


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


def _check_networks(name: str, cidrs: list[str]) -> None:
    for cidr in cidrs:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError as exc:
            raise ConfigError(f"setting {name!r}: {exc}") from None


PROXY_SCHEMES = ("http", "https", "socks4", "socks5", "socks5h")


def _check_proxies(name: str, urls: list[str]) -> None:
    for url in urls:
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError as exc:
            raise ConfigError(f"setting {name!r}: {masked(url, url)!r}: {exc}") from None
        if parts.scheme not in PROXY_SCHEMES or not parts.hostname:
            raise ConfigError(
                f"setting {name!r}: {masked(url, url)!r} is not a proxy URL "
                f"({', '.join(PROXY_SCHEMES)}://host:port)"
            )


HTTP_CLIENTS = ("requests", "httpx")  # rqcrawl.fetch.clients.CLIENTS (a test keeps them equal)


def _check_http_client(name: str, value: str) -> None:
    if value not in HTTP_CLIENTS and not _HOOK_PATH.fullmatch(value):
        raise ConfigError(
            f"setting {name!r}: {value!r} is not one of {', '.join(HTTP_CLIENTS)} "
            "nor a 'package.module:Class' path"
        )


def _check_params(name: str, patterns: list[str]) -> None:
    for pattern in patterns:
        problem = param_problem(pattern)
        if problem:
            raise ConfigError(f"setting {name!r}: {pattern!r} {problem}")


def _check_header(name: str, value: str) -> None:
    """Sent as an HTTP header: a control character would end it or inject another, and
    only Latin-1 can be sent (http.client encodes header values so)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ConfigError(f"setting {name!r} must not contain a control character")
    if not value.isascii():
        raise ConfigError(f"setting {name!r} must be ASCII (an HTTP header), not {value!r}")


def optimal_size(capacity: int, error_rate: float) -> tuple[int, int]:
    """(bits, hashes) of the optimal Bloom filter for `capacity` items at `error_rate`: what
    the bloom settings cost, checked here and allocated by rqcrawl.frontier.bloom."""
    if capacity < 1 or not 0 < error_rate < 1:
        raise ValueError("capacity must be >= 1 and error_rate between 0 and 1")
    bits = math.ceil(-capacity * math.log(error_rate) / math.log(2) ** 2)
    hashes = max(1, round(bits / capacity * math.log(2)))
    return bits, hashes


def _check_bloom_filter(name: str, value: str) -> None:
    if value not in BLOOM_FILTERS:
        raise ConfigError(f"setting {name!r} must be one of {', '.join(BLOOM_FILTERS)}")


POLITENESS_KEYS = ("host", "ip")


def _check_politeness_by(name: str, value: str) -> None:
    if value not in POLITENESS_KEYS:
        raise ConfigError(f"setting {name!r} must be one of {', '.join(POLITENESS_KEYS)}")


def _check_shards(name: str, urls: list[str]) -> None:
    for url in urls:
        try:
            check_url(url)
        except ValueError as exc:
            raise ConfigError(
                f"setting {name!r}: bad Redis URL {masked(url, url)!r}: {exc}"
            ) from None
    duplicate = next((u for i, u in enumerate(urls) if u in urls[:i]), None)
    if duplicate is not None:
        raise ConfigError(f"setting {name!r}: {masked(duplicate, duplicate)!r} is listed twice")


_HOOK_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*[:.][A-Za-z_]\w*")


def _check_render(name: str, patterns: list[str]) -> None:
    if any(not p.strip() for p in patterns):
        raise ConfigError(f"setting {name!r}: empty pattern")


def _check_content(name: str, kinds: list[str]) -> None:
    unknown = sorted(set(kinds) - {"text", "markdown", "html"})
    if unknown:
        raise ConfigError(f"setting {name!r}: unknown {unknown[0]!r} (use text, markdown, html)")


def _check_hook(name: str, path: str) -> None:
    if path and not _HOOK_PATH.fullmatch(path):
        raise ConfigError(
            f"setting {name!r} must look like 'package.module:function', not {path!r}"
        )


def _check_exporters(name: str, exporters: dict) -> None:
    """Each added format names its class as "package.module:Class" (loaded when used)."""
    for fmt, path in exporters.items():
        if not (isinstance(path, str) and re.fullmatch(r"[\w.]+:\w+", path)):
            raise ConfigError(
                f"setting {name!r}: format {fmt!r} must name 'package.module:Class', not {path!r}"
            )


# Checks of a setting's value beyond its type, run whenever a config is built.
_VALIDATORS: dict[str, Callable[[str, Any], None]] = {
    "fields": _check_fields,
    "link_allow": _check_regexes,
    "link_deny": _check_regexes,
    "hook": _check_hook,
    "content": _check_content,
    "user_agent": _check_header,
    "contact": _check_header,
    "allow_networks": _check_networks,
    "proxies": _check_proxies,
    "http_client": _check_http_client,
    "db": _check_db,
    "shards": _check_shards,
    "bloom_filter": _check_bloom_filter,
    "strip_params": _check_params,
    "politeness_by": _check_politeness_by,
    "render": _check_render,
    "exporters": _check_exporters,
}
BLOOM_FILTERS = ("auto", "native", "lua")

LUA_EXACT = 2**53  # the largest integer a Lua number (a double) holds exactly
DAY = 86_400.0


@dataclass(frozen=True)
class Bounds:
    """The valid range of a numeric setting (every number must also be finite)."""

    low: float
    high: float = LUA_EXACT
    low_open: bool = False  # the value must be > low rather than >= low
    high_open: bool = False  # < high rather than <= high

    def check(self, name: str, value: float) -> None:
        if isinstance(value, int) and value.bit_length() > 1000:  # no float holds it
            raise ConfigError(
                f"setting {name!r} must be {self.describe()}, not a number of "
                f"{len(str(abs(value)))} digits"
            )
        if not math.isfinite(value):
            raise ConfigError(f"setting {name!r} must be a finite number, not {value}")
        low_ok = value > self.low if self.low_open else value >= self.low
        high_ok = value < self.high if self.high_open else value <= self.high
        if not (low_ok and high_ok):
            raise ConfigError(f"setting {name!r} must be {self.describe()}, not {value}")

    def describe(self) -> str:
        low = f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.high == LUA_EXACT:
            return low
        return f"{low} and {'<' if self.high_open else '<='} {self.high:g}"


# The range of every numeric setting, checked for flags, files and stored configs alike.
# A new numeric setting needs its line here (a test checks that none is missing).
BOUNDS: dict[str, Bounds] = {
    "max_depth": Bounds(0),
    "max_ahead": Bounds(0),
    "connect_timeout": Bounds(0, DAY, low_open=True),
    "read_timeout": Bounds(0, DAY, low_open=True),
    "download_timeout": Bounds(0, DAY, low_open=True),
    "proxy_max_failures": Bounds(1),
    "proxy_retry_seconds": Bounds(0, DAY),
    "max_body_bytes": Bounds(1),
    "max_redirects": Bounds(0),
    "max_url_length": Bounds(1),
    "max_links_per_page": Bounds(0),
    "max_cookies_per_host": Bounds(1, 1000),
    "max_cookie_bytes_per_host": Bounds(64, 65536),
    "bloom_capacity": Bounds(1),
    "bloom_error_rate": Bounds(0, 1, low_open=True, high_open=True),
    "bloom_max_mb": Bounds(1),
    "window": Bounds(1),
    "max_undelivered": Bounds(1),
    "max_undelivered_bytes": Bounds(1),
    "job_timeout": Bounds(1, DAY),
    "failure_ttl": Bounds(1),
    "failed_job_ttl": Bounds(1),
    "stall_after": Bounds(0, DAY, low_open=True),
    "job_ttl": Bounds(1, DAY),
    "retries": Bounds(0),
    "retry_base": Bounds(0, DAY),
    "delay": Bounds(0, DAY),
    "host_concurrency": Bounds(1),
    "max_crawl_delay": Bounds(0, DAY),
    "robots_ttl": Bounds(1),
    "robots_patience": Bounds(0, DAY),
    "robots_patience_idle": Bounds(0, DAY),
    "max_meta_refresh_delay": Bounds(0, DAY),
    "max_backoff_delay": Bounds(0, DAY),
    "delay_factor": Bounds(0, 100),
    "max_retry_after": Bounds(0, DAY),
    "max_pages": Bounds(0),
    "max_pages_per_host": Bounds(0),
    "max_host_share": Bounds(0, 1),
    "max_sitemaps_per_host": Bounds(1),
    "max_sitemap_urls": Bounds(0),
    "max_sitemap_bytes": Bounds(1),
    "priority_share": Bounds(0, 1),
    "max_segment_repeats": Bounds(1),
    "max_query_params": Bounds(0),
    "warc_max_bytes": Bounds(1),
    "max_requisites_per_page": Bounds(0),
    "max_requisite_bytes": Bounds(1),
    "content_max_bytes": Bounds(1),
    "content_timeout": Bounds(0, DAY, low_open=True),
    "revisit": Bounds(0),
    "sitemap_revisit": Bounds(0),
    "revisit_min": Bounds(0),
    "revisit_max": Bounds(0),
    "revisit_gone_after": Bounds(1),
    "render_timeout": Bounds(0, DAY, low_open=True),
    "render_recycle_pages": Bounds(1),
    "render_recycle_mb": Bounds(64),
}


def check_writable_dir(path: str) -> None:
    """A directory this machine's workers will write to (warc_dir of `rqcrawl crawl`): created
    if missing, and refused in one line if that fails or it is not writable."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create {path}: {exc.strerror}") from None
    if not os.access(path, os.W_OK):
        raise ConfigError(f"cannot write to {path}")
