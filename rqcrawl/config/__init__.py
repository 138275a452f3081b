"""A crawl's settings: the model and its defaults (`model`), and the checks every setting
passes whatever its source (`checks`). Their home in Redis is rqcrawl.frontier.configs."""

from rqcrawl.config.checks import (
    BLOOM_FILTERS,
    BOUNDS,
    DURATIONS,
    HTTP_CLIENTS,
    ConfigError,
    check_writable_dir,
    optimal_size,
    parse_duration,
)
from rqcrawl.config.model import DENIED_EXTENSIONS, STRIP_PARAMS, CrawlConfig, layered, toml_value

__all__ = [
    "BLOOM_FILTERS", "BOUNDS", "DURATIONS", "HTTP_CLIENTS", "ConfigError", "check_writable_dir",
    "optimal_size", "parse_duration", "DENIED_EXTENSIONS", "STRIP_PARAMS", "CrawlConfig",
    "layered", "toml_value",
]  # fmt: skip
