"""The settings model: CrawlConfig, its defaults, how it is layered (defaults < TOML file <
flags) and written back (JSON, TOML). Its home in Redis is rqcrawl.frontier.configs.

`conf/default.toml` documents the same defaults; a test keeps the two in step.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, fields, replace
from importlib.metadata import version
from pathlib import Path
from typing import Any

from rqcrawl.config.checks import (
    DURATIONS,
    ConfigError,
    checked_setting,
    optimal_size,
    parse_duration,
)
from rqcrawl.parse import hooks
from rqcrawl.parse.rendering import AUTO
from rqcrawl.parse.urls import ParamFilter, host_of, param_filter
from rqcrawl.redisurl import masked

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
    # links are followed (rqcrawl.frontier.messages.Ending).
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
            merged[name] = checked_setting(name, value, type(merged[name]))
        config = cls(**merged)
        check_together(config)
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
        lines = [f"{name} = {toml_value(value)}" for name, value in asdict(self).items()]
        return "\n".join(["[crawl]", *lines])


def toml_value(value: Any) -> str:
    """A setting's value in TOML: tables inline, and JSON for the rest (a JSON string, number,
    boolean or array of strings is also valid TOML)."""
    if isinstance(value, dict):
        items = ", ".join(f"{_toml_key(k)} = {toml_value(v)}" for k, v in value.items())
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


PROJECT_URL = "https://pypi.org/project/rqcrawl/"
_VERSION = version("rqcrawl")
MAX_CONFIG_BYTES = 1024 * 1024  # a settings file is a few KB; /dev/zero is not one


def check_together(config: CrawlConfig) -> None:
    """The checks of settings that only make sense together (rqcrawl.config.checks has
    those of each setting)."""
    _check_bloom_size(config)
    _check_revisit_bounds(config)
    _check_shard_rules(config)


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


def _check_revisit_bounds(config: CrawlConfig) -> None:
    if config.revisit_min and config.revisit_max and config.revisit_min > config.revisit_max:
        raise ConfigError(
            f"setting 'revisit_min' ({config.revisit_min:g}) must not exceed 'revisit_max' "
            f"({config.revisit_max:g})"
        )


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
