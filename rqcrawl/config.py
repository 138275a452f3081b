"""A crawl's settings: defaults and validation (their home in Redis is
rqcrawl.frontier.configs).

`conf/default.toml` documents the same defaults; a test keeps the two in step.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rqcrawl.parse import hooks
from rqcrawl.parse.extract import field_problem
from rqcrawl.parse.rendering import AUTO
from rqcrawl.parse.urls import ParamFilter, host_of, param_filter, param_problem
from rqcrawl.redisurl import check_url, masked

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

# Query and path parameters that name a session or an ad campaign, not a page: dropped from
# every URL (`strip_params`). Names compare without case; `*` ends a prefix.
STRIP_PARAMS = [
    # session IDs: Java servlets (also as the path parameter ;jsessionid=), PHP, ASP,
    # ColdFusion, and the generic names
    "jsessionid", "phpsessid", "aspsessionid*", "cfid", "cftoken", "sid", "sessionid",
    "session_id",
    # campaign tracking: Google Analytics and Ads, Facebook, Microsoft, Yandex, TikTok,
    # Twitter, Instagram, Mailchimp, HubSpot, Marketo
    "utm_*", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "_ga", "_gl", "fbclid",
    "msclkid", "yclid", "ttclid", "twclid", "igshid", "mc_cid", "mc_eid", "_hsenc", "_hsmi",
    "mkt_tok",
]  # fmt: skip


class ConfigError(ValueError):
    """A setting has an unknown name, a value of the wrong type or out of its range."""


@dataclass(frozen=True)
class CrawlConfig:
    max_depth: int = 2
    exact_depth: bool = True  # shortest click depth; False: first-found depth
    # Exact depth: records held back while a shorter path may still lower their depth (pages
    # fetched ahead of the settled level); at the bound, and at 0, the level barrier
    max_ahead: int = 20_000
    scope_hosts: list[str] = field(default_factory=list)  # empty: the seeds' hosts
    allow_private: bool = False
    allow_networks: list[str] = field(default_factory=list)  # CIDRs the guard lets through
    user_agent: str = ""  # empty: rqcrawl's own, its version and `contact` (CrawlConfig.agent)
    contact: str = ""  # a URL or an address site owners can reach the operator at
    connect_timeout: float = 5.0
    read_timeout: float = 15.0
    download_timeout: float = 45.0
    http_client: str = "requests"  # a name of rqcrawl.fetch.clients.CLIENTS or "module:Class"
    proxies: list[str] = field(default_factory=list)  # empty: the environment's, if any
    proxy_max_failures: int = 3  # failures in a row that retire a proxy
    proxy_retry_seconds: float = 60.0  # how long a retired proxy rests
    max_body_bytes: int = 5_000_000
    max_redirects: int = 10
    max_url_length: int = 2048
    max_links_per_page: int = 5000  # 0: no limit
    cookies: bool = True  # per crawl and per host, capped
    max_cookies_per_host: int = 20
    max_cookie_bytes_per_host: int = 4096
    bloom_capacity: int = 10_000_000
    bloom_error_rate: float = 0.001
    bloom_max_mb: int = 1024  # refuse a Bloom filter larger than this (MB of bits)
    # auto: RedisBloom's BF.* where every shard has them, else the Lua filter
    # (rqcrawl.frontier.bloom);
    # resolved to native or lua when the crawl is created, so that it never switches
    bloom_filter: str = "auto"
    window: int = 1000
    job_timeout: int = 60
    failure_ttl: int = 7 * 24 * 3600
    failed_job_ttl: int = 24 * 3600  # seconds a failed page's finished RQ job stays listed
    stall_after: float = 60.0  # seconds without an ended URL before `status` looks for why
    job_ttl: int = 600  # seconds the finished RQ job of a page stays listed (rq-dashboard)
    retries: int = 2
    retry_base: float = 2.0
    delay: float = 1.0
    host_concurrency: int = 1
    obey_robots: bool = True
    max_crawl_delay: float = 30.0
    robots_ttl: int = 24 * 3600
    robots_patience: float = 120.0  # seconds a site's pages wait for an unavailable robots.txt
    robots_patience_idle: float = 30.0  # ... once they are all the crawl has left
    # Conduct (docs/howto/politeness.md): meta refresh followed like a redirect; the adaptive
    # throttle (429/503 and Retry-After double the host's delay up to max_backoff_delay,
    # successes halve it back); a delay of delay_factor x the host's smoothed fetch time;
    # Retry-After over max_retry_after fails the URL; the gate keyed by host or by IP.
    follow_meta_refresh: bool = True
    max_meta_refresh_delay: float = 100.0
    adaptive_throttle: bool = True
    max_backoff_delay: float = 120.0
    delay_factor: float = 0.0
    max_retry_after: float = 600.0
    politeness_by: str = "host"
    max_pages: int = 0
    max_pages_per_host: int = 0
    priority_share: float = 0.5  # share of a page's priority its links get (rounded toward 0)
    max_host_share: float = 0.0  # most share of the admitted URLs per host; 0: off
    # Seed sites' sitemaps as a discovery source (rqcrawl.frontier.sitemaps), and their caps
    # per site.
    sitemaps: bool = True
    sitemap_probe: bool = False  # also ask each seed site for /sitemap.xml
    sitemap_urls: list[str] = field(default_factory=list)  # sitemaps to read, beside robots.txt's
    max_sitemaps_per_host: int = 10  # sitemap documents read per seed site (indexes included)
    max_sitemap_urls: int = 50_000  # page URLs taken from one site's sitemaps
    max_sitemap_bytes: int = 10_000_000  # one sitemap's bytes, after gunzip
    max_segment_repeats: int = 3
    max_query_params: int = 20
    # Extraction: {name: {css|xpath = "...", all = bool}}, see extract.field_problem.
    fields: dict[str, dict] = field(default_factory=dict)
    # Page content in the record (rqcrawl.parse.content): any of "text", "markdown", "html".
    content: list[str] = field(default_factory=list)
    content_max_bytes: int = 1_000_000  # a bigger page has no text nor markdown (too_large)
    content_timeout: float = 20.0  # seconds of extraction after which a page's is skipped
    # Link rules (they narrow the scope, never widen it; seeds are not subject to them).
    link_allow: list[str] = field(default_factory=list)  # regexes; empty: allow all
    link_deny: list[str] = field(default_factory=list)  # regexes
    link_allow_domains: list[str] = field(default_factory=list)  # domains and subdomains
    link_deny_domains: list[str] = field(default_factory=list)
    link_deny_extensions: list[str] = field(default_factory=lambda: list(DENIED_EXTENSIONS))
    # Page-level directives (rqcrawl.parse.directives): meta robots, X-Robots-Tag, rel=nofollow.
    obey_page_directives: bool = True
    # Parameters dropped from every URL (seeds, links, sitemaps, canonical): STRIP_PARAMS.
    strip_params: list[str] = field(default_factory=lambda: list(STRIP_PARAMS))
    collapse_slashes: bool = True  # `/a//b` is `/a/b` (false: where repeated slashes matter)
    # A page whose body an earlier URL of its host had is recorded `duplicate_of` it; its
    # links are followed (rqcrawl.frontier.state.Ending).
    detect_duplicates: bool = True
    hook: str = ""  # "package.module:function", called on every fetched HTML page
    # Records not yet delivered (rqcrawl.ops.follow) a crawl's Redis stream may hold: at the
    # bound the crawl releases no new URL until a follower drains it (no record is dropped).
    max_undelivered: int = 100_000
    max_undelivered_bytes: int = 256_000_000  # and bytes of them (records with `content`)
    # Export formats beside the built-in ones (rqcrawl.ops.exporters.registry.BUILTIN):
    # {name: "package.module:Class"}, an Exporter subclass.
    exporters: dict[str, str] = field(default_factory=dict)
    warc_dir: str = ""  # archive responses as WARC files in this directory of each worker
    warc_max_bytes: int = 100_000_000  # a worker starts a new WARC file past this size
    # With warc_dir, what each fetched page loads (stylesheets, scripts, images, fonts; CSS
    # url() and @import) is fetched and archived, not recorded (rqcrawl.frontier.requisites):
    # on the crawl's hosts and `requisite_hosts`, at most max_requisites_per_page per page,
    # each once per crawl, at most max_requisite_bytes each.
    requisites: bool = True
    requisite_hosts: list[str] = field(default_factory=list)  # hosts beyond the scope's
    max_requisites_per_page: int = 200
    max_requisite_bytes: int = 10_000_000
    # Continuous crawling (rqcrawl.frontier.tasks): seconds between two visits of a URL, 0: one
    # pass.
    revisit: float = 0.0
    revisit_min: float = 0.0  # bounds of the adaptive interval; 0: revisit / 4
    revisit_max: float = 0.0  # 0: revisit * 8
    revisit_gone_after: int = 3  # 404/410 visits in a row after which a URL is not revisited
    sitemap_revisit: float = 0.0  # seconds between two reads of a sitemap; 0: `revisit`
    db: str = ""  # SQLAlchemy URL of the task table (set by `seed`/`crawl` with --revisit)
    # One crawl over several Redis servers (rqcrawl.frontier.shards): their URLs, and placement
    # rules {host glob: one of those URLs}. Empty: the crawl lives in the Redis it is seeded in.
    shards: list[str] = field(default_factory=list)
    shard_rules: dict[str, str] = field(default_factory=dict)
    # Rendering pages that only JavaScript builds (rqcrawl.parse.rendering, rqcrawl.render.browser):
    # URL or host patterns rendered by the browser, and/or "auto" (`render = "auto"` is ["auto"]).
    render: list[str] = field(default_factory=list)
    render_timeout: float = 20.0  # seconds a page may take to load and go quiet in the browser
    render_block_media: bool = True  # the browser skips images, fonts, audio and video
    render_dom_warc: bool = True  # with warc_dir, the rendered DOM as a `conversion` record
    render_screenshot_dir: str = ""  # a PNG per rendered page in this directory of the worker
    render_recycle_pages: int = 200  # a render worker restarts its browser after this many pages
    render_recycle_mb: int = 1024  # ... or once the browser's processes use more memory (PSS)

    def for_sitemaps(self) -> CrawlConfig:
        """The schedule of sitemap documents: every `sitemap_revisit` (adapting within
        a quarter to 8 times it, as pages do around `revisit`)."""
        if not self.sitemap_revisit:
            return self
        return replace(self, revisit=self.sitemap_revisit, revisit_min=0.0, revisit_max=0.0)

    def revisit_bounds(self) -> tuple[float, float]:
        """The range of a URL's revisit interval: the settings, or revisit/4 .. revisit*8."""
        low = self.revisit_min or self.revisit / 4
        return low, max(low, self.revisit_max or self.revisit * 8)

    @classmethod
    def from_dict(cls, data: dict[str, Any], base: CrawlConfig | None = None) -> CrawlConfig:
        """Overlay `data` on `base` (or the defaults), rejecting unknown keys, wrong types and
        values out of range: whatever the source (flags, a file, Redis), the same checks."""
        if not isinstance(data, dict):
            raise ConfigError(f"settings must be a table, not {type(data).__name__}")
        known = {f.name: f for f in fields(cls)}
        merged = asdict(base or cls())
        for name, value in data.items():
            if name not in known:
                raise ConfigError(f"unknown setting {name!r}")
            if name in DURATIONS and isinstance(value, str):
                value = parse_duration(name, value)
            if isinstance(value, tuple):  # a repeatable flag's values
                value = list(value)
            if name == "render" and value == AUTO:
                value = [AUTO]
            merged[name] = _checked(name, value, type(merged[name]))
            if name in _VALIDATORS:
                _VALIDATORS[name](name, merged[name])
        config = cls(**merged)
        _check_bloom_size(config)
        _check_revisit_bounds(config)
        _check_shard_rules(config)
        return config

    @classmethod
    def from_toml(cls, path: str | Path, base: CrawlConfig | None = None) -> CrawlConfig:
        import tomllib  # only files need it: a worker reads settings from Redis (JSON)

        try:
            with open(path, "rb") as fh:
                raw = fh.read(MAX_CONFIG_BYTES + 1)
            if len(raw) > MAX_CONFIG_BYTES:
                raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES // 1024} KiB")
            data = tomllib.loads(raw.decode("utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a UTF-8 text file") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from None
        table = data.get("crawl", data)
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: [crawl] must be a table of settings")
        return cls.from_dict(table, base)

    @property
    def url_filter(self) -> ParamFilter:
        """What every URL of the crawl loses: `strip_params`, and repeated slashes."""
        return param_filter(self.strip_params, self.collapse_slashes)

    @property
    def agent(self) -> str:
        """The User-Agent sent: `user_agent`, or rqcrawl's own, naming its version and how
        to reach the operator (`contact`) when one is given, the project's page when not."""
        return self.user_agent or f"rqcrawl/{_VERSION} (+{self.contact or PROJECT_URL})"

    def scoped_to(self, seeds: list[str]) -> CrawlConfig:
        """Without explicit scope_hosts, a crawl stays on its seeds' hosts. Hosts are compared
        with canonical URLs (`seeds` are canonical), so they are lowercased here."""
        hosts = [h.lower() for h in self.scope_hosts] or sorted({host_of(s) for s in seeds})
        return CrawlConfig.from_dict({"scope_hosts": hosts}, self)

    def with_task_table_in(self, directory: str | Path) -> CrawlConfig:
        """A crawl with revisits and no `db` keeps its task table in SQLite in `directory`, by
        absolute path (workers started elsewhere on this machine find the same file)."""
        if not self.revisit or self.db:
            return self
        url = f"sqlite:///{Path(directory).resolve() / 'tasks.db'}"
        return CrawlConfig.from_dict({"db": url}, self)

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


def layered(
    config_file: str | Path | None, flags: dict[str, Any], base: CrawlConfig | None = None
) -> CrawlConfig:
    """`base` (or the defaults) < file < flags (a flag left at None does not override). The
    hook, if any, is imported here so that a bad one is reported before the crawl starts."""
    cfg = CrawlConfig.from_toml(config_file, base) if config_file else base or CrawlConfig()
    cfg = CrawlConfig.from_dict({k: v for k, v in flags.items() if v is not None}, cfg)
    if cfg.shard_rules and not cfg.shards:
        raise ConfigError("setting 'shard_rules' needs 'shards' (--shards)")
    hooks.check(cfg.hook)
    return cfg


def _checked(name: str, value: Any, expected: type) -> Any:
    """`value` if it has the setting's type (an int for a float is converted) and range."""
    typed = _typed(name, value, expected)
    if name in _BOUNDS:
        _BOUNDS[name].check(name, value)  # the error shows the value as given
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


def _check_bloom_size(config: CrawlConfig) -> None:
    """bloom_capacity and bloom_error_rate together decide the filter's size, which Redis
    allocates whole: cap it, so that a typo costs an error instead of the server's memory."""
    bits, _ = optimal_size(config.bloom_capacity, config.bloom_error_rate)
    size_mb = math.ceil(bits / 8 / 2**20)
    if size_mb > config.bloom_max_mb:
        raise ConfigError(
            f"a Bloom filter of bloom_capacity {config.bloom_capacity} at bloom_error_rate "
            f"{config.bloom_error_rate} needs {size_mb} MB, over bloom_max_mb "
            f"{config.bloom_max_mb}: lower bloom_capacity or raise bloom_max_mb in --config"
        )


def _check_bloom_filter(name: str, value: str) -> None:
    if value not in BLOOM_FILTERS:
        raise ConfigError(f"setting {name!r} must be one of {', '.join(BLOOM_FILTERS)}")


POLITENESS_KEYS = ("host", "ip")


def _check_politeness_by(name: str, value: str) -> None:
    if value not in POLITENESS_KEYS:
        raise ConfigError(f"setting {name!r} must be one of {', '.join(POLITENESS_KEYS)}")


def _check_revisit_bounds(config: CrawlConfig) -> None:
    if config.revisit_min and config.revisit_max and config.revisit_min > config.revisit_max:
        raise ConfigError(
            f"setting 'revisit_min' ({config.revisit_min:g}) must not exceed 'revisit_max' "
            f"({config.revisit_max:g})"
        )


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


def _check_shard_rules(config: CrawlConfig) -> None:
    """Every rule sends a host glob to one of the crawl's shards."""
    if not config.shards:  # a file of rules may come before the --shards flag: see layered
        return
    for pattern, url in config.shard_rules.items():
        if not isinstance(url, str) or not pattern:
            raise ConfigError("setting 'shard_rules' maps host patterns to shard URLs")
        if url not in config.shards:
            raise ConfigError(
                f"setting 'shard_rules': {pattern!r} goes to {masked(url, url)!r}, "
                "which is not one of 'shards'"
            )


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


PROJECT_URL = "https://pypi.org/project/rqcrawl/"
_VERSION = version("rqcrawl")
MAX_CONFIG_BYTES = 1024 * 1024  # a settings file is a few KB; /dev/zero is not one


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
_BOUNDS: dict[str, Bounds] = {
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
