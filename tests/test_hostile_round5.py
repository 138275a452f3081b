"""Hostile input, round 5, against a real hostile site and the real commands: control
characters in titles reach no exported file raw (CSV escapes them, JSON lines as JSON
escapes), a redirect to markup leaves no markup in the record's error, and a records file
(`--records FILE`) that is malformed on purpose is one line naming its line, as is a class
named by the settings (`http_client`, `exporters`) that does not load, when seeding."""

from __future__ import annotations

import csv
import json
import subprocess
import zipfile

import pytest
from helpers import BIN, env_with, rqcrawl, seed_local, wait_finished
from servers import HTTPSite, reply
from test_cli import assert_one_line_error

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
        seed_local(redis_url, http.base + "/", "steer", 1, "--config", str(conf), "--warc",
                   str(tmp_path / "warc"))  # fmt: skip
        with LocalWorkers(redis_url, 1):
            wait_finished(redis_url, "steer")
    return http.base


def test_no_control_character_reaches_an_exported_file_raw(redis_url, crawled, tmp_path):
    safe, raw, lines = tmp_path / "safe.csv", tmp_path / "raw.csv", tmp_path / "all.jsonl"
    rqcrawl(redis_url, "export", "steer", "-o", str(safe))
    rqcrawl(redis_url, "export", "steer", "-o", str(raw), "--raw-csv")
    rqcrawl(redis_url, "export", "steer", "-o", str(tmp_path / "steer.wacz"))
    rqcrawl(redis_url, "export", "steer", "-o", str(lines))
    with zipfile.ZipFile(tmp_path / "steer.wacz") as wacz:
        (tmp_path / "pages.jsonl").write_bytes(wacz.read("pages/pages.jsonl"))
    for path in (safe, raw, lines, tmp_path / "pages.jsonl"):
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


RECORD = {"url": "http://a.test/", "outcome": "failed", "reason": "dns", "status": None,
          "error": "dns: no such host", "attempts": 3}  # fmt: skip


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("[" * 100_000, "line 2 is not a record (nested too deeply)"),
        ("{" * 100_000, "line 2 is not"),
        (json.dumps({**RECORD, "outcome": ["failed"]}), "line 2 has no 'outcome' (text)"),
        (json.dumps({"outcome": "failed"}), "line 2 has no 'url' (text)"),
        (json.dumps({**RECORD, "reason": 7}), "line 2 field 'reason' is an integer, not text"),
        (json.dumps({**RECORD, "status": "500"}), "line 2 field 'status' is text, not an integer"),
        (json.dumps({**RECORD, "content": "text"}), "line 2 field 'content' is text, not an obj"),
        (json.dumps({**RECORD, "content": {"text": 1}}), "line 2 field 'content' holds a value"),
        (json.dumps({**RECORD, "final_url": ["x"]}), "line 2 field 'final_url' is a list"),
        ("[1, 2]", "line 2 is not a record (a JSON object)"),
        ('{"url": ', "line 2 is not JSON"),
    ],
)
def test_a_malformed_records_file_is_one_line_naming_the_line(redis_url, tmp_path, line, said):
    rqcrawl(redis_url, "seed", "http://a.test/", "--crawl", "rec")
    given = tmp_path / "records.jsonl"
    given.write_text(json.dumps(RECORD) + "\n" + line + "\n", encoding="utf-8")
    proc = rqcrawl(redis_url, "failures", "rec", "--records", str(given), check=False)
    assert_one_line_error(proc, str(given), said)


def test_a_records_file_with_fields_missing_is_read(redis_url, tmp_path):
    """A record read back needs its url and outcome; the other fields default to None."""
    rqcrawl(redis_url, "seed", "http://a.test/", "--crawl", "rec")
    given = tmp_path / "records.jsonl"
    given.write_text(json.dumps({"url": "http://a.test/x", "outcome": "failed"}) + "\n")
    out = rqcrawl(redis_url, "failures", "rec", "--records", str(given)).stdout
    assert out.split() == ["other", "-", "http://a.test/x"]


MODULES = {
    "boom.py": "raise RuntimeError('no database at import time')\n",
    "ownclient.py": "from rqcrawl.fetch.clients.requests_client import RequestsClient as Client\n",
}


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ('http_client = "no_such_module:Client"', "http_client 'no_such_module:Client': No module"),
        ('http_client = "json:JSONDecoder"', "http_client 'json:JSONDecoder': not an HttpClient"),
        ('http_client = "json:Missing"', "has no attribute 'Missing'"),
        ('http_client = "boom:Client"', "importing 'boom' raised RuntimeError: no database"),
        ('exporters = {x = "json:JSONDecoder"}', "'exporters': export format 'x': json:JSONDec"),
        ('exporters = {x = "no_such_module:X"}', "format 'x' (no_such_module:X) cannot be loaded"),
        ('exporters = {x = "boom:X"}', "importing 'boom' raised RuntimeError"),
    ],
)
def test_a_class_name_that_does_not_load_is_refused_at_seeding(redis_url, tmp_path, setting, said):
    """Seeded, it made every URL `lost` with two tracebacks a page; now one line, and no
    crawl. The working directory is on the import path, as `rq worker` puts it."""
    for name, code in MODULES.items():
        (tmp_path / name).write_text(code)
    (tmp_path / "c.toml").write_text(f"[crawl]\n{setting}\n")
    seed = [str(BIN / "rqcrawl"), "seed", "http://a.test/", "--crawl", "cls", "--config", "c.toml"]
    proc = subprocess.run(seed, cwd=tmp_path, env=env_with(redis_url), capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert_one_line_error(proc, said)
    assert "cls" not in rqcrawl(redis_url, "list").stdout
    (tmp_path / "c.toml").write_text('[crawl]\nhttp_client = "ownclient:Client"\n')
    subprocess.run(seed, cwd=tmp_path, env=env_with(redis_url), check=True, timeout=60)
