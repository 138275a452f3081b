"""Crawl settings: validation of dicts and TOML files."""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import asdict, fields

import pytest
from helpers import CONF

from rqcrawl import config
from rqcrawl.config import ConfigError, CrawlConfig

# --- from_dict ------------------------------------------------------------------------------


def test_empty_dict_gives_the_defaults():
    assert CrawlConfig.from_dict({}) == CrawlConfig()


def test_known_keys_override_defaults():
    config = CrawlConfig.from_dict(
        {
            "max_depth": 5,
            "scope_hosts": ["example.com"],
            "allow_private": True,
            "user_agent": "test-agent",
            "read_timeout": 2.5,
        }
    )
    assert config.max_depth == 5
    assert config.scope_hosts == ["example.com"]
    assert config.allow_private is True
    assert config.user_agent == "test-agent"
    assert config.read_timeout == 2.5
    # Untouched settings keep their defaults.
    assert config.window == CrawlConfig().window
    assert config.connect_timeout == CrawlConfig().connect_timeout


def test_from_dict_overlays_on_a_base():
    base = CrawlConfig.from_dict({"max_depth": 7, "retries": 5})
    config = CrawlConfig.from_dict({"retries": 1}, base)
    assert config.max_depth == 7
    assert config.retries == 1
    assert base.retries == 5


@pytest.mark.parametrize("key", ["max_dept", "MaxDepth", "bloom_size", ""])
def test_unknown_key_is_rejected_naming_the_key(key):
    with pytest.raises(ConfigError) as info:
        CrawlConfig.from_dict({"max_depth": 3, key: 1})
    assert repr(key) in str(info.value)
    assert "unknown" in str(info.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_depth", "3"),
        ("max_depth", 3.0),
        ("max_depth", True),
        ("max_depth", None),
        ("allow_private", 1),
        ("allow_private", "yes"),
        ("user_agent", 42),
        ("connect_timeout", "5"),
        ("connect_timeout", True),
        ("bloom_error_rate", "0.01"),
        ("window", [1000]),
        ("scope_hosts", "example.com"),
        ("scope_hosts", ["example.com", 8080]),
        ("scope_hosts", {"example.com": True}),
    ],
)
def test_wrong_type_is_rejected_naming_the_key(key, value):
    with pytest.raises(ConfigError) as info:
        CrawlConfig.from_dict({key: value})
    assert repr(key) in str(info.value)


def test_wrong_type_message_names_the_types():
    with pytest.raises(ConfigError) as info:
        CrawlConfig.from_dict({"max_depth": "3"})
    message = str(info.value)
    assert "'max_depth'" in message
    assert "int" in message
    assert "str" in message


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


@pytest.mark.parametrize(
    "key", ["connect_timeout", "read_timeout", "download_timeout", "delay", "retry_base"]
)
def test_int_is_accepted_for_float(key):
    config = CrawlConfig.from_dict({key: 3})
    value = getattr(config, key)
    assert value == 3.0
    assert type(value) is float


def test_every_float_setting_accepts_an_int():
    floats = [f.name for f in fields(CrawlConfig) if type(getattr(CrawlConfig(), f.name)) is float]
    assert floats  # the defaults do have float settings
    # (bloom_error_rate has no int in its range)
    config = CrawlConfig.from_dict({name: 1 for name in floats if name != "bloom_error_rate"})
    assert all(type(getattr(config, name)) is float for name in floats)


def test_empty_scope_hosts_is_accepted():
    assert CrawlConfig.from_dict({"scope_hosts": []}).scope_hosts == []


def test_config_round_trips_through_json():
    config = CrawlConfig.from_dict(
        {"max_depth": 4, "scope_hosts": ["a.example", "b.example"], "retry_base": 1.5}
    )
    assert CrawlConfig.from_dict(json.loads(config.to_json())) == config


# --- from_toml ------------------------------------------------------------------------------


