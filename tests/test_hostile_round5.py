"""Hostile input, round 5, against a real hostile site and the real commands: control
characters in titles reach no exported file raw (CSV escapes them, JSON lines as JSON
escapes), and a redirect to markup leaves no markup in the record's error."""

from __future__ import annotations

import csv
import json

import pytest
from helpers import rqcrawl, seed_local, wait_finished
from servers import HTTPSite, reply

from rqcrawl.workers.runner import LocalWorkers

# ESC ] (window title) ... BEL, ESC c (reset), C1 CSI (U+009B), RLO (U+202E), DEL, LRI (U+2066)
STEERING = "\x1b]0;owned\x07 \x1bc \x9b31m \u202egnp.exe \x7f \u2066x"
TITLE = f"evil {STEERING} end"
CSV_TITLE = "evil \\x1b]0;owned\\x07 \\x1bc \\x9b31m \\u202egnp.exe \\x7f \\u2066x end"
RAW = set("\x1b\x07\x9b\u202e\x7f\u2066")
XSS = "http://[<img src=x onerror=alert('record')>"


def hostile(req) -> None:
    if req.path == "/":
        body = f"<title>{TITLE}</title><h1>{STEERING}</h1><a href=/xss>x</a>"
        reply(req, 200, body.encode(), "text/html; charset=utf-8")
    elif req.path == "/xss":
        reply(req, 302, b"", headers={"Location": XSS})
    else:
        reply(req, 404, b"no")


@pytest.fixture
def crawled(redis_url, tmp_path) -> str:
    """The hostile site crawled as `steer`, its heading extracted as a field."""
    conf = tmp_path / "fields.toml"
    conf.write_text('[crawl.fields]\nheading = { css = "h1::text" }\n')
    with HTTPSite(hostile, host="127.0.0.8", max_requests=40, max_seconds=120) as http:
        seed_local(redis_url, http.base + "/", "steer", 1, "--config", str(conf))
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "steer")
    return http.base


def test_no_control_character_reaches_an_exported_file_raw(redis_url, crawled, tmp_path):
    safe, raw, lines = tmp_path / "safe.csv", tmp_path / "raw.csv", tmp_path / "all.jsonl"
    rqcrawl(redis_url, "export", "steer", "-o", str(safe))
    rqcrawl(redis_url, "export", "steer", "-o", str(raw), "--raw-csv")
    rqcrawl(redis_url, "export", "steer", "-o", str(lines))
    for path in (safe, raw, lines):
        text = path.read_text(encoding="utf-8")
        assert RAW.isdisjoint(text), (path.name, sorted(RAW & set(text)))
    for path in (safe, raw):  # the escapes as text, the rest of the cell as it was
        with open(path, newline="", encoding="utf-8") as fh:
            [page] = [r for r in csv.DictReader(fh) if r["url"] == crawled + "/"]
        assert page["title"] == CSV_TITLE
        assert page["fields.heading"] == CSV_TITLE.removeprefix("evil ").removesuffix(" end")
    # JSON lines: JSON escapes, which decode back to the very title the page had
    page = records(lines)[crawled + "/"]
    assert page["title"] == TITLE and page["fields"]["heading"] == STEERING
    assert "\\u202e" in lines.read_text() and "\\u009b" in lines.read_text()


def records(path) -> dict[str, dict]:
    return {r["url"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_a_redirect_to_markup_leaves_none_in_the_record(redis_url, crawled, tmp_path):
    out = tmp_path / "all.jsonl"
    rqcrawl(redis_url, "export", "steer", "-o", str(out))
    record = records(out)[crawled + "/xss"]
    assert record["reason"] == "bad_redirect"
    error = record["error"]
    assert error.startswith(
        "bad redirect: invalid URL 'http://[%3Cimg src=x onerror=alert(%27record%27)%3E': "
    ), error
    assert not set('<>"&') & set(error), error
    assert "<img" not in rqcrawl(redis_url, "failures", "steer", "--json").stdout