def test_from_toml_reads_a_crawl_table(tmp_path):
    path = tmp_path / "crawl.toml"
    path.write_text(
        "[crawl]\n"
        "max_depth = 4\n"
        'scope_hosts = ["example.com", "127.0.0.1:8000"]\n'
        "read_timeout = 30\n"
        "bloom_error_rate = 0.0001\n"
        "allow_private = true\n"
    )
    config = CrawlConfig.from_toml(path)
    assert config == CrawlConfig.from_dict(
        {
            "max_depth": 4,
            "scope_hosts": ["example.com", "127.0.0.1:8000"],
            "read_timeout": 30.0,
            "bloom_error_rate": 0.0001,
            "allow_private": True,
        }
    )
    assert type(config.read_timeout) is float


def test_from_toml_reads_top_level_settings(tmp_path):
    path = tmp_path / "crawl.toml"
    path.write_text('max_depth = 1\nuser_agent = "bot/1.0"\n')
    config = CrawlConfig.from_toml(str(path))
    assert config.max_depth == 1
    assert config.user_agent == "bot/1.0"


def test_from_toml_overlays_on_a_base(tmp_path):
    path = tmp_path / "crawl.toml"
    path.write_text("[crawl]\nretries = 0\n")
    base = CrawlConfig.from_dict({"max_depth": 9})
    config = CrawlConfig.from_toml(path, base)
    assert (config.max_depth, config.retries) == (9, 0)


def test_from_toml_rejects_unknown_key(tmp_path):
    path = tmp_path / "crawl.toml"
    path.write_text("[crawl]\nmax_depht = 3\n")
    with pytest.raises(ConfigError, match="'max_depht'"):
        CrawlConfig.from_toml(path)


def test_from_toml_rejects_wrong_type(tmp_path):
    path = tmp_path / "crawl.toml"
    path.write_text('[crawl]\nwindow = "100"\n')
    with pytest.raises(ConfigError, match="'window'"):
        CrawlConfig.from_toml(path)


def test_from_toml_missing_file(tmp_path):
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError) as info:
        CrawlConfig.from_toml(path)
    assert str(path) in str(info.value)


def test_from_toml_invalid_toml(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[crawl\nmax_depth = = 3\n")
    with pytest.raises(ConfigError) as info:
        CrawlConfig.from_toml(path)
    assert str(path) in str(info.value)


# --- conf/default.toml ----------------------------------------------------------------------

DEFAULT_TOML = CONF / "default.toml"


def test_default_toml_equals_the_built_in_defaults():
    assert CrawlConfig.from_toml(DEFAULT_TOML) == CrawlConfig()


def test_default_toml_documents_every_setting():
    with open(DEFAULT_TOML, "rb") as fh:
        data = tomllib.load(fh)
    assert set(data["crawl"]) == {f.name for f in fields(CrawlConfig)}


# --- extraction, link rules, hook, WARC -----------------------------------------------------


def test_fields_table_from_toml(tmp_path):
    path = tmp_path / "crawl.toml"
    path.write_text(
        "[crawl.fields]\n"
        'heading = { css = "h1::text" }\n'
        'images = { xpath = "//img/@src", all = true }\n'
    )
    config = CrawlConfig.from_toml(path)
    assert config.fields == {
        "heading": {"css": "h1::text"},
        "images": {"xpath": "//img/@src", "all": True},
    }
    assert CrawlConfig.from_dict(json.loads(config.to_json())) == config


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("h1::text", "must be a table"),
        ({}, "exactly one of css or xpath"),
        ({"css": "h1", "xpath": "//h1"}, "exactly one of css or xpath"),
        ({"css": 1}, "css must be a string"),
        ({"css": "h1", "all": "yes"}, "all must be true or false"),
        ({"css": "h1", "first": True}, "unknown key 'first'"),
        ({"css": "h1::txt"}, "invalid css selector 'h1::txt'"),
        ({"css": "h1["}, "invalid css selector"),
        ({"xpath": "//h1["}, "invalid xpath selector '//h1['"),
        ({"xpath": "foo(1)"}, "invalid xpath selector"),
    ],
)
def test_bad_field_is_rejected_in_one_line_naming_it(spec, problem):
    with pytest.raises(ConfigError) as info:
        CrawlConfig.from_dict({"fields": {"heading": spec}})
    message = str(info.value)
    assert "'fields.heading'" in message
    assert problem in message
    assert "\n" not in message


def test_fields_must_be_a_table():
    with pytest.raises(ConfigError, match="'fields' must be a table"):
        CrawlConfig.from_dict({"fields": ["h1"]})


@pytest.mark.parametrize("key", ["link_allow", "link_deny"])
def test_bad_regex_is_rejected_naming_the_setting(key):
    with pytest.raises(ConfigError) as info:
        CrawlConfig.from_dict({key: ["ok", "/docs/(unclosed"]})
    assert repr(key) in str(info.value)
    assert "'/docs/(unclosed'" in str(info.value)


@pytest.mark.parametrize("path", ["mod:func", "pkg.mod:func", "pkg.mod.func", ""])
def test_hook_path_forms(path):
    assert CrawlConfig.from_dict({"hook": path}).hook == path


@pytest.mark.parametrize("path", ["func", "mod:", ":func", "pkg mod:f", "mod:f:g", "1mod:f"])
def test_bad_hook_path_is_rejected(path):
    with pytest.raises(ConfigError, match="'hook'"):
        CrawlConfig.from_dict({"hook": path})


def test_default_denied_extensions_are_a_copy():
    a, b = CrawlConfig(), CrawlConfig()
    assert "pdf" in a.link_deny_extensions
    assert a.link_deny_extensions is not b.link_deny_extensions


# --- ranges -----------------------------------------------------------------------------------

NUMERIC = [f.name for f in fields(CrawlConfig) if f.type in ("int", "float")]


def test_every_numeric_setting_declares_its_range():
    assert len(NUMERIC) > 20
    assert sorted(NUMERIC) == sorted(config.BOUNDS)


def test_the_defaults_are_in_range():
    assert CrawlConfig.from_dict(asdict(CrawlConfig())) == CrawlConfig()


@pytest.mark.parametrize("key", [n for n in NUMERIC if type(getattr(CrawlConfig(), n)) is float])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_rejected(key, value):
    with pytest.raises(ConfigError, match=f"'{key}' must be a finite number"):
        CrawlConfig.from_dict({key: value})


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("bloom_capacity", 0, ">= 1"),
        ("bloom_error_rate", 0.0, "> 0 and < 1"),
        ("bloom_error_rate", 1, "> 0 and < 1"),
        ("window", 0, ">= 1"),
        ("host_concurrency", 0, ">= 1"),
        ("delay", -0.5, ">= 0 and <= 86400"),
        ("delay", 1e9, ">= 0 and <= 86400"),
        ("connect_timeout", 0, "> 0 and <= 86400"),
        ("max_body_bytes", 0, ">= 1"),
        ("max_pages", -1, ">= 0"),
        ("max_pages", 2**60, ">= 0"),
        ("max_cookies_per_host", 0, ">= 1 and <= 1000"),
        ("max_cookie_bytes_per_host", 10**6, ">= 64 and <= 65536"),
    ],
)
def test_out_of_range_is_rejected_with_the_rule(key, value, rule):
    with pytest.raises(ConfigError) as info:
        CrawlConfig.from_dict({key: value})
    assert str(info.value) == f"setting {key!r} must be {rule}, not {value}"


def test_range_edges_are_accepted():
    cfg = CrawlConfig.from_dict(
        {"max_depth": 0, "delay": 0, "retries": 0, "bloom_error_rate": 0.5, "window": 1}
    )
    assert cfg.delay == 0.0 and cfg.window == 1


def test_bloom_filter_size_is_capped_and_the_cap_can_be_raised():
    with pytest.raises(ConfigError) as info:
        CrawlConfig.from_dict({"bloom_capacity": 10**11})
    message = str(info.value)
    assert "needs 171395 MB" in message and "raise bloom_max_mb" in message
    # Near the cap: 600 million URLs at 0.001 fit in 1024 MB, 700 million do not.
    assert CrawlConfig.from_dict({"bloom_capacity": 590_000_000}).bloom_max_mb == 1024
    with pytest.raises(ConfigError, match="bloom_max_mb"):
        CrawlConfig.from_dict({"bloom_capacity": 700_000_000})
    big = CrawlConfig.from_dict({"bloom_capacity": 700_000_000, "bloom_max_mb": 2048})
    assert big.bloom_capacity == 700_000_000
    with pytest.raises(ConfigError, match="bloom_max_mb"):  # the error rate counts too
        CrawlConfig.from_dict({"bloom_capacity": 590_000_000, "bloom_error_rate": 0.0001})


def test_settings_must_be_a_table():
    with pytest.raises(ConfigError, match="must be a table"):
        CrawlConfig.from_dict(5)


def test_toml_crawl_that_is_not_a_table(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("crawl = 5\n")
    with pytest.raises(ConfigError, match=r"\[crawl\] must be a table"):
        CrawlConfig.from_toml(path)


def test_toml_that_is_not_utf8(tmp_path):
    path = tmp_path / "c.toml"
    path.write_bytes(b'user_agent = "caf\xe9"\n')
    with pytest.raises(ConfigError, match="not a UTF-8 text file"):
        CrawlConfig.from_toml(path)


@pytest.mark.parametrize("agent", ["a\r\nX-Evil: 1", "a\nb", "tab\there", "del\x7f"])
def test_user_agent_with_a_control_character_is_rejected(agent):
    with pytest.raises(ConfigError, match="control character"):
        CrawlConfig.from_dict({"user_agent": agent})


def test_layered_is_defaults_then_file_then_flags(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[crawl]\nmax_depth = 4\ndelay = 2.0\n")
    cfg = config.layered(path, {"delay": 0.5, "retries": None})
    assert (cfg.max_depth, cfg.delay, cfg.retries) == (4, 0.5, CrawlConfig().retries)
    with pytest.raises(ConfigError, match="'delay' must be a finite number"):
        config.layered(path, {"delay": math.nan})


def test_allow_networks_must_be_networks():
    assert CrawlConfig.from_dict({"allow_networks": ["10.0.0.0/8", "::1"]}).allow_networks
    with pytest.raises(ConfigError, match="'allow_networks'.*10.0.0.0/33"):
        CrawlConfig.from_dict({"allow_networks": ["10.0.0.0/33"]})


# --- revisits ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "seconds"),
    [("30s", 30), ("10m", 600), ("12h", 43200), ("7d", 604800), ("90", 90), ("1.5h", 5400),
     (45, 45), (2.5, 2.5)],
)  # fmt: skip
def test_revisit_durations_from_flags_and_files(given, seconds, tmp_path):
    assert CrawlConfig.from_dict({"revisit": given}).revisit == seconds
    toml = tmp_path / "c.toml"
    toml.write_text(f"[crawl]\nrevisit_max = {json.dumps(given)}\n")
    assert CrawlConfig.from_toml(toml).revisit_max == seconds


@pytest.mark.parametrize("bad", ["soon", "10 minutes", "-5s", "1w", ""])
def test_a_bad_duration_is_one_line_naming_the_setting(bad):
    with pytest.raises(ConfigError, match="^setting 'revisit' must be a duration such as 30s"):
        CrawlConfig.from_dict({"revisit": bad})


def test_revisit_bounds_and_gone_after_are_checked():
    with pytest.raises(ConfigError, match="'revisit_min' \\(60\\) must not exceed 'revisit_max'"):
        CrawlConfig.from_dict({"revisit": 10, "revisit_min": "1m", "revisit_max": 30})
    with pytest.raises(ConfigError, match="'revisit_gone_after' must be >= 1"):
        CrawlConfig.from_dict({"revisit_gone_after": 0})
    cfg = CrawlConfig.from_dict({"revisit": "1h", "revisit_min": "2h"})
    assert cfg.revisit_bounds() == (7200, 28800)


def test_db_must_be_a_database_url_and_the_error_does_not_show_it():
    assert CrawlConfig.from_dict({"db": "postgresql://u:pw@h/db"}).db == "postgresql://u:pw@h/db"
    with pytest.raises(ConfigError) as info:
        CrawlConfig.from_dict({"db": "not a url :secret"})
    assert "secret" not in str(info.value) and "'db'" in str(info.value)
